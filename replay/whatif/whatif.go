// Package whatif decides a recorded stream of decisions again under
// candidate policies and configuration and reports what changes. The
// stream is a decision log written with decision_log.include_input, or MACP
// transcripts (recorded here under Warden's default policies, as `warden
// replay` decides them).
//
// MACP messages go through the Enforcer in order, with each session's
// state rebuilt as the runtime saw it: a message originally allowed
// advances the state even when the candidate refuses it (it is committed
// under Warden's default policies alone), one originally refused never
// does. MCP and A2A decisions are evaluated again on the recorded policy
// input: their task state depends on the upstream's answers, which are not
// recorded, so it is the state Warden saw then.
package whatif

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/decisionlog"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Entry is one recorded decision and where it was read.
type Entry struct {
	Source string // file:line, or file:index for a transcript
	Record decisionlog.Record
}

// Stream is one input: its decisions in order, and the governance policies
// a transcript registers inline.
type Stream struct {
	Entries  []Entry
	Policies []macp.PolicyDescriptor
}

// ReadLog reads a decision log, one JSON record a line. A line that is not
// a record is an error naming it.
func ReadLog(r io.Reader, name string) (Stream, error) {
	var s Stream
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var rec decisionlog.Record
			if derr := json.Unmarshal(line, &rec); derr != nil {
				return s, fmt.Errorf("%s:%d: not a decision-log record: %w", name, n, derr)
			}
			if rec.DecisionID == "" || rec.Input.Protocol == "" {
				return s, fmt.Errorf("%s:%d: not a decision-log record: no decision_id or input.protocol", name, n)
			}
			s.Entries = append(s.Entries, Entry{Source: fmt.Sprintf("%s:%d", name, n), Record: rec})
		}
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, fmt.Errorf("read %s: %w", name, err)
		}
	}
}

// Open reads file as a decision log, or as a MACP transcript when its first
// object is not a decision record (recorded under base, see Record).
func Open(ctx context.Context, base *policies.Engine, file string) (Stream, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Stream{}, fmt.Errorf("read %s: %w", file, err)
	}
	var head map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(b)).Decode(&head) == nil && head["messages"] != nil && head["decision_id"] == nil {
		return Record(ctx, base, file)
	}
	return ReadLog(bytes.NewReader(b), file)
}

// Record replays a MACP transcript through an Enforcer with engine's
// policies, every allowed message accepted, and returns the decision log it
// writes with include_input.
func Record(ctx context.Context, engine *policies.Engine, file string) (Stream, error) {
	tr, err := replay.Load(file)
	if err != nil {
		return Stream{}, err
	}
	var buf bytes.Buffer
	dl, err := decisionlog.New(decisionlog.Config{Path: "-", IncludeInput: true}, &buf, nil)
	if err != nil {
		return Stream{}, err
	}
	var clock time.Time
	dl.WithClock(func() time.Time { return clock })
	auth, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		return Stream{}, err
	}
	core, err := proxy.New(proxy.Config{PipelineDepth: proxy.DefaultPipelineDepth}, proxy.Options{Authenticator: auth, Policies: engine,
		Now: func() time.Time { return clock }, Observer: dl, RecordInputs: true})
	if err != nil {
		return Stream{}, err
	}
	enf, err := sessions.New(core, sessions.Options{})
	if err != nil {
		return Stream{}, err
	}
	var s Stream
	if tr.Fixture.Policy != nil {
		if err := enf.Policies().Register(*tr.Fixture.Policy); err != nil {
			return Stream{}, fmt.Errorf("transcript %s: %w", tr.Name, err)
		}
		s.Policies = append(s.Policies, *tr.Fixture.Policy)
	}
	for _, st := range tr.Steps {
		clock = st.At
		d, err := enf.Enforce(ctx, st.Request)
		if err != nil {
			return Stream{}, fmt.Errorf("%s:%s: could not decide: %w", tr.Name, st.Index, err)
		}
		d.Settle(d.Allow)
	}
	if err := dl.Close(); err != nil {
		return Stream{}, err
	}
	log, err := ReadLog(&buf, filepath.Base(file))
	if err != nil {
		return Stream{}, err
	}
	for i := range log.Entries {
		log.Entries[i].Source = tr.Name + ":" + tr.Steps[i].Index
	}
	s.Entries = log.Entries
	return s, nil
}

// WriteLog writes s's records as a decision log, one JSON record a line.
func WriteLog(w io.Writer, s Stream) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, e := range s.Entries {
		if err := enc.Encode(&e.Record); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Options are the candidate and what state is rebuilt with.
type Options struct {
	// Candidate is the policy set decided with.
	Candidate *policies.Engine
	// Base is Warden's default policies alone: it commits a MACP message the
	// runtime accepted and the candidate refuses.
	Base *policies.Engine
	// Enforcer is the candidate's enforcer configuration (dry_run, ...).
	Enforcer proxy.Config
}

// Outcome is one decision's result.
type Outcome struct {
	Allow   bool   `json:"allow"`
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

func (o Outcome) String() string {
	if o.Allow {
		return "allow"
	}
	return "deny " + o.Code + " " + o.Reason
}

// Change kinds.
const (
	AllowToDeny   = "allow→deny"
	DenyToAllow   = "deny→allow"
	ReasonChanged = "reason changed"
)

// Change is one decision that the candidate decides differently.
type Change struct {
	Source     string  `json:"source"`
	DecisionID string  `json:"decision_id"`
	Protocol   string  `json:"protocol"`
	SessionID  string  `json:"session_id,omitempty"`
	Principal  string  `json:"principal"`
	Type       string  `json:"type"`
	Kind       string  `json:"kind"`
	Before     Outcome `json:"before"`
	After      Outcome `json:"after"`
}

// Report is what what-if found.
type Report struct {
	Read          int            `json:"read"`
	Redecided     int            `json:"redecided"`
	Skipped       map[string]int `json:"skipped,omitempty"` // why -> how many
	AllowToDeny   int            `json:"allow_to_deny"`
	DenyToAllow   int            `json:"deny_to_allow"`
	ReasonChanged int            `json:"reason_changed"`
	// ByReason counts the changes by what the candidate decides: its reason
	// (and for an operator rule, its message), or "allowed".
	ByReason map[string]int `json:"by_reason,omitempty"`
	Changes  []Change       `json:"changes"`
	Notes    []string       `json:"notes,omitempty"`
}

// Changed is the number of decisions that change.
func (r *Report) Changed() int { return r.AllowToDeny + r.DenyToAllow + r.ReasonChanged }

// Skip reasons.
const (
	skipNoMessage = "refused before there was a message or policy input to decide again"
	skipOmitted   = "input over decision_log.max_input_bytes"
	skipAuth      = "refused at authentication"
	skipBefore    = "MACP session started before the log begins (its state is not in the log)"
	skipPolicy    = "MACP session under a governance policy the runtime supplied (not in the log)"
)

// Run decides every entry of streams again, in order, and reports the
// changes.
func Run(ctx context.Context, opts Options, streams []Stream) (*Report, error) {
	var clock time.Time
	auth, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		return nil, err
	}
	core, err := proxy.New(opts.Enforcer, proxy.Options{Authenticator: auth, Policies: opts.Candidate, Now: func() time.Time { return clock }})
	if err != nil {
		return nil, err
	}
	enf, err := sessions.New(core, sessions.Options{})
	if err != nil {
		return nil, err
	}
	rep := &Report{Skipped: map[string]int{}, ByReason: map[string]int{}, Changes: []Change{}}
	recorded, mcp := false, false
	started := map[string]bool{} // MACP sessions whose SessionStart is in the streams
	lost := map[string]bool{}    // ... under a policy the runtime supplied
	for _, s := range streams {
		for _, p := range s.Policies {
			if err := enf.Policies().Register(p); err != nil {
				return nil, err
			}
		}
		for _, e := range s.Entries {
			rep.Read++
			r := e.Record
			in := r.Input
			before := Outcome{Allow: r.Result.Allow && !r.Result.DryRun, Code: r.Result.Code, Reason: r.Result.Reason, Message: r.Result.Message}
			recorded = recorded || in.Recorded
			switch {
			case in.Omitted != "":
				rep.Skipped[skipOmitted]++
				if in.Protocol == "macp" && before.Allow {
					rep.Notes = append(rep.Notes, fmt.Sprintf("%s: session %s: an allowed message is not recorded (%s); later decisions of the session are made on a state that misses it", e.Source, in.SessionID, in.Omitted))
				}
				continue
			case !in.Recorded && before.Allow:
				return nil, fmt.Errorf("%s: decision %s: %w", e.Source, r.DecisionID, decisionlog.ErrNoInput)
			case !in.Recorded || (in.Protocol != "macp" && in.Policy == nil):
				rep.Skipped[skipNoMessage]++
				continue
			case in.Protocol == "macp" && r.Result.Reason == string(rules.ReasonUnauthenticated):
				rep.Skipped[skipAuth]++
				continue
			case in.Protocol == "macp" && lost[in.SessionID]:
				rep.Skipped[skipPolicy]++
				continue
			case in.Protocol == "macp" && in.Type == macp.TypeSessionStart:
				started[in.SessionID] = true
			case in.Protocol == "macp" && in.SessionID != "" && !started[in.SessionID]:
				rep.Skipped[skipBefore]++
				continue
			}
			clock = r.Timestamp
			var after Outcome
			if in.Protocol == "macp" {
				after, err = decideMACP(ctx, enf, auth, opts, e, before.Allow, &rep.Notes)
			} else {
				mcp = true
				after, err = evaluate(ctx, opts, e, before)
			}
			if err != nil {
				return nil, err
			}
			if in.Type == macp.TypeSessionStart && before.Allow && after.Reason == string(rules.ReasonUnknownPolicy) {
				// Warden fetched the policy_version from the runtime, which
				// what-if does not ask: the session cannot be rebuilt.
				delete(started, in.SessionID)
				lost[in.SessionID] = true
				rep.Skipped[skipPolicy]++
				continue
			}
			rep.Redecided++
			kind := ""
			switch {
			case before.Allow && !after.Allow:
				kind = AllowToDeny
				rep.AllowToDeny++
			case !before.Allow && after.Allow:
				kind = DenyToAllow
				rep.DenyToAllow++
			case !before.Allow && (before.Code != after.Code || before.Reason != after.Reason):
				kind = ReasonChanged
				rep.ReasonChanged++
			default:
				continue
			}
			rep.ByReason[ruleOf(after)]++
			rep.Changes = append(rep.Changes, Change{Source: e.Source, DecisionID: r.DecisionID, Protocol: in.Protocol, SessionID: in.SessionID,
				Principal: in.Principal, Type: in.Type, Kind: kind, Before: before, After: after})
		}
	}
	if rep.Read > 0 && !recorded {
		return nil, fmt.Errorf("no decision has its input: %w", decisionlog.ErrNoInput)
	}
	if mcp {
		rep.Notes = append(rep.Notes, "MCP and A2A decisions are evaluated again on their recorded policy input: the task state in it is what Warden saw then, as it follows the upstream's answers, which are not recorded")
	}
	return rep, nil
}

// ruleOf names what decided o, for the counts.
func ruleOf(o Outcome) string {
	switch {
	case o.Allow:
		return "allowed"
	case o.Reason == string(rules.ReasonOperatorPolicy) && o.Message != "":
		return o.Code + " " + o.Reason + ": " + o.Message
	}
	return o.Code + " " + o.Reason
}

// decideMACP decides e's message through enf and settles it as the runtime
// did: committed when it was originally allowed, under the default policies
// alone when the candidate refuses it.
func decideMACP(ctx context.Context, enf *sessions.Decider, auth *authn.Authenticator, opts Options, e Entry, accepted bool, notes *[]string) (Outcome, error) {
	in := e.Record.Input
	req := sessions.Request{Principal: &authn.Principal{ID: in.Principal, Method: in.Via, Claims: in.Claims}}
	if len(in.Envelope) == 0 {
		req.Op, req.SessionID = in.Type, in.SessionID
	} else {
		req.Envelope = &macpv1.Envelope{}
		if err := protojson.Unmarshal(in.Envelope, req.Envelope); err != nil {
			return Outcome{}, fmt.Errorf("%s: decision %s: envelope: %w", e.Source, e.Record.DecisionID, err)
		}
	}
	d, err := enf.Enforce(ctx, req)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: decision %s: could not decide: %w", e.Source, e.Record.DecisionID, err)
	}
	after := Outcome{Allow: d.Allow && !d.DryRun, Code: string(d.Code), Reason: string(d.Reason), Message: d.Message}
	if !accepted || (d.Allow && !d.DryRun) {
		d.Settle(accepted)
		return after, nil
	}
	d.Settle(false)
	// The runtime accepted what the candidate refuses: commit it as the
	// runtime saw it, decided under the default policies alone.
	enf.Enforcer().Swap(auth, opts.Base)
	defer enf.Enforcer().Swap(auth, opts.Candidate)
	b, err := enf.Enforce(ctx, req)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: decision %s: could not decide: %w", e.Source, e.Record.DecisionID, err)
	}
	b.Settle(true)
	if (!b.Allow || b.DryRun) && b.Reason != rules.ReasonUnknownPolicy {
		*notes = append(*notes, fmt.Sprintf("%s: session %s: the runtime accepted %s but Warden's rules refuse it with this configuration (%s): later decisions of the session are made on a state that misses it",
			e.Source, in.SessionID, in.Type, b.Reason))
	}
	return after, nil
}

// evaluate evaluates an MCP or A2A decision's recorded policy input with
// the candidate policies.
func evaluate(ctx context.Context, opts Options, e Entry, before Outcome) (Outcome, error) {
	var in policies.Input
	if err := json.Unmarshal(e.Record.Input.Policy, &in); err != nil {
		return Outcome{}, fmt.Errorf("%s: decision %s: policy input: %w", e.Source, e.Record.DecisionID, err)
	}
	denials, err := opts.Candidate.Evaluate(ctx, &in)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: decision %s: %w", e.Source, e.Record.DecisionID, err)
	}
	out := Outcome{Allow: true, Reason: string(rules.ReasonAllowed)}
	if len(denials) > 0 && !opts.Enforcer.DryRun {
		v := denials[0]
		if v.Reason == rules.ReasonNotOwner && before.Reason == string(rules.ReasonUnknownTask) {
			v.Reason = rules.ReasonUnknownTask // as the Enforcer names a task it does not know
		}
		out = Outcome{Code: string(v.Code), Reason: string(v.Reason), Message: v.Detail}
	}
	return out, nil
}

// WriteText writes the report as `warden what-if` prints it.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "records read: %d\nre-decided: %d\n", r.Read, r.Redecided)
	for _, k := range sortedKeys(r.Skipped) {
		fmt.Fprintf(bw, "not re-decided: %d %s\n", r.Skipped[k], k)
	}
	fmt.Fprintf(bw, "changed: %d (allow→deny %d, deny→allow %d, reason changed %d)\n", r.Changed(), r.AllowToDeny, r.DenyToAllow, r.ReasonChanged)
	for _, k := range sortedKeys(r.ByReason) {
		fmt.Fprintf(bw, "  %d now %s\n", r.ByReason[k], k)
	}
	for _, c := range r.Changes {
		fmt.Fprintf(bw, "%s %s session=%s principal=%s type=%s %s: %s → %s\n", c.Source, c.DecisionID, c.SessionID, c.Principal, c.Type, c.Kind, c.Before, c.After)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(bw, "note:", n)
	}
	return bw.Flush()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Package replay runs MACP transcripts in the conformance-fixture format
// (reference/macp/conformance/README.md) through Warden's Enforcer offline:
// every message is authenticated as its fixture sender, decided by the rules
// and policies, and committed when allowed, as in ext_authz mode where the
// upstream's answer is not seen. It reports each decision and whether the
// outcomes match the fixture's expectations.
//
// Warden extends the format with optional fields used by its attack
// transcripts: per message, "principal" (the authenticated identity when it
// differs from the envelope's sender), "message_id", "advance_ms" (move the
// clock before the message), "op" (a control RPC: CancelSession,
// SuspendSession, ResumeSession), "mode" and "macp_version" overrides, and
// payload_type "raw" (payload is base64 bytes). A transcript whose messages
// include a SessionStart does not get one synthesized from its header.
package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Fixture is one transcript.
type Fixture struct {
	Mode                 string                 `json:"mode"`
	Initiator            string                 `json:"initiator"`
	Participants         []string               `json:"participants"`
	ModeVersion          string                 `json:"mode_version"`
	ConfigurationVersion string                 `json:"configuration_version"`
	PolicyVersion        string                 `json:"policy_version"`
	TTLMs                int64                  `json:"ttl_ms"`
	Policy               *macp.PolicyDescriptor `json:"policy"`
	Messages             []FixtureMessage       `json:"messages"`
	ExpectedFinalState   string                 `json:"expected_final_state"`
	ExpectedResolution   map[string]any         `json:"expected_resolution"`
	ExpectedModeState    map[string]any         `json:"expected_mode_state"`
	ResolutionPresent    *bool                  `json:"expect_resolution_present"`
	// Description and Comment are prose, ignored.
	Description string `json:"description"`
	Comment     string `json:"_comment"`
}

// FixtureMessage is one message of a transcript.
type FixtureMessage struct {
	Sender            string          `json:"sender"`
	MessageType       string          `json:"message_type"`
	PayloadType       string          `json:"payload_type"`
	Payload           json.RawMessage `json:"payload"`
	Expect            string          `json:"expect"`
	ExpectedErrorCode string          `json:"expected_error_code"`
	// Warden's extensions.
	Principal   string `json:"principal"`
	MessageID   string `json:"message_id"`
	AdvanceMs   int64  `json:"advance_ms"`
	Op          string `json:"op"`
	Mode        string `json:"mode"`
	MacpVersion string `json:"macp_version"`
	Comment     string `json:"_comment"`
}

// Line is the decision on one message.
type Line struct {
	File     string       `json:"file"`
	Index    string       `json:"index"`
	Sender   string       `json:"sender"`
	Type     string       `json:"message_type"`
	Accept   bool         `json:"accept"`
	Code     rules.Code   `json:"code,omitempty"`
	Reason   rules.Reason `json:"reason"`
	Detail   string       `json:"detail,omitempty"`
	Roles    []string     `json:"roles"`
	Expected string       `json:"expect,omitempty"`
	Match    bool         `json:"match"`
}

// String formats the line as `warden replay` prints it.
func (l Line) String() string {
	verdict, code := "accept", "-"
	if !l.Accept {
		verdict, code = "reject", string(l.Code)
	}
	return fmt.Sprintf("%s:%s %s %s %s %s %s", l.File, l.Index, l.Sender, l.Type, verdict, code, l.Reason)
}

// Result is the outcome of one transcript.
type Result struct {
	File     string   `json:"file"`
	Lines    []Line   `json:"lines"`
	Failures []string `json:"failures"`
}

// OK reports whether every expectation held.
func (r Result) OK() bool { return len(r.Failures) == 0 }

// epoch is the replay clock's start: fixed, so runs are repeatable.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Step is one message of a transcript, ready to be decided.
type Step struct {
	Index    string
	Sender   string
	Type     string
	Request  sessions.Request
	At       time.Time // the replay clock when the message is decided
	Expect   string    // accept | reject
	WantCode string    // the expected error code, when given
}

// Transcript is a loaded transcript: its header and the requests to decide.
type Transcript struct {
	Name      string
	Fixture   Fixture
	SessionID string
	Steps     []Step
}

// Load reads a transcript and builds its requests: the fixture's sender is
// the authenticated principal (a bearer token in dev mode), unless a message
// names another.
func Load(file string) (*Transcript, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	fx, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("transcript %s: %w", file, err)
	}
	name := filepath.Base(file)
	sum := sha256.Sum256([]byte(name))
	tr := &Transcript{Name: name, Fixture: fx, SessionID: uuidV4(sum[:16])}

	msgs := fx.Messages
	hasStart := false
	for _, m := range msgs {
		hasStart = hasStart || m.MessageType == macp.TypeSessionStart
	}
	if !hasStart {
		start, err := json.Marshal(map[string]any{
			"participants": fx.Participants, "mode_version": fx.ModeVersion, "configuration_version": fx.ConfigurationVersion,
			"policy_version": fx.PolicyVersion, "ttl_ms": fx.TTLMs, "intent": "replay",
		})
		if err != nil {
			return nil, err
		}
		msgs = append([]FixtureMessage{{Sender: fx.Initiator, MessageType: macp.TypeSessionStart, PayloadType: "SessionStart", Payload: start, Expect: "accept", MessageID: "start"}}, msgs...)
	}
	clock := epoch
	for i, m := range msgs {
		index := strconv.Itoa(i)
		if !hasStart {
			index = strconv.Itoa(i - 1)
			if i == 0 {
				index = "start"
			}
		}
		clock = clock.Add(time.Millisecond + time.Duration(m.AdvanceMs)*time.Millisecond)
		principal := m.Principal
		if principal == "" {
			principal = m.Sender
		}
		st := Step{Index: index, Sender: m.Sender, Type: m.MessageType, At: clock, Expect: m.Expect, WantCode: outsiderCode(fx, m, principal),
			Request: sessions.Request{Credentials: authn.Credentials{Bearer: principal}}}
		if m.Op != "" {
			st.Type = m.Op
			st.Request.Op, st.Request.SessionID = m.Op, tr.SessionID
		} else {
			payload, err := encodePayload(m.PayloadType, m.Payload)
			if err != nil {
				return nil, fmt.Errorf("%s:%s: %w", name, index, err)
			}
			id := m.MessageID
			if id == "" {
				id = "m-" + index
			}
			mode, version := fx.Mode, macp.ProtocolVersion
			if m.Mode != "" {
				mode = m.Mode
			}
			if m.MacpVersion != "" {
				version = m.MacpVersion
			}
			st.Request.Envelope = &macpv1.Envelope{
				MacpVersion: version, Mode: mode, MessageType: m.MessageType, MessageId: id,
				SessionId: tr.SessionID, Sender: m.Sender, TimestampUnixMs: clock.UnixMilli(), Payload: payload,
			}
		}
		tr.Steps = append(tr.Steps, st)
	}
	return tr, nil
}

// outsiderCode is the error code expected of a message: the transcript's,
// but that Warden answers a principal who is neither the session's
// initiator nor a participant as for a session that does not exist
// (SESSION_NOT_FOUND, where the runtime may say FORBIDDEN, DUPLICATE_MESSAGE
// or SESSION_NOT_OPEN), once the credential and the envelope's own shape
// passed: an outsider learns nothing of the session.
func outsiderCode(fx Fixture, m FixtureMessage, principal string) string {
	switch {
	case m.Expect != "reject", m.MessageType == macp.TypeSessionStart,
		principal == fx.Initiator, slices.Contains(fx.Participants, principal):
		return m.ExpectedErrorCode
	}
	switch rules.Code(m.ExpectedErrorCode) {
	case rules.CodeUnauthenticated, rules.CodeInvalidEnvelope:
		return m.ExpectedErrorCode
	}
	return string(rules.CodeSessionNotFound)
}

// decode reads a transcript strictly: an unknown key (a misspelled
// "expect", say) is an error, as are a document that is not a transcript at
// all and a message without a valid expectation.
func decode(b []byte) (Fixture, error) {
	var fx Fixture
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fx); err != nil {
		return fx, fmt.Errorf("not a transcript in the conformance-fixture format: %w", err)
	}
	if dec.More() {
		return fx, errors.New("not a transcript: data after the JSON object")
	}
	var missing []string
	if fx.Mode == "" {
		missing = append(missing, `"mode"`)
	}
	if fx.Initiator == "" {
		missing = append(missing, `"initiator"`)
	}
	if len(fx.Messages) == 0 {
		missing = append(missing, `"messages"`)
	}
	if len(missing) > 0 {
		return fx, fmt.Errorf("not a transcript in the conformance-fixture format: no %s", strings.Join(missing, ", "))
	}
	for i, m := range fx.Messages {
		switch m.Expect {
		case "accept", "reject":
		case "":
			return fx, fmt.Errorf("message %d: no \"expect\" (want \"accept\" or \"reject\")", i)
		default:
			return fx, fmt.Errorf("message %d: \"expect\" is %q, want \"accept\" or \"reject\"", i, m.Expect)
		}
		if m.ExpectedErrorCode != "" && m.Expect != "reject" {
			return fx, fmt.Errorf("message %d: \"expected_error_code\" %s on a message expected to be accepted", i, m.ExpectedErrorCode)
		}
	}
	return fx, nil
}

// Decide decides one step; Settle is the decider's business.
type Decide func(ctx context.Context, st Step) (proxy.Decision, error)

// Evaluate decides every step of tr with decide and compares the outcomes,
// and then the session's final state (from session), with the transcript's
// expectations.
func Evaluate(ctx context.Context, tr *Transcript, decide Decide, session func() (*macp.Session, error)) (Result, error) {
	res := Result{File: tr.Name}
	for _, st := range tr.Steps {
		d, err := decide(ctx, st)
		if err != nil {
			return res, fmt.Errorf("%s:%s: could not decide: %w", tr.Name, st.Index, err)
		}
		line := Line{File: tr.Name, Index: st.Index, Sender: st.Sender, Type: st.Type, Accept: d.Allow, Code: d.Code, Reason: d.Reason,
			Detail: d.Message, Roles: d.Roles, Expected: st.Expect, Match: true}
		switch {
		case st.Expect == "accept" && !d.Allow:
			line.Match = false
			res.Failures = append(res.Failures, fmt.Sprintf("%s:%s: expected accept, got reject %s (%s: %s)", tr.Name, st.Index, d.Code, d.Reason, d.Message))
		case st.Expect == "reject" && d.Allow:
			line.Match = false
			res.Failures = append(res.Failures, fmt.Sprintf("%s:%s: expected reject, got accept", tr.Name, st.Index))
		case st.Expect == "reject" && st.WantCode != "" && string(d.Code) != st.WantCode:
			line.Match = false
			res.Failures = append(res.Failures, fmt.Sprintf("%s:%s: expected %s, got %s (%s: %s)", tr.Name, st.Index, st.WantCode, d.Code, d.Reason, d.Message))
		}
		res.Lines = append(res.Lines, line)
	}
	s, err := session()
	if err != nil {
		return res, err
	}
	res.Failures = append(res.Failures, checkFinal(tr.Name, &tr.Fixture, s)...)
	return res, nil
}

// NewEnforcer returns an offline MACP decider (on its own Enforcer) for a
// transcript: dev
// authentication, the transcript's inline policy registered, a clock the
// caller sets to each step's time, and warden's default pipeline depth.
func NewEnforcer(engine *policies.Engine, tr *Transcript, now func() time.Time) (*sessions.Decider, error) {
	return NewReplica(engine, tr, now, nil)
}

// NewReplica is NewEnforcer for one of several replicas sharing sessions
// through store (nil: none), as an ext_authz fleet on Redis does.
func NewReplica(engine *policies.Engine, tr *Transcript, now func() time.Time, store sessions.Store) (*sessions.Decider, error) {
	auth, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		return nil, err
	}
	e, err := proxy.New(proxy.Config{Sessions: 64, PipelineDepth: proxy.DefaultPipelineDepth}, proxy.Options{Authenticator: auth, Policies: engine, Now: now})
	if err != nil {
		return nil, err
	}
	enf, err := sessions.New(e, sessions.Options{Store: store})
	if err != nil {
		return nil, err
	}
	if tr.Fixture.Policy != nil {
		if err := enf.Policies().Register(*tr.Fixture.Policy); err != nil {
			return nil, fmt.Errorf("transcript %s: %w", tr.Name, err)
		}
	}
	return enf, nil
}

// Run replays the transcript in file against a fresh Enforcer that uses
// engine for its policies, taking every allowed message as accepted. The
// acceptances land late, as a runtime's answers do under load: those of the
// messages allowed so far land, last first, while the next step is decided,
// so record-only messages are decided with others in flight and
// state-changing ones wait for them. The decisions are those of a strictly
// serial replay (proxy's pipelining guarantees it).
func Run(ctx context.Context, engine *policies.Engine, file string) (Result, error) {
	tr, err := Load(file)
	if err != nil {
		return Result{File: file}, err
	}
	clock := epoch
	enf, err := NewEnforcer(engine, tr, func() time.Time { return clock })
	if err != nil {
		return Result{File: file}, err
	}
	var (
		landing sync.WaitGroup
		flights []proxy.Decision
	)
	land := func() {
		answered := flights
		flights = nil
		landing.Go(func() {
			for i := len(answered) - 1; i >= 0; i-- {
				answered[i].Settle(true) // no upstream: an allowed message is taken as accepted
			}
		})
	}
	return Evaluate(ctx, tr, func(ctx context.Context, st Step) (proxy.Decision, error) {
		clock = st.At
		land()
		d, err := enf.Enforce(ctx, st.Request)
		if err == nil && d.Allow {
			flights = append(flights, d)
		}
		return d, err
	}, func() (*macp.Session, error) {
		land()
		landing.Wait()
		return enf.Session(ctx, tr.SessionID)
	})
}

// checkFinal compares the session's final state with the fixture's
// expectations.
func checkFinal(name string, fx *Fixture, s *macp.Session) []string {
	var fails []string
	if s == nil {
		if fx.ExpectedFinalState != "" {
			fails = append(fails, fmt.Sprintf("%s: expected final state %s, but the session was never started", name, fx.ExpectedFinalState))
		}
		return fails
	}
	if fx.ExpectedFinalState != "" && fx.ExpectedFinalState != s.State.String() {
		fails = append(fails, fmt.Sprintf("%s: expected final state %s, got %s", name, fx.ExpectedFinalState, s.State))
	}
	if fx.ResolutionPresent != nil && *fx.ResolutionPresent != (s.Resolution() != nil) {
		fails = append(fails, fmt.Sprintf("%s: expected resolution present=%v, got %v", name, *fx.ResolutionPresent, s.Resolution() != nil))
	}
	if len(fx.ExpectedResolution) > 0 {
		if s.Resolution() == nil {
			fails = append(fails, name+": expected a resolution, got none")
		} else {
			got := map[string]any{
				"action": s.Resolution().Action, "outcome_positive": s.Resolution().OutcomePositive,
				"mode_version": s.Resolution().ModeVersion, "configuration_version": s.Resolution().ConfigVersion,
				"policy_version": s.Resolution().PolicyVersion,
			}
			for _, k := range sortedKeys(fx.ExpectedResolution) {
				if !reflect.DeepEqual(fx.ExpectedResolution[k], got[k]) {
					fails = append(fails, fmt.Sprintf("%s: expected resolution %s=%v, got %v", name, k, fx.ExpectedResolution[k], got[k]))
				}
			}
		}
	}
	if len(fx.ExpectedModeState) > 0 {
		fails = append(fails, subset(name+": mode state", fx.ExpectedModeState, normalize(s.ModeState()))...)
	}
	return fails
}

// subset reports where want is not contained in got.
func subset(at string, want, got any) []string {
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: expected %v, got %v", at, want, got)}
		}
		return nil
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: expected an object, got %v", at, got)}
	}
	var fails []string
	for _, k := range sortedKeys(wm) {
		fails = append(fails, subset(at+"."+k, wm[k], gm[k])...)
	}
	return fails
}

// normalize round-trips v through JSON so it compares with decoded fixtures.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// uuidV4 formats 16 bytes as a lowercase version-4 UUID.
func uuidV4(b []byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Conformance returns the spec's conformance fixtures in specDir, each one
// Warden keeps a corrected copy of in overridesDir (test/conformance: where
// a fixture disagrees with the runtime, which the fixtures' README ranks
// above them) replaced by that copy.
func Conformance(specDir, overridesDir string) ([]string, error) {
	spec, err := filepath.Glob(filepath.Join(specDir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(spec) == 0 {
		return nil, fmt.Errorf("no conformance fixtures in %s", specDir)
	}
	for i, f := range spec {
		o := filepath.Join(overridesDir, filepath.Base(f))
		if _, err := os.Stat(o); err == nil {
			spec[i] = o
		}
	}
	return spec, nil
}

// Transcripts returns the conformance fixtures (see Conformance) followed by
// the attack transcripts in attacksDir: every transcript the adapters' tests
// replay.
func Transcripts(specDir, overridesDir, attacksDir string) ([]string, error) {
	files, err := Conformance(specDir, overridesDir)
	if err != nil {
		return nil, err
	}
	attacks, err := filepath.Glob(filepath.Join(attacksDir, "*.json"))
	if err != nil {
		return nil, err
	}
	return append(files, attacks...), nil
}

package whatif

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/decisionlog"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/tenancy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules/a2a"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/whatif")

// record replays transcripts through one Enforcer with the real decision
// logger attached (include_input), every allowed message accepted as the
// runtime would, and returns the log file it wrote.
func record(t *testing.T, engine *policies.Engine, files []string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	dl, err := decisionlog.New(decisionlog.Config{Path: path, IncludeInput: true}, nil, map[string]string{"app": "warden"})
	if err != nil {
		t.Fatal(err)
	}
	var clock time.Time
	dl.WithClock(func() time.Time { return clock })
	auth, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	core, err := proxy.New(proxy.Config{PipelineDepth: proxy.DefaultPipelineDepth}, proxy.Options{Authenticator: auth, Policies: engine,
		Now: func() time.Time { return clock }, Observer: dl, RecordInputs: true})
	if err != nil {
		t.Fatal(err)
	}
	enf, err := sessions.New(core, sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		tr, err := replay.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Fixture.Policy != nil {
			t.Fatalf("%s registers a policy: pick transcripts without one", f)
		}
		for _, st := range tr.Steps {
			clock = st.At
			d, err := enf.Enforce(ctx, st.Request)
			if err != nil {
				t.Fatal(err)
			}
			d.Settle(d.Allow)
		}
	}
	if err := dl.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func engine(t *testing.T, files ...string) *policies.Engine {
	t.Helper()
	e, err := policies.New(context.Background(), policies.Config{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func attackTranscripts(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../test/attacks/macp/*.json")
	if err != nil || len(files) < 20 {
		t.Fatalf("attack transcripts: %v (%d)", err, len(files))
	}
	var out []string
	for _, f := range files {
		tr, err := replay.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Fixture.Policy == nil {
			out = append(out, f)
		}
	}
	return out
}

func readLog(t *testing.T, path string) Stream {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadLog(f, filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWhatIf records a decision log with one policy set and decides it again
// with another: exactly the decisions of (principal, type) the changed rule
// names change, each once, and nothing else does, although later messages of
// the same sessions depend on the refused ones (the state is rebuilt as the
// runtime saw it). The expected set is read from the recorded log.
func TestWhatIf(t *testing.T) {
	noComplete := "../../testdata/whatif/worker-no-complete.rego"
	noAccept := "../../testdata/whatif/worker-no-accept.rego"
	files := attackTranscripts(t)
	for _, tc := range []struct {
		name           string
		recorded, cand []string
		principal, typ string
		wasAllowed     bool // the changing decisions were allowed when recorded
		kind           string
	}{
		{"unchanged defaults", nil, nil, "", "", false, ""},
		{"unchanged operator file", []string{"../../deploy/config/operator.rego"}, []string{"../../deploy/config/operator.rego"}, "", "", false, ""},
		{"refuse TaskComplete", nil, []string{noComplete}, "agent://worker", "TaskComplete", true, AllowToDeny},
		{"refuse TaskAccept, later messages depend on it", nil, []string{noAccept}, "agent://worker", "TaskAccept", true, AllowToDeny},
		{"drop the rule", []string{noComplete}, nil, "agent://worker", "TaskComplete", false, DenyToAllow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := readLog(t, record(t, engine(t, tc.recorded...), files))
			var want []string
			for _, e := range log.Entries {
				in, res := e.Record.Input, e.Record.Result
				if tc.kind != "" && in.Principal == tc.principal && in.Type == tc.typ && res.Allow == tc.wasAllowed {
					// Under the rule, only the decisions the defaults allow change.
					if tc.kind == AllowToDeny || res.Reason == "operator_policy" {
						want = append(want, e.Record.DecisionID)
					}
				}
			}
			if tc.kind != "" && len(want) < 3 {
				t.Fatalf("only %d decisions would change: a weak test", len(want))
			}
			rep, err := Run(context.Background(), Options{Candidate: engine(t, tc.cand...), Base: engine(t),
				Enforcer: proxy.Config{PipelineDepth: proxy.DefaultPipelineDepth}}, []Stream{log})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range rep.Changes {
				got = append(got, c.DecisionID)
				if c.Kind != tc.kind || c.Principal != tc.principal || c.Type != tc.typ {
					t.Errorf("unexpected change %+v", c)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("changed %d decisions %v, want %d %v", len(got), got, len(want), want)
			}
			if rep.Changed() != len(want) || rep.Read != len(log.Entries) || rep.Redecided+sum(rep.Skipped) != rep.Read {
				t.Errorf("counts: %+v", rep)
			}
			if len(rep.Notes) > 0 {
				t.Errorf("notes: %v", rep.Notes)
			}
		})
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestBadLogs: a line that is not a record names its line; a log recorded
// without include_input says so.
func TestBadLogs(t *testing.T) {
	ctx := context.Background()
	good := readLog(t, record(t, engine(t), attackTranscripts(t)[:1]))
	b, err := os.ReadFile(record(t, engine(t), attackTranscripts(t)[:1]))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	for _, tc := range []struct{ name, log, err string }{
		{"not JSON", lines[0] + "{oops\n", "x.jsonl:2: not a decision-log record"},
		{"another JSON", lines[0] + lines[1] + `{"name": "warden"}` + "\n", "x.jsonl:3: not a decision-log record: no decision_id"},
		{"no decision id", `{"input": {"protocol": "macp"}}`, "x.jsonl:1: not a decision-log record: no decision_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLog(strings.NewReader(tc.log), "x.jsonl")
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
	t.Run("recorded without include_input", func(t *testing.T) {
		s := good
		s.Entries = slices.Clone(s.Entries)
		for i := range s.Entries {
			in := &s.Entries[i].Record.Input
			in.Recorded, in.Envelope, in.Policy, in.Claims = false, nil, nil, nil
		}
		_, err := Run(ctx, Options{Candidate: engine(t), Base: engine(t)}, []Stream{s})
		if err == nil || !strings.Contains(err.Error(), "recorded without decision_log.include_input") || !strings.Contains(err.Error(), s.Entries[0].Source) {
			t.Fatalf("err %v", err)
		}
	})
}

// TestGolden: the text report, on a decision log recorded from two
// transcripts with a checked-in candidate, is testdata/whatif/report.txt
// (-update rewrites it), the Enforcer's random decision ids numbered.
func TestGolden(t *testing.T) {
	dir := "../../testdata/whatif"
	files := []string{"../../test/attacks/macp/task_forged_complete.json", "../../test/attacks/macp/task_late_report.json"}
	log := readLog(t, record(t, engine(t), files))
	rep, err := Run(context.Background(), Options{Candidate: engine(t, filepath.Join(dir, "worker-no-complete.rego")), Base: engine(t)}, []Stream{log})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for i, e := range log.Entries { // decision ids are random
		got = strings.ReplaceAll(got, " "+e.Record.DecisionID+" ", fmt.Sprintf(" decision-%d ", i+1))
	}
	golden := filepath.Join(dir, "report.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (-update rewrites it):\n%s", golden, got)
	}
}

// TestWhatIfA2A: A2A decisions are evaluated again on their recorded policy
// input: a candidate rule refusing one principal's sends changes exactly
// those, an ownership refusal keeps its reason, and the report says that the
// task state is the one Warden saw.
func TestWhatIfA2A(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a2a.jsonl")
	dl, err := decisionlog.New(decisionlog.Config{Path: path, IncludeInput: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	enf, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: auth, Policies: engine(t), Observer: dl, RecordInputs: true})
	if err != nil {
		t.Fatal(err)
	}
	// The answer to alice's earlier message created t-alice (learned as
	// that request's decision would; not a decision of its own).
	created := owners.Fact{Key: owners.Key{Kind: owners.A2ATask, ID: "t-alice"}, Created: true, Status: "TASK_STATE_WORKING"}
	if _, err := tenancy.New(enf).Resumed("agent://alice", a2a.MethodSend).Learn(ctx, created); err != nil {
		t.Fatal(err)
	}
	alice, bob := authn.Principal{ID: "agent://alice", Method: "dev"}, authn.Principal{ID: "agent://bob", Method: "dev"}
	var want []string
	for _, req := range []tenancy.Request{
		{Principal: alice, Method: a2a.MethodSend, New: true},
		{Principal: bob, Method: a2a.MethodSend, New: true},
		{Principal: alice, Method: a2a.MethodGetTask, TaskID: "t-alice", Owner: true},
		{Principal: bob, Method: a2a.MethodGetTask, TaskID: "t-alice"},
		{Principal: bob, Method: a2a.MethodSend, New: true},
		{Principal: alice, Method: a2a.MethodMessageContinue, TaskID: "t-alice", Owner: true},
		{Principal: bob, Method: a2a.MethodSend, New: true},
	} {
		d, err := tenancy.New(enf).Enforce(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		d.Settle(d.Allow)
		if req.Principal.ID == bob.ID && req.Method == a2a.MethodSend && d.Allow {
			want = append(want, d.ID)
		}
	}
	if err := dl.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 {
		t.Fatalf("bob's sends allowed when recorded: %d, want 3", len(want))
	}
	cand := filepath.Join(t.TempDir(), "bob.rego")
	if err := os.WriteFile(cand, []byte(`package warden.a2a
import rego.v1
deny contains {"code": "FORBIDDEN", "msg": "bob may not send"} if {
	input.principal.id == "agent://bob"
	input.message.type == "`+a2a.MethodSend+`"
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	log := readLog(t, path)
	for _, tc := range []struct {
		name string
		cand []string
		want []string
	}{{"unchanged", nil, nil}, {"bob may not send", []string{cand}, want}} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Run(ctx, Options{Candidate: engine(t, tc.cand...), Base: engine(t)}, []Stream{log})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range rep.Changes {
				got = append(got, c.DecisionID)
			}
			if !slices.Equal(got, tc.want) || rep.Redecided != len(log.Entries) || rep.AllowToDeny != len(tc.want) {
				t.Fatalf("changes %v, want %v; report %+v", got, tc.want, rep)
			}
			if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "not recorded") {
				t.Errorf("notes %v", rep.Notes)
			}
		})
	}
}

// TestLogStartsMidSession: decisions of a MACP session whose SessionStart
// is not in the log are not decided again on a state Warden does not have
// (they would all read "unknown session"); they are counted as skipped.
func TestLogStartsMidSession(t *testing.T) {
	log := readLog(t, record(t, engine(t), []string{"../../test/attacks/macp/task_forged_complete.json", "../../test/attacks/macp/task_late_report.json"}))
	cut := log
	cut.Entries = slices.DeleteFunc(slices.Clone(log.Entries), func(e Entry) bool {
		return e.Record.Input.Type == "SessionStart" && e.Record.Input.SessionID == log.Entries[0].Record.Input.SessionID
	})
	if len(cut.Entries) != len(log.Entries)-1 {
		t.Fatalf("cut %d of %d", len(log.Entries)-len(cut.Entries), len(log.Entries))
	}
	rep, err := Run(context.Background(), Options{Candidate: engine(t), Base: engine(t)}, []Stream{cut})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range cut.Entries {
		if e.Record.Input.SessionID == log.Entries[0].Record.Input.SessionID {
			n++
		}
	}
	if rep.Changed() != 0 || rep.Skipped[skipBefore] != n || n == 0 {
		t.Fatalf("report %+v, want %d skipped", rep, n)
	}
}

// TestRuntimePolicy: a transcript that registers a governance policy is
// decided again with it; a log whose session ran under a policy Warden
// fetched from the runtime (not in the log) is skipped, never reported as
// changed.
func TestRuntimePolicy(t *testing.T) {
	ctx := context.Background()
	s, err := Record(ctx, engine(t), "../../test/attacks/macp/task_reassign_with_policy.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policies) != 1 {
		t.Fatalf("policies %d", len(s.Policies))
	}
	rep, err := Run(ctx, Options{Candidate: engine(t), Base: engine(t)}, []Stream{s})
	if err != nil || rep.Changed() != 0 || rep.Redecided != len(s.Entries) {
		t.Fatalf("with the policy: %+v %v", rep, err)
	}
	s.Policies = nil
	rep, err = Run(ctx, Options{Candidate: engine(t), Base: engine(t)}, []Stream{s})
	if err != nil || rep.Changed() != 0 || rep.Skipped[skipPolicy] != len(s.Entries) || len(rep.Notes) != 0 {
		t.Fatalf("without the policy: %+v %v", rep, err)
	}
}

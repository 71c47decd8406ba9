package replay

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/rules/macp"
)

// TestConformance replays the spec's conformance fixtures (Warden's
// corrected copies in test/conformance replacing the ones that disagree with
// the runtime).
func TestConformance(t *testing.T) {
	files, err := Conformance("../testdata/macp/conformance", "../test/conformance")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files, func(f string) bool { return filepath.Dir(f) == "../test/conformance" }) {
		t.Fatal("no override was applied")
	}
	runFiles(t, files, 13)
}

// TestAttacks replays Warden's attack transcripts: each attack must be
// refused with its expected code, and the honest traffic around it accepted.
func TestAttacks(t *testing.T) {
	runDir(t, "../test/attacks/macp/*.json", 20)
}

func runDir(t *testing.T, glob string, min int) {
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	runFiles(t, files, min)
}

func runFiles(t *testing.T, files []string, min int) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil || len(files) < min {
		t.Fatalf("want at least %d transcripts, found %d (%v)", min, len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			res, err := Run(ctx, engine, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range res.Lines {
				t.Log(l.String(), l.Detail)
			}
			for _, f := range res.Failures {
				t.Error(f)
			}
		})
	}
}

// TestPayloadTypesCoverCatalog: replay encodes exactly the catalog's payload
// types.
func TestPayloadTypesCoverCatalog(t *testing.T) {
	want := macp.PayloadTypes()
	var got []string
	for k := range payloadTypes {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("replay payload types %v, catalog %v", got, want)
	}
}

// TestNotATranscript: a JSON document that is not a transcript, and a
// message whose expectation is missing or misspelled, are errors that say
// so, never a mismatch or a silent pass.
func TestNotATranscript(t *testing.T) {
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(extra string) string {
		return `{"mode": "macp.mode.task.v1", "initiator": "agent://a", "participants": ["agent://a", "agent://b"],
			"mode_version": "1.0.0", "configuration_version": "c", "policy_version": "", "ttl_ms": 60000,
			"messages": [{"sender": "agent://a", "message_type": "TaskRequest", "payload_type": "task.TaskRequest",
			"payload": {"taskId": "t1", "title": "x", "requestedAssignee": "agent://b"}` + extra + `}]}`
	}
	for _, tc := range []struct{ name, doc, err string }{
		{"empty object", `{}`, `not a transcript in the conformance-fixture format: no "mode", "initiator", "messages"`},
		{"array", `[]`, "not a transcript in the conformance-fixture format"},
		{"other JSON", `{"name": "warden", "version": "1"}`, `unknown field "name"`},
		{"two documents", `{} {}`, "data after the JSON object"},
		{"expect missing", msg(``), `message 0: no "expect"`},
		{"expect misspelled", msg(`, "expcet": "reject"`), `unknown field "expcet"`},
		{"expect value misspelled", msg(`, "expect": "rejected"`), `"expect" is "rejected"`},
		{"error code on an accept", msg(`, "expect": "accept", "expected_error_code": "FORBIDDEN"`), `"expected_error_code" FORBIDDEN on a message expected to be accepted`},
		{"top-level key misspelled", strings.Replace(msg(`, "expect": "accept"`), `"ttl_ms"`, `"expected_final_sate": "Open", "ttl_ms"`, 1), `unknown field "expected_final_sate"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "x.json")
			if err := os.WriteFile(f, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Run(context.Background(), engine, f)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
	// The same message with a valid expectation is a transcript.
	f := filepath.Join(t.TempDir(), "ok.json")
	if err := os.WriteFile(f, []byte(msg(`, "expect": "accept"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), engine, f)
	if err != nil || !res.OK() {
		t.Fatalf("valid transcript: %v %v", err, res.Failures)
	}
}

package test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWhatIfRecordedRun: bin/warden in front of the real MACP runtime, with
// --decision-log-include-input, records a decision log; warden what-if on it
// with a candidate operator policy refusing the worker's TaskFail reports
// exactly the TaskFails the runtime accepted (one per session, two
// sessions) and exits 1; the deployed operator policy unchanged reports none
// and exits 0. Both front doors.
func TestWhatIfRecordedRun(t *testing.T) { eachTransport(t, testWhatIfRecordedRun) }

func testWhatIfRecordedRun(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "decisions.log")
	runtime := startRuntime(t)
	w := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth", "--decision-log", logFile, "--decision-log-include-input"))
	failedTask(w)
	s := failedTask(w)
	if ack := w.send(positiveCommitment(s, "")); ack.GetOk() { // refused: polarity
		t.Fatal("the forged commitment was accepted")
	}
	// Nine decisions, flushed within a second.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if strings.Count(string(b), `"input_recorded":true`) >= 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decision log after 5 s:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cand := t.TempDir()
	if err := os.WriteFile(filepath.Join(cand, "no-fail.rego"), []byte(`package warden.macp
import rego.v1
deny contains {"code": "FORBIDDEN", "msg": "the worker may not fail"} if {
	input.principal.id == "worker"
	input.message.type == "TaskFail"
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	same := t.TempDir()
	b, err := os.ReadFile("../deploy/config/operator.rego")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(same, "operator.rego"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		code      int
		want      string
		changes   int
	}{
		{"the worker may not fail", cand, 1, "changed: 2 (allow→deny 2, deny→allow 0, reason changed 0)\n  2 now FORBIDDEN operator_policy: the worker may not fail\n", 2},
		{"unchanged", same, 0, "changed: 0 (allow→deny 0, deny→allow 0, reason changed 0)\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(wardenBinary(t), "what-if", "--policies", tc.dir, logFile).CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(out), "records read: 9\nre-decided: 9\n"+tc.want) ||
				strings.Count(string(out), "principal=worker type=TaskFail allow→deny") != tc.changes {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
		})
	}
}

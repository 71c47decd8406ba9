package decisionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

func TestRecords(t *testing.T) {
	zero := 0.0
	tests := []struct {
		name   string
		sample *float64
		d      proxy.Decision
		want   bool
	}{
		{"refusal", &zero, proxy.Decision{ID: "a-1", Protocol: "macp", Principal: "eve", Type: "TaskComplete", Mode: macp.ModeTask, SessionID: "s", Code: rules.CodeForbidden, Reason: rules.ReasonNotAuthorized}, true},
		{"allowed, sampled out", &zero, proxy.Decision{ID: "a-2", Protocol: "macp", Allow: true, Reason: rules.ReasonAllowed}, false},
		{"allowed, every one", nil, proxy.Decision{ID: "a-3", Protocol: "mcp", Allow: true, Type: "tasks/get", Reason: rules.ReasonAllowed}, true},
		{"dry-run refusal", &zero, proxy.Decision{ID: "a-4", Protocol: "macp", Allow: true, DryRun: true, Code: rules.CodeForbidden, Reason: rules.ReasonNotAuthorized}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			l, err := New(Config{Path: "-", SampleAllowed: tc.sample}, &out, map[string]string{"app": "warden"})
			if err != nil {
				t.Fatal(err)
			}
			l.Decided(tc.d, 3*time.Microsecond)
			if err := l.flush(); err != nil {
				t.Fatal(err)
			}
			if !tc.want {
				if out.Len() != 0 {
					t.Fatalf("written: %s", out.String())
				}
				return
			}
			var r Record
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			if r.DecisionID != tc.d.ID || r.Path != "warden/"+tc.d.Protocol || r.Result.Allow != tc.d.Allow || r.Result.Reason != string(tc.d.Reason) ||
				r.Labels["app"] != "warden" || r.Metrics["timer_warden_decision_ns"] != 3000 || r.Timestamp.IsZero() {
				t.Fatalf("record %+v", r)
			}
		})
	}
}

func TestFileAndRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	l, err := New(Config{Path: path, FlushInterval: 10 * time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	l.Decided(proxy.Decision{ID: "x-1", Protocol: "macp", Reason: rules.ReasonNotAuthorized}, 0)
	deadline := time.Now().Add(2 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), `"decision_id":"x-1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record was not flushed within the interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l.Decided(proxy.Decision{ID: "x-2", Protocol: "macp", Reason: rules.ReasonNotAuthorized}, 0) // while listeners drain
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"decision_id":"x-2"`) {
		t.Fatalf("a decision after Run ended was lost: %s", b)
	}
	if _, err := New(Config{Path: "-", SampleAllowed: ptr(1.5)}, nil, nil); err == nil {
		t.Fatal("a sampling rate over 1 must be refused")
	}
}

func ptr(f float64) *float64 { return &f }

// TestReopenAfterRename is logrotate's move-then-signal: while decisions
// are recorded and flushed, the file is renamed and Reopen called (what
// SIGHUP does). Every record lands exactly once: those before the reopen in
// the moved file, the rest in a new file at the path. Before Reopen, every
// later record went on into the moved file.
func TestReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.log")
	l, err := New(Config{Path: path, FlushInterval: time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- l.Run(ctx) }()
	const n = 3000
	reopened, started := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			switch i {
			case n / 4:
				close(started)
			case n / 2:
				<-reopened
			}
			l.Decided(proxy.Decision{ID: "d-" + strconv.Itoa(i), Protocol: "mcp", Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, AuthReason: "expired"}, time.Microsecond)
		}
	}()
	<-started
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	close(reopened)
	<-done
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, name := range []string{path + ".1", path} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) == 0 || lines[0] == "" {
			t.Fatalf("%s is empty", name)
		}
		for _, line := range lines {
			var r Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: torn record %q: %v", name, line, err)
			}
			if r.Result.AuthReason != "expired" {
				t.Fatalf("record without auth_reason: %s", line)
			}
			seen[r.DecisionID]++
		}
	}
	for i := range n {
		if c := seen["d-"+strconv.Itoa(i)]; c != 1 {
			t.Fatalf("record d-%d written %d times", i, c)
		}
	}
	// The new file holds the records made after the reopen.
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"decision_id":"d-`+strconv.Itoa(n-1)+`"`) {
		t.Fatal("the last record is not in the reopened file")
	}
}

// TestReopenFails: when the path cannot be opened, records go on into the
// file open until now.
func TestReopenFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "decisions.log")
	if err := os.Mkdir(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Path: path}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Dir(path), filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil {
		t.Fatal("reopened a path whose directory is gone")
	}
	l.Decided(proxy.Decision{ID: "after", Protocol: "mcp"}, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "moved", "decisions.log"))
	if err != nil || !strings.Contains(string(b), `"after"`) {
		t.Fatalf("record lost: %q %v", b, err)
	}
}

// TestRecordSource: a record names whom the request came from and what it
// asked (client_addr, request_id, http_method, request_path) and why an id
// was refused (result.id_reason), as JSON members an operator can query.
// Before, a record had none of them.
func TestRecordSource(t *testing.T) {
	var out bytes.Buffer
	l, err := New(Config{Path: "-"}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Decided(proxy.Decision{ID: "a-1", Protocol: "mcp", Type: "tasks/get", Code: rules.CodeTaskNotFound, Reason: rules.ReasonUnknownTask, IDReason: "foreign_handle",
		Source: proxy.Source{Client: "192.0.2.1:4000", RequestID: "req-1", Method: "POST", Path: "/mcp"}}, time.Microsecond)
	if err := l.flush(); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Input  map[string]any `json:"input"`
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Input["client_addr"] != "192.0.2.1:4000" || r.Input["request_id"] != "req-1" || r.Input["http_method"] != "POST" || r.Input["request_path"] != "/mcp" || r.Result["id_reason"] != "foreign_handle" {
		t.Fatalf("record %s", out.String())
	}
}

package decisionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
)

func TestRecords(t *testing.T) {
	zero := 0.0
	tests := []struct {
		name   string
		sample *float64
		d      proxy.Decision
		want   bool
	}{
		{"refusal", &zero, proxy.Decision{ID: "a-1", Protocol: "macp", Principal: "eve", Type: "TaskComplete", Mode: rules.ModeTask, SessionID: "s", Code: rules.CodeForbidden, Reason: rules.ReasonNotAuthorized}, true},
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

package mcp

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/rules/mcp"
)

type observed struct {
	mu sync.Mutex
	ds []proxy.Decision
}

func (o *observed) Decided(d proxy.Decision, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds = append(o.ds, d)
}

func (o *observed) last() proxy.Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ds) == 0 {
		return proxy.Decision{}
	}
	return o.ds[len(o.ds)-1]
}

// TestIDReason: a task id that is not the caller's is refused with the
// same "Task not found" whatever it is, and the refusal's decision (the
// log line, the record) says which it was: another principal's handle, a
// raw upstream id, a made-up id, a handle
// under a key Warden no longer has. Before, every one was only
// unknown_task.
func TestIDReason(t *testing.T) {
	pe, err := sharedPolicies()
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: pe, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := handle.NewKeyring(handle.Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")})
	k2, _ := handle.NewKeyring(handle.Key{ID: "k2", Secret: []byte("fedcba9876543210fedcba9876543210")})
	ring := handle.NewRing(k1)
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	srv, err := New(Config{}.withUpstream(upSrv.URL+"/mcp"), e, ring, upSrv.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(srv)
	t.Cleanup(front.Close)
	h := &harness{up: up, upSrv: upSrv, e: e, srv: srv, front: front}

	alices := h.createTask(t, alice)
	id := h.upstreamID(t, alice, alices)
	tests := []struct {
		name, principal, taskID, want string
		rotate                        bool
	}{
		{"another principal's handle", bob, alices, string(handle.ReasonForeign), false},
		{"a raw upstream id", alice, id, string(handle.ReasonRawID), false},
		{"a garbled handle", bob, handle.Prefix + "k1.!!", string(handle.ReasonMalformed), false},
		{"a made-up id", bob, "task-999", proxy.IDUnknown, false},
		{"a handle under a retired key", alice, alices, string(handle.ReasonRetiredKey), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.rotate {
				ring.Set(k2)
			}
			r := h.post(t, tt.principal, rpc(4, "tasks/get", map[string]any{"taskId": tt.taskID}), nil)
			if r.status != http.StatusOK || r.errCode(t) != mcp.ErrInvalidParams || r.errMessage(t) != "Task not found" {
				t.Fatalf("HTTP %d %s, want -32602 Task not found", r.status, r.body)
			}
			d := obs.last()
			if d.Allow || d.ID != r.header.Get("X-Warden-Decision") || d.IDReason != tt.want {
				t.Fatalf("decision %s allow=%v id_reason=%q, want %s refused with %q", d.ID, d.Allow, d.IDReason, r.header.Get("X-Warden-Decision"), tt.want)
			}
			if d.Source.RequestID == "" || d.Source.RequestID != r.header.Get("X-Request-Id") || d.Source.Path != "/mcp" || d.Source.Method != http.MethodPost || d.Source.Client == "" {
				t.Fatalf("decision source %+v, X-Request-Id %q", d.Source, r.header.Get("X-Request-Id"))
			}
		})
	}
}

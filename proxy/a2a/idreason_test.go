package a2a

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/rules/a2a"
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

// TestIDReason: the A2A refusals of task ids that are not the caller's
// answer the same Task not found (TestForeignIDsLookMadeUp) and record,
// for the operator, which they were. Before, all were unknown_task alone.
func TestIDReason(t *testing.T) {
	policyOnce.Do(func() { policyEng, policyErr = policies.New(context.Background(), policies.Config{}) })
	if policyErr != nil {
		t.Fatal(policyErr)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: policyEng, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, Config{}, e)
	v := h.send(t, "alice", "input secret")
	id := v["id"].(string)
	upstream, ok := h.srv.handles.Open(byte(a2a.KindTask), "alice", id)
	if !ok {
		t.Fatal("alice's handle does not open")
	}
	tests := []struct{ name, ref, want string }{
		{"another principal's handle", id, string(handle.ReasonForeign)},
		{"a raw upstream id", upstream, string(handle.ReasonRawID)},
		{"a made-up id", "made-up", proxy.IDUnknown},
		{"a garbled handle", handle.Prefix + "!!", string(handle.ReasonMalformed)},
		{"a handle under a key Warden does not have", handle.Prefix + "k9.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", string(handle.ReasonRetiredKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := h.rpc(t, "bob", `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"`+tt.ref+`"}}`)
			if want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Task not found"}}`; status != 200 || body != want {
				t.Fatalf("%d %s, want 200 %s", status, body, want)
			}
			if d := obs.last(); d.Allow || d.IDReason != tt.want || d.Source.Path != "/jsonrpc" || d.Source.RequestID == "" {
				t.Fatalf("decision allow=%v id_reason=%q source %+v, want refused with %q", d.Allow, d.IDReason, d.Source, tt.want)
			}
		})
	}
}

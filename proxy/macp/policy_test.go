package macp

import (
	"context"
	"sync"
	"testing"
	"time"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// policyRuntime is a fakeRuntime with the runtime's policy registry: an id
// registered once until it is unregistered.
type policyRuntime struct {
	*fakeRuntime
	mu       *sync.Mutex
	policies map[string]bool
}

func (p policyRuntime) RegisterPolicy(_ context.Context, req *macpv1.RegisterPolicyRequest) (*macpv1.RegisterPolicyResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := req.GetPolicyDescriptor().GetPolicyId()
	if p.policies[id] {
		return &macpv1.RegisterPolicyResponse{Error: "policy " + id + " already registered"}, nil
	}
	p.policies[id] = true
	return &macpv1.RegisterPolicyResponse{Ok: true}, nil
}

func (p policyRuntime) UnregisterPolicy(_ context.Context, req *macpv1.UnregisterPolicyRequest) (*macpv1.UnregisterPolicyResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.policies[req.GetPolicyId()] {
		return &macpv1.UnregisterPolicyResponse{Error: "unknown policy"}, nil
	}
	delete(p.policies, req.GetPolicyId())
	return &macpv1.UnregisterPolicyResponse{Ok: true}, nil
}

// TestPolicyRegistration: the sidecar's copy of the runtime's policy registry
// follows what the runtime accepted: an unregistered policy is forgotten, and
// one registered again under the same id replaces the old copy, so new
// sessions never bind stale rules; on both front doors (the relay observes
// the registrations itself).
func TestPolicyRegistration(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) { testPolicyRegistration(t, transport) })
	}
}

func testPolicyRegistration(t *testing.T, transport string) {
	_, enf := happyPath(t)
	_, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer {
		return policyRuntime{f, &sync.Mutex{}, map[string]bool{}}
	})
	client := macpv1.NewMACPRuntimeServiceClient(startSidecar(t, enf, addr, transport))
	register := func(desc string) *macpv1.RegisterPolicyRequest {
		return &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{PolicyId: "policy.review", Mode: "macp.mode.decision.v1",
			Description: desc, Rules: `{}`, SchemaVersion: 1}}
	}
	for _, tc := range []struct {
		name string
		call func(context.Context) (bool, error)
		want string // the description Warden holds for the id; "" for none
	}{
		{"register", func(ctx context.Context) (bool, error) {
			r, err := client.RegisterPolicy(ctx, register("first"))
			return r.GetOk(), err
		}, "first"},
		{"register the id again, refused", func(ctx context.Context) (bool, error) {
			r, err := client.RegisterPolicy(ctx, register("refused"))
			return !r.GetOk(), err
		}, "first"},
		{"unregister", func(ctx context.Context) (bool, error) {
			r, err := client.UnregisterPolicy(ctx, &macpv1.UnregisterPolicyRequest{PolicyId: "policy.review"})
			return r.GetOk(), err
		}, ""},
		{"register the id anew", func(ctx context.Context) (bool, error) {
			r, err := client.RegisterPolicy(ctx, register("second"))
			return r.GetOk(), err
		}, "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(as(context.Background(), "agent://admin"), 5*time.Second)
			defer cancel()
			if ok, err := tc.call(ctx); err != nil || !ok {
				t.Fatalf("the runtime's answer is not the one expected: %v", err)
			}
			d, ok := enf.Policies().Lookup("policy.review")
			if got := map[bool]string{true: d.Description}[ok]; got != tc.want {
				t.Errorf("Warden holds %q for the policy, want %q", got, tc.want)
			}
		})
	}
}

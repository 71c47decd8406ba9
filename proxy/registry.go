package proxy

import (
	"fmt"
	"sync"

	"github.com/agentwarden/warden/rules"
)

// PolicyRegistry holds the governance policies registered with the upstream
// runtime, which sessions bind by policy_version at SessionStart. It is safe
// for concurrent use.
type PolicyRegistry struct {
	mu       sync.RWMutex
	policies map[string]rules.PolicyDescriptor
}

// NewPolicyRegistry returns an empty registry; policy.default is built in.
func NewPolicyRegistry() *PolicyRegistry {
	return &PolicyRegistry{policies: map[string]rules.PolicyDescriptor{}}
}

// Register adds a policy. As in the runtime, policy.default is reserved and a
// registered id is immutable.
func (r *PolicyRegistry) Register(d rules.PolicyDescriptor) error {
	if d.PolicyID == "" || d.PolicyID == rules.DefaultPolicyID {
		return fmt.Errorf("register policy: id %q is reserved or empty", d.PolicyID)
	}
	if _, err := rules.Bind(d); err != nil {
		return fmt.Errorf("register policy: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.policies[d.PolicyID]; ok {
		return fmt.Errorf("register policy: %s is already registered", d.PolicyID)
	}
	r.policies[d.PolicyID] = d
	return nil
}

// Lookup returns a registered policy.
func (r *PolicyRegistry) Lookup(id string) (rules.PolicyDescriptor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.policies[id]
	return d, ok
}

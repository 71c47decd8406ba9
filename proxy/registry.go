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
	return r.put(d, false)
}

// Replace records a policy the upstream accepted, over any copy held: the
// upstream holds no other under its id (it was unregistered there, or the
// copy came from before), so the copy is stale.
func (r *PolicyRegistry) Replace(d rules.PolicyDescriptor) error {
	return r.put(d, true)
}

func (r *PolicyRegistry) put(d rules.PolicyDescriptor, replace bool) error {
	if d.PolicyID == "" || d.PolicyID == rules.DefaultPolicyID {
		return fmt.Errorf("register policy: id %q is reserved or empty", d.PolicyID)
	}
	if _, err := rules.Bind(d); err != nil {
		return fmt.Errorf("register policy: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.policies[d.PolicyID]; ok && !replace {
		return fmt.Errorf("register policy: %s is already registered", d.PolicyID)
	}
	r.policies[d.PolicyID] = d
	return nil
}

// Remove forgets a policy: unregistered upstream, or about to change there.
// Sessions bound to it keep their copy; a later lookup asks the upstream.
func (r *PolicyRegistry) Remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.policies, id)
}

// Lookup returns a registered policy.
func (r *PolicyRegistry) Lookup(id string) (rules.PolicyDescriptor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.policies[id]
	return d, ok
}

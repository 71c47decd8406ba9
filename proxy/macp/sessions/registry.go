package sessions

import (
	"fmt"
	"sync"
	"time"

	"github.com/agentwarden/warden/rules/macp"
)

// fetchedFor is how long a policy fetched from the upstream is used before it
// is fetched again: the upstream may have unregistered it and registered
// another under its id through another replica, unseen here.
const fetchedFor = 10 * time.Second

// PolicyRegistry holds the governance policies registered with the upstream
// runtime, which sessions bind by policy_version at SessionStart. It is safe
// for concurrent use.
type PolicyRegistry struct {
	mu       sync.RWMutex
	policies map[string]heldPolicy
}

// heldPolicy is a policy and when it was fetched from the upstream (zero
// when its registration was seen).
type heldPolicy struct {
	d       macp.PolicyDescriptor
	fetched time.Time
}

// NewPolicyRegistry returns an empty registry; policy.default is built in.
func NewPolicyRegistry() *PolicyRegistry {
	return &PolicyRegistry{policies: map[string]heldPolicy{}}
}

// Register adds a policy. As in the runtime, policy.default is reserved and a
// registered id is immutable.
func (r *PolicyRegistry) Register(d macp.PolicyDescriptor) error {
	return r.put(d, false, time.Time{})
}

// Replace records a policy the upstream accepted, over any copy held: the
// upstream holds no other under its id (it was unregistered there, or the
// copy came from before), so the copy is stale.
func (r *PolicyRegistry) Replace(d macp.PolicyDescriptor) error {
	return r.put(d, true, time.Time{})
}

// fetched records a policy fetched from the upstream at now, over a copy
// fetched before.
func (r *PolicyRegistry) fetched(d macp.PolicyDescriptor, now time.Time) error {
	return r.put(d, true, now)
}

func (r *PolicyRegistry) put(d macp.PolicyDescriptor, replace bool, fetched time.Time) error {
	if d.PolicyID == "" || d.PolicyID == macp.DefaultPolicyID {
		return fmt.Errorf("register policy: id %q is reserved or empty", d.PolicyID)
	}
	if _, err := macp.Bind(d); err != nil {
		return fmt.Errorf("register policy: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.policies[d.PolicyID]; ok && !replace {
		return fmt.Errorf("register policy: %s is already registered", d.PolicyID)
	}
	r.policies[d.PolicyID] = heldPolicy{d: d, fetched: fetched}
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
func (r *PolicyRegistry) Lookup(id string) (macp.PolicyDescriptor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.policies[id]
	return h.d, ok
}

// current returns a policy whose registration was seen, or one fetched less
// than fetchedFor before now.
func (r *PolicyRegistry) current(id string, now time.Time) (macp.PolicyDescriptor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.policies[id]
	if ok && !h.fetched.IsZero() && now.Sub(h.fetched) >= fetchedFor {
		return macp.PolicyDescriptor{}, false
	}
	return h.d, ok
}

package sessions

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/macp"
)

// Store is the MACP session state Warden replicas share for an
// ext_authz fleet (proxy/state keeps it in Redis): each session's encoded
// state (macp.Session.AppendBinary) under a version that changes on every
// commit. The local table stays in front of it as a cache: a decision checks
// that its entry's version is the store's (reloading when it is not) and
// commits with compare-and-set on it, so no replica decides on a history
// another one has extended, nor overwrites it. Only an adapter that commits
// on allow (ext_authz) may use it: the commit happens before the decision is
// returned. An error means the store could not be reached: the decision
// fails closed.
type Store interface {
	// Load returns the session's state and version when the version is not
	// have; changed is false when it is (nothing is read). version "" means
	// the store holds no entry.
	Load(ctx context.Context, id, have string) (data []byte, version string, changed bool, err error)
	// Commit stores data when the session's version is still have ("": no
	// entry), keeping it until expireAt plus the store's TTL, and returns
	// the new version. When another replica committed first, ok is false
	// and version and current are what the store holds ("", nil: none). A
	// store that gives replicas turns on a contended session may defer a
	// commit to another replica's turn: ok is false and version is have
	// (current nil), and the decision is tried again after a wait. With
	// share > 0 the session is charged to initiator: one holding more than
	// share sessions loses its own least recently committed ones from the
	// store (never another's, never this one), as the owner table's rule:
	// dropped is how many.
	Commit(ctx context.Context, id, have string, data []byte, expireAt time.Time, initiator string, share int) (version string, current []byte, ok bool, dropped int, err error)
}

// ConflictObserver is what an Observer may also implement to count the
// commits of shared sessions that found the session changed by another
// replica (a stale cache or a race; each is decided again).
type ConflictObserver interface {
	SessionConflict()
}

// contentionBudget bounds how long a decision is taken again and again
// after other replicas committed its session first. Every lost
// compare-and-set is another replica's progress, so the fleet cannot
// livelock; but one decision can lose many times in a row while another
// replica works through its own queue of the session's messages (16 in
// flight on one session lose up to about 16 times): a bound on the count
// refused valid messages under contention (8 attempts refused 16 of 29,757
// allowed TaskUpdates in the bench's extauthz-redis). Past the budget, or
// when the request ends first, the decision fails closed.
const contentionBudget = 500 * time.Millisecond

// conflictStep and conflictCap scale the random wait of a decision taken
// again after a lost compare-and-set: full jitter, doubling from
// conflictStep, at most conflictCap. The cap is short: a loss is never a
// livelock (someone committed), and while the winning replica works through
// its queue of the session's messages, each microsecond the loser waits is
// a head start for the winner's next commit; the wait only spreads the
// retries of several losers.
const (
	conflictStep = 25 * time.Microsecond
	conflictCap  = 200 * time.Microsecond
)

// contention is a decision's record of the compare-and-sets it lost.
type contention struct {
	attempt int       // losses so far
	since   time.Time // the first loss
}

// lost waits before the decision is taken again after its commit found the
// session changed by another replica: not at all after the first loss (the
// winner's state is at hand and current), then a random time up to
// conflictStep doubled per loss, capped at conflictCap, so that replicas
// racing on one session do not meet again in lockstep. It returns
// ErrSessionContention once the decision has lost for budget, and ctx's
// error when ctx ends first.
func (c *contention) lost(ctx context.Context, budget time.Duration) error {
	c.attempt++
	if c.attempt == 1 {
		c.since = time.Now()
		return nil
	}
	if time.Since(c.since) >= budget {
		return ErrSessionContention
	}
	t := time.NewTimer(rand.N(lossWait(c.attempt)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lossWait is the longest random wait after loss number attempt (2 or
// more): conflictStep doubled per loss after the second, at most
// conflictCap.
func lossWait(attempt int) time.Duration {
	if attempt-2 < 8 {
		return min(conflictCap, conflictStep<<(attempt-2))
	}
	return conflictCap
}

// ErrSessionContention means a session changed on other replicas at every
// attempt to decide one of its messages for contentionBudget: the decision
// fails closed.
var ErrSessionContention = errors.New("session state changed on other replicas at every attempt")

// load brings a locked entry up to date with the shared store before a
// decision, where the entry cannot be decided on as it is: a session it does
// not hold, or one this replica never saw committed, is read (a session the
// store no longer holds, expired or lost in a Redis restart, is forgotten
// here too, so that it is rebuilt from the runtime as an evicted entry is).
// A cached committed state is decided on as it is, and share then checks
// its version. The decision whose last attempt brought the store's state
// reads nothing.
func (x *Decider) load(ctx context.Context, en *entry, decision string, now int64) error {
	if x.store == nil || en == nil {
		return nil
	}
	sh := en.store()
	fresh := sh.fresh == decision
	sh.fresh = ""
	if fresh {
		sh.checked = decision
		return nil
	}
	if en.state.Load() != nil && sh.version != "" {
		return nil
	}
	sh.checked = decision
	data, version, changed, err := x.store.Load(ctx, en.id, sh.version)
	if err != nil || !changed {
		return err
	}
	return x.replace(en, version, data, now)
}

// replace installs the store's version of a session in its entry.
func (x *Decider) replace(en *entry, version string, data []byte, now int64) error {
	var s *macp.Session
	if version != "" {
		var err error
		if s, err = x.decoder.Decode(data); err != nil {
			return fmt.Errorf("decode the shared state: %w", err)
		}
		s.Participants = x.table.names.share(s.Participants)
	}
	en.store().version = version
	x.table.settle(en, s, now)
	return nil
}

// share makes a decision taken on a locked entry true for the fleet: one
// that commits a next state (an allow) does it with compare-and-set on the
// version it was decided on; any other checks that version, unless load
// read it for this decision. ok is false when another replica changed the
// session: its state is then in the entry and the decision must be taken
// again. A commit the store defers to another replica's turn is tried again
// as it is (the session has not changed), after lost's wait, the entry
// still locked.
func (x *Decider) share(ctx context.Context, decision string, commit bool, en *entry, out macp.Outcome, now int64, lost *contention) (ok bool, err error) {
	if x.store == nil || en == nil {
		return true, nil
	}
	sh := en.store()
	if !commit {
		if sh.checked == decision {
			return true, nil
		}
		data, version, changed, err := x.store.Load(ctx, en.id, sh.version)
		if err != nil || !changed {
			return err == nil, err
		}
		return false, x.changed(en, decision, version, data, now)
	}
	data, err := out.Next.AppendBinary(nil)
	if err != nil {
		return false, fmt.Errorf("encode the state: %w", err)
	}
	commitIt := func() (string, []byte, bool, error) {
		version, current, ok, dropped, err := x.store.Commit(ctx, en.id, sh.version, data, time.UnixMilli(endsAt(out.Next, now)), out.Next.Initiator, x.perInitiator)
		x.e.ShareWatch().Dropped(owners.TableMACPSessions, owners.StoreRedis, out.Next.Initiator, dropped)
		return version, current, ok, err
	}
	version, current, ok, err := commitIt()
	for err == nil && !ok && version != "" && version == sh.version { // deferred
		if err = lost.lost(ctx, contentionBudget); err == nil {
			version, current, ok, err = commitIt()
		}
	}
	switch {
	case err != nil:
		return false, err
	case !ok:
		if o, is := x.e.Observer().(ConflictObserver); is {
			o.SessionConflict()
		}
		return false, x.changed(en, decision, version, current, now)
	}
	sh.version = version
	return true, nil
}

// changed installs the state another replica committed, for decision to be
// taken again on it without reading the store.
func (x *Decider) changed(en *entry, decision, version string, data []byte, now int64) error {
	if err := x.replace(en, version, data, now); err != nil {
		return err
	}
	en.store().fresh = decision
	return nil
}

// endsAt is when a session can accept no more messages, as far as is known
// now: its deadline while open, plus the suspension allowance while
// suspended; now once it is terminal.
func endsAt(s *macp.Session, now int64) int64 {
	switch {
	case s.State.Terminal():
		return now
	case s.State == macp.StateSuspended:
		return max(s.DeadlineMs, now) + s.Suspension().MaxMs
	}
	return max(s.DeadlineMs, now)
}

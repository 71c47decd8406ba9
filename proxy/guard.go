package proxy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentwarden/warden/authn"
)

// DefaultCredentialCheck is how often a long-lived call's credential is
// checked again.
const DefaultCredentialCheck = time.Second

// Guard returns ctx cancelled with cause gone once p's credential stops being
// valid while a long-lived call (a stream) is open (Watch). The returned stop
// ends the watch; it must be called.
func (e *Enforcer) Guard(ctx context.Context, c authn.Credentials, p authn.Principal, every time.Duration, gone error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := e.Watch(ctx, c, p, every, func() { cancel(gone) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// Watch calls end once p's credential stops being valid while a long-lived
// call (a stream, open while ctx is) is open: at p.Expiry, or when
// authenticating c again with the current authenticator (reloads included)
// fails, names another principal or grants other rights (authn.Principal.Same:
// a reload changed the attributes of a static token it kept); it is checked
// every interval. A check
// that cannot be made because keys are unavailable does not end the call.
// The returned stop ends the watch; it must be called. A caller with a
// cancel function of its own (relay.Bound) hands it as end, and needs no
// context derived for the watch.
//
// The watch is two timers, not a goroutine: most streams (an MCP answer
// sent as one server-sent event) end long before the first check, and
// never cost a goroutine's start, its scheduling and a ticker.
func (e *Enforcer) Watch(ctx context.Context, c authn.Credentials, p authn.Principal, every time.Duration, end func()) (stop func()) {
	if every <= 0 {
		every = DefaultCredentialCheck
	}
	g := &guard{}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.check = time.AfterFunc(every, func() {
		if ctx.Err() != nil {
			return
		}
		q, err := e.Authenticate(ctx, c)
		g.mu.Lock()
		defer g.mu.Unlock()
		switch {
		case g.stopped || ctx.Err() != nil:
		case errors.Is(err, authn.ErrKeysUnavailable):
			g.check.Reset(every)
		case err != nil || !p.Same(q):
			end()
		default:
			g.check.Reset(every)
		}
	})
	if !p.Expiry.IsZero() {
		g.expiry = time.AfterFunc(time.Until(p.Expiry), end)
	}
	return g.stop
}

// stop ends the watch: no check runs after it returns.
func (g *guard) stop() {
	g.mu.Lock()
	g.stopped = true
	g.check.Stop()
	g.mu.Unlock()
	if g.expiry != nil {
		g.expiry.Stop()
	}
}

// guard is Guard's watch: the timer of the next check (re-armed by each
// check, under mu, unless stopped) and the expiry's.
type guard struct {
	mu      sync.Mutex
	check   *time.Timer
	expiry  *time.Timer
	stopped bool
}

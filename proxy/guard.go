package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/agentwarden/warden/authn"
)

// DefaultCredentialCheck is how often a long-lived call's credential is
// checked again.
const DefaultCredentialCheck = time.Second

// Guard returns ctx cancelled with cause gone once p's credential stops being
// valid while a long-lived call (a stream) is open: at p.Expiry, or when
// authenticating c again with the current authenticator (reloads included)
// fails or names another principal; it is checked every interval. A check
// that cannot be made because keys are unavailable does not end the call.
// The returned stop ends the watch; it must be called.
func (e *Enforcer) Guard(ctx context.Context, c authn.Credentials, p authn.Principal, every time.Duration, gone error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if every <= 0 {
		every = DefaultCredentialCheck
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		var expiry <-chan time.Time
		if !p.Expiry.IsZero() {
			t := time.NewTimer(time.Until(p.Expiry))
			defer t.Stop()
			expiry = t.C
		}
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-expiry:
				cancel(gone)
				return
			case <-tick.C:
				q, err := e.Authenticate(ctx, c)
				if errors.Is(err, authn.ErrKeysUnavailable) {
					continue
				}
				if err != nil || q.ID != p.ID {
					cancel(gone)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

package macp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentwarden/warden/proxy/listener"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StreamLimits bounds the calls the sidecar relays to the runtime on streams
// of their own (StreamSession, WatchSignals, WatchSessions, the pass-through
// services, the other relayed methods), which may stay open for as long as
// the client likes. Their total stays below the upstream pool's calls
// (upstreamCalls), so that decided unary calls (Send, the control RPCs,
// GetSession) and rebuilds always find a free one.
type StreamLimits struct {
	// Max is the relayed calls open at once, all callers together.
	Max int `yaml:"max" json:"max"`
	// PerPrincipal is the relayed calls one authenticated principal may
	// hold open at once.
	PerPrincipal int `yaml:"per_principal" json:"per_principal"`
	// Anonymous is the relayed calls without credentials (the pass-through
	// services, public discovery) open at once, all callers together.
	Anonymous int `yaml:"anonymous" json:"anonymous"`
	// QueuedBytes is the bytes of messages waiting for their clients that
	// the relayed calls may hold together (each holds at most 16 MiB, and
	// past 1 MiB only while its client reads at least 256 KiB/s); a call
	// holding more than 64 KiB when it is taken up is ended
	// RESOURCE_EXHAUSTED.
	QueuedBytes int64 `yaml:"queued_bytes" json:"queued_bytes"`
	// Watches is how many of Max the watches (WatchSignals, WatchSessions)
	// may hold, all callers together: the rest stays for the calls whose
	// messages Warden decides (StreamSession) and the other relayed calls,
	// so idle watches cannot fill the cap.
	Watches int `yaml:"watches" json:"watches"`
	// WatchesPerPrincipal is the watches one principal may hold open.
	WatchesPerPrincipal int `yaml:"watches_per_principal" json:"watches_per_principal"`
	// WatchIdle ends a watch that has passed its client nothing for this
	// long (UNAVAILABLE; clients reconnect), so forgotten watches give
	// their place back.
	WatchIdle time.Duration `yaml:"watch_idle" json:"watch_idle"`
}

// Defaults of StreamLimits; the reserve is what Max may not take of the
// upstream pool.
const (
	DefaultMaxStreams          = 600
	DefaultStreamsPerPrincipal = 64
	DefaultAnonymousStreams    = 32
	DefaultQueuedBytes         = 256 << 20
	DefaultWatches             = 200
	DefaultWatchesPerPrincipal = 8
	DefaultWatchIdle           = 10 * time.Minute
	reservedUpstreamCalls      = 100
	// MaxStreamsLimit is the largest Max: the upstream pool's calls but
	// the reserve.
	MaxStreamsLimit = upstreamCalls - reservedUpstreamCalls
)

// WithDefaults fills zero fields.
func (l StreamLimits) WithDefaults() StreamLimits {
	if l.Max == 0 {
		l.Max = DefaultMaxStreams
	}
	if l.PerPrincipal == 0 {
		l.PerPrincipal = DefaultStreamsPerPrincipal
	}
	if l.Anonymous == 0 {
		l.Anonymous = DefaultAnonymousStreams
	}
	if l.QueuedBytes == 0 {
		l.QueuedBytes = DefaultQueuedBytes
	}
	if l.Watches == 0 {
		l.Watches = min(DefaultWatches, l.Max/3)
	}
	if l.WatchesPerPrincipal == 0 {
		l.WatchesPerPrincipal = DefaultWatchesPerPrincipal
	}
	if l.WatchIdle == 0 {
		l.WatchIdle = DefaultWatchIdle
	}
	return l
}

// Validate checks the limits.
func (l StreamLimits) Validate() error {
	var errs []error
	if l.Max < 0 || l.PerPrincipal < 0 || l.Anonymous < 0 || l.QueuedBytes < 0 || l.Watches < 0 || l.WatchesPerPrincipal < 0 || l.WatchIdle < 0 {
		errs = append(errs, errors.New("negative"))
	}
	if d := l.WithDefaults(); d.Watches > d.Max {
		errs = append(errs, fmt.Errorf("watches %d is above max %d", d.Watches, d.Max))
	}
	if l.Max > MaxStreamsLimit {
		errs = append(errs, fmt.Errorf("max %d is above %d: the runtime's connections hold %d calls, and %d stay for decided calls", l.Max, MaxStreamsLimit, upstreamCalls, reservedUpstreamCalls))
	}
	return errors.Join(errs...)
}

// errTooManyStreams refuses a relayed call beyond its caller's limit.
var errTooManyStreams = status.Error(codes.ResourceExhausted, "too many open streams; close one and retry")

// errTooManyWatches refuses a watch beyond the watches' share.
var errTooManyWatches = status.Error(codes.ResourceExhausted, "too many open watches; close one and retry")

// errWatchIdle ends a watch that passed its client nothing for WatchIdle.
var errWatchIdle = errors.New("the watch was idle too long; reconnect")

// streamCaps counts the relayed calls open, in total and by caller, and
// the watches among them.
type streamCaps struct {
	lim   StreamLimits
	slots listener.Slots // by principal ID; "" is every anonymous caller
}

func newStreamCaps(lim StreamLimits) *streamCaps {
	return &streamCaps{lim: lim.WithDefaults()}
}

// take counts one more call of who ("" for an anonymous caller) or refuses
// it with errTooManyStreams; done gives it back.
func (c *streamCaps) take(who string) (done func(), err error) { return c.takeKind(who, false) }

// takeWatch is take for a watch, which counts in the watches' share too.
func (c *streamCaps) takeWatch(who string) (done func(), err error) { return c.takeKind(who, true) }

func (c *streamCaps) takeKind(who string, watch bool) (done func(), err error) {
	limit := c.lim.PerPrincipal
	if who == "" {
		limit = c.lim.Anonymous
	}
	done, full := c.slots.Take(who, listener.SlotBounds{PerHolder: limit, Total: c.lim.Max, WatchesPerHolder: c.lim.WatchesPerPrincipal, Watches: c.lim.Watches}, watch)
	switch {
	case full&(listener.FullPerHolder|listener.FullTotal) != 0:
		return nil, errTooManyStreams
	case full != 0:
		return nil, errTooManyWatches
	}
	return done, nil
}

// idle returns a context that ends with errWatchIdle once touch has not
// been called for WatchIdle, touch, and stop to release its timer.
func (c *streamCaps) idle(ctx context.Context) (_ context.Context, touch, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(c.lim.WatchIdle, func() { cancel(errWatchIdle) })
	return ctx, func() { t.Reset(c.lim.WatchIdle) }, func() { t.Stop(); cancel(nil) }
}

// String describes the limits as `warden check` prints them.
func (l StreamLimits) String() string {
	l = l.WithDefaults()
	return fmt.Sprintf("%d relayed streams in all, %d per principal, %d anonymous, %d of them watches (%d per principal, ended after %v idle), %d MiB queued for their clients",
		l.Max, l.PerPrincipal, l.Anonymous, l.Watches, l.WatchesPerPrincipal, l.WatchIdle, l.QueuedBytes>>20)
}

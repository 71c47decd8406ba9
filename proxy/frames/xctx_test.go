package frames

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"
)

// TestExchangeCtx: an exchange's context keeps context.Context's contract
// as the context.WithCancel or WithTimeout it replaced did: Done closes
// and Err tells why when the exchange ends or its deadline passes (asked
// before or after), a context derived from it, directly or through a
// wrapper of its own (context.WithValue, as a trace span's), ends with it
// without a goroutine watching it, and its value is the client's address.
func TestExchangeCtx(t *testing.T) {
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	c := &conn{r: &Relay{}, peer: newPeerAddr(client)}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		end     bool // the exchange ends (cancel) rather than its deadline passing
		early   bool // Done is asked for before it ends
		want    error
	}{
		{"canceled", 0, true, false, context.Canceled},
		{"canceled, Done asked before", 0, true, true, context.Canceled},
		{"deadline", 20 * time.Millisecond, false, false, context.DeadlineExceeded},
		{"deadline, Done asked before", 20 * time.Millisecond, false, true, context.DeadlineExceeded},
		{"canceled before its deadline", time.Hour, true, true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newStream(c, 1, -1, Route{Handler: &abandonHandler{}, Timeout: tc.timeout}, nil).x
			ctx := x.ctx
			if dl, ok := ctx.Deadline(); ok != (tc.timeout > 0) || ok && time.Until(dl) > tc.timeout {
				t.Errorf("Deadline = %v, %v; want one within %v", dl, ok, tc.timeout)
			}
			if Peer(ctx).String() != client.String() {
				t.Errorf("Peer = %v, want %v", Peer(ctx), client)
			}
			var early <-chan struct{}
			if tc.early {
				early = ctx.Done()
			}
			before := runtime.NumGoroutine()
			child, stop := context.WithCancel(context.WithValue(ctx, peerKey{}, "wrapped"))
			defer stop()
			after, stopAfter := context.WithCancel(ctx)
			stopAfter() // its link is taken back (AfterFunc's stop)
			if n := runtime.NumGoroutine(); n > before {
				t.Errorf("%d goroutines after deriving contexts, %d before: want none watching the parent", n, before)
			}
			if ctx.Err() != nil {
				t.Fatalf("Err = %v before the end", ctx.Err())
			}
			if tc.end {
				x.xc.cancel(context.Canceled)
				x.xc.cancel(context.DeadlineExceeded) // a second end changes nothing
			}
			for _, done := range []<-chan struct{}{early, ctx.Done(), child.Done()} {
				if done == nil {
					continue
				}
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("Done did not close")
				}
			}
			if err := ctx.Err(); err != tc.want {
				t.Errorf("Err = %v, want %v", err, tc.want)
			}
			if err := child.Err(); !errors.Is(err, tc.want) {
				t.Errorf("the derived context's Err = %v, want %v", err, tc.want)
			}
			if !errors.Is(after.Err(), context.Canceled) {
				t.Errorf("the stopped derived context's Err = %v", after.Err())
			}
			late, stopLate := context.WithCancel(ctx) // derived once it ended: ended at once
			defer stopLate()
			if !errors.Is(late.Err(), tc.want) {
				t.Errorf("a context derived after the end: Err = %v, want %v", late.Err(), tc.want)
			}
		})
	}
}

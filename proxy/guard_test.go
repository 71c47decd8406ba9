package proxy

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
)

// TestGuard: a guarded call's context ends with the cause given when the
// credential names another principal at a check, or the same one with other
// claims (a reload changed a static token's attributes), or expires; it stays open
// while the credential holds, and stop ends it (context.Canceled). No watch
// starts a goroutine of its own before its first check: the old Guard
// started one per stream, which most streams (an answer sent as one event)
// ended before it ever checked anything.
func TestGuard(t *testing.T) {
	e := plainEnforcer(t)
	gone := errors.New("gone")
	alice := authn.Principal{ID: "alice"}
	ended := func(t *testing.T, ctx context.Context, want error) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the guarded context did not end")
		}
		if got := context.Cause(ctx); !errors.Is(got, want) {
			t.Fatalf("cause %v, want %v", got, want)
		}
	}
	for _, tc := range []struct {
		name  string
		creds string
		p     authn.Principal
		every time.Duration
		want  error // nil: still open after a few checks
	}{
		{"another principal at a check", "mallory", alice, 2 * time.Millisecond, gone},
		{"other rights at a check", "alice", authn.Principal{ID: "alice", Claims: map[string]any{"can_start_sessions": true}}, 2 * time.Millisecond, gone},
		{"expired", "alice", authn.Principal{ID: "alice", Expiry: time.Now().Add(20 * time.Millisecond)}, time.Hour, gone},
		{"valid", "alice", alice, 2 * time.Millisecond, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, stop := e.Guard(context.Background(), authn.Credentials{Bearer: tc.creds}, tc.p, tc.every, gone)
			if tc.want != nil {
				defer stop()
				ended(t, ctx, tc.want)
				return
			}
			time.Sleep(30 * time.Millisecond)
			if ctx.Err() != nil {
				t.Fatalf("a valid credential's call ended: %v", context.Cause(ctx))
			}
			stop()
			ended(t, ctx, context.Canceled)
		})
	}
	t.Run("parent ends", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, stop := e.Guard(parent, authn.Credentials{Bearer: "alice"}, alice, time.Millisecond, gone)
		defer stop()
		cancel()
		ended(t, ctx, context.Canceled)
	})
	t.Run("no goroutine per watch", func(t *testing.T) {
		const n = 100
		before := runtime.NumGoroutine()
		stops := make([]func(), n)
		for i := range stops {
			_, stops[i] = e.Guard(context.Background(), authn.Credentials{Bearer: "alice"}, alice, time.Hour, gone)
		}
		during := runtime.NumGoroutine()
		for _, stop := range stops {
			stop()
		}
		if during-before >= n/2 {
			t.Fatalf("%d goroutines for %d watches", during-before, n)
		}
	})
}

// TestWatch: Watch calls end when the credential names another principal at
// a check or expires, never after stop; and watching a stream with the
// stream's own cancel costs fewer allocations than deriving a guarded
// context and watching it (Guard + context.AfterFunc, what relay.Bound did
// for every MCP and A2A event stream before Watch).
func TestWatch(t *testing.T) {
	e := plainEnforcer(t)
	alice := authn.Principal{ID: "alice"}
	for _, tc := range []struct {
		name  string
		creds string
		p     authn.Principal
		every time.Duration
		end   bool
	}{
		{"another principal at a check", "mallory", alice, 2 * time.Millisecond, true},
		{"expired", "alice", authn.Principal{ID: "alice", Expiry: time.Now().Add(20 * time.Millisecond)}, time.Hour, true},
		{"valid", "alice", alice, 2 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ended := make(chan struct{}, 2)
			stop := e.Watch(context.Background(), authn.Credentials{Bearer: tc.creds}, tc.p, tc.every, func() { ended <- struct{}{} })
			select {
			case <-ended:
				if !tc.end {
					t.Fatal("a valid credential's stream ended")
				}
			case <-time.After(map[bool]time.Duration{true: 5 * time.Second, false: 30 * time.Millisecond}[tc.end]):
				if tc.end {
					t.Fatal("the stream did not end")
				}
			}
			stop()
			time.Sleep(5 * time.Millisecond)
			for len(ended) > 0 {
				<-ended
			}
			time.Sleep(10 * time.Millisecond)
			if len(ended) > 0 {
				t.Fatal("end called after stop")
			}
		})
	}
	t.Run("allocations", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		creds := authn.Credentials{Bearer: "alice"}
		watch := testing.AllocsPerRun(200, func() {
			e.Watch(ctx, creds, alice, time.Hour, cancel)()
		})
		guarded := testing.AllocsPerRun(200, func() {
			gctx, stop := e.Guard(ctx, creds, alice, time.Hour, context.Canceled)
			after := context.AfterFunc(gctx, cancel)
			after()
			stop()
		})
		if watch >= guarded {
			t.Errorf("Watch: %v allocations, Guard and AfterFunc %v: want fewer", watch, guarded)
		}
		t.Logf("Watch %v allocations, Guard + AfterFunc %v", watch, guarded)
	})
}

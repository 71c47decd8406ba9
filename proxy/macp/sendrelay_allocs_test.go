//go:build !race

package macp

import (
	"context"
	"testing"
	"time"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestSendRelayAllocs bounds what a decided Send through the relay front
// door allocates beyond the null frame relay (the same client, framing and
// runtime, no decision): the admission, the decision, the exchange, its
// forward and the runtime's answer read and settled. Both counts hold the
// client's and the runtime's allocations, the same in both.
func TestSendRelayAllocs(t *testing.T) {
	w, n := overNullRelay(t, func(ctx context.Context, c macpv1.MACPRuntimeServiceClient, update *macpv1.SendRequest) func() error {
		return func() error { return sendUpdate(ctx, c, update) }
	})
	const want = 8 // 30 on 6a13cf5; 26 with the answer settled on its reader, 22 with the admission cut besides, 16 with the envelope read in place, 12 with the metadata's map and the runtime's context made when read, 10 with the exchange's context in the exchange, 8 with ids minted four to a string (the race detector's counts differ: !race)
	if w-n > want {
		t.Errorf("%.0f allocations per Send through Warden's relay, %.0f through the null relay: %.0f more, want at most %d", w, n, w-n, want)
	}
	t.Logf("%.0f allocations per Send through Warden's relay, %.0f through the null relay: %.0f more", w, n, w-n)
}

// TestSendRelayDeadlineAllocs is TestSendRelayAllocs for a Send with a
// deadline (grpc-timeout), as the bench harness's clients and most gRPC
// clients send one: the exchange's deadline costs its one timer.
func TestSendRelayDeadlineAllocs(t *testing.T) {
	w, n := overNullRelay(t, func(ctx context.Context, c macpv1.MACPRuntimeServiceClient, update *macpv1.SendRequest) func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Hour)
		t.Cleanup(cancel)
		return func() error { return sendUpdate(ctx, c, update) }
	})
	const want = 16 // 21 on 4c8cceb: the exchange's context.WithTimeout, and ForwardThen's timer of its own besides; 17 without them, 16 with ids minted four to a string (the race detector's counts differ: !race)
	if w-n > want {
		t.Errorf("%.0f allocations per Send with a deadline through Warden's relay, %.0f through the null relay: %.0f more, want at most %d", w, n, w-n, want)
	}
	t.Logf("%.0f allocations per Send with a deadline through Warden's relay, %.0f through the null relay: %.0f more", w, n, w-n)
}

// TestStreamRelayAllocs bounds what an envelope streamed on a
// StreamSession through the relay front door allocates beyond the null
// frame relay (the same client, stream and runtime, no decision): the
// envelope read, the decision, its pending answer and its timer, the
// runtime's answer read and settled.
func TestStreamRelayAllocs(t *testing.T) {
	w, n := overNullRelay(t, func(ctx context.Context, c macpv1.MACPRuntimeServiceClient, update *macpv1.SendRequest) func() error {
		return openStream(t, ctx, c, update)
	})
	const want = 34 // 49 on 2c55fb1, the envelope decoded; 43 read in place as a Send's; 37 with the runtime's answer read in place to settle it (readEcho), 36 with ids minted four to a string, 34 with one echo timer per stream, not per envelope (the race detector's counts differ: !race)
	if w-n > want {
		t.Errorf("%.0f allocations per streamed envelope through Warden's relay, %.0f through the null relay: %.0f more, want at most %d", w, n, w-n, want)
	}
	t.Logf("%.0f allocations per streamed envelope through Warden's relay, %.0f through the null relay: %.0f more", w, n, w-n)
}

// overNullRelay counts the allocations of one call of what open makes for
// a worker's TaskUpdate, through Warden's relay (w) and the null relay (n).
func overNullRelay(t *testing.T, open func(context.Context, macpv1.MACPRuntimeServiceClient, *macpv1.SendRequest) func() error) (w, n float64) {
	up := startBenchRuntime(t)
	warden := macpv1.NewMACPRuntimeServiceClient(startSidecar(t, devEnforcer(t), up, TransportRelay))
	updates, ctx := benchSessions(t, warden, 1)
	null := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(t, serveNullRelay(t, up)))
	count := func(c macpv1.MACPRuntimeServiceClient) float64 {
		one := open(ctx, c, updates[0])
		return testing.AllocsPerRun(300, func() {
			if err := one(); err != nil {
				t.Fatal(err)
			}
		})
	}
	return count(warden), count(null)
}

// TestHandoffRelayAllocs bounds what the handoff scenario's messages
// (BenchmarkSidecarHandoffRelay: a HandoffOffer, then its HandoffAccept,
// each on a new session) allocate through the relay front door beyond the
// null frame relay, per message: what TestSendRelayAllocs bounds, and the
// session's next state (the handoff's offers cloned, its record grown) and
// its commit when the runtime accepts.
func TestHandoffRelayAllocs(t *testing.T) {
	setup, warden := handoffSidecars(t)
	up := startBenchRuntime(t)
	nullSetup := handoffSetup(t, devEnforcer(t), up)
	null := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(t, serveNullRelay(t, up)))
	const blocks = 20
	wm, nm := newHandoffMix(t, setup, warden), newHandoffMix(t, nullSetup, null)
	handoffAllocs(wm, 2) // warm both up: connections, pools
	handoffAllocs(nm, 2)
	w, n := handoffAllocs(wm, blocks), handoffAllocs(nm, blocks)
	const want = 14 // 14.6 on 86daa10, the handoff's offers an allocation apart from their state; 13.5 with the first offer in the state (the race detector's counts differ: !race)
	if w-n > want {
		t.Errorf("%.1f allocations per handoff message through Warden's relay, %.1f through the null relay: %.1f more, want at most %d", w, n, w-n, want)
	}
	t.Logf("%.1f allocations per handoff message through Warden's relay, %.1f through the null relay: %.1f more", w, n, w-n)
}

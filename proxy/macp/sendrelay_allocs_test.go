//go:build !race

package macp

import (
	"testing"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestSendRelayAllocs bounds what a decided Send through the relay front
// door allocates beyond the null frame relay (the same client, framing and
// runtime, no decision): the admission, the decision, the exchange, its
// forward and the runtime's answer read and settled. Both counts hold the
// client's and the runtime's allocations, the same in both.
func TestSendRelayAllocs(t *testing.T) {
	up := startBenchRuntime(t)
	warden := macpv1.NewMACPRuntimeServiceClient(startSidecar(t, devEnforcer(t), up, TransportRelay))
	updates, ctx := benchSessions(t, warden, 1)
	null := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(t, serveNullRelay(t, up)))
	perSend := func(c macpv1.MACPRuntimeServiceClient) float64 {
		return testing.AllocsPerRun(300, func() {
			if err := sendUpdate(ctx, c, updates[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	w, n := perSend(warden), perSend(null)
	const want = 12 // 30 on 6a13cf5; 26 with the answer settled on its reader, 22 with the admission cut besides, 16 with the envelope read in place, 12 with the metadata's map and the runtime's context made when read (the race detector's counts differ: !race)
	if w-n > want {
		t.Errorf("%.0f allocations per Send through Warden's relay, %.0f through the null relay: %.0f more, want at most %d", w, n, w-n, want)
	}
	t.Logf("%.0f allocations per Send through Warden's relay, %.0f through the null relay: %.0f more", w, n, w-n)
}

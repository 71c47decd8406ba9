package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestMACPWatchesDoNotStarveStreams (issue 24 item 20): principals holding
// their maximum of idle WatchSignals filled the relayed-stream cap and
// every StreamSession was refused. Watches now hold at most their share
// (max_watches, a few per principal), so StreamSession is still admitted.
// Against the MACP runtime; before, the StreamSession was refused.
func TestMACPWatchesDoNotStarveStreams(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--max-streams", "30", "--max-streams-per-principal", "8")
	c := dialMACP(t, warden)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := macpv1.NewMACPRuntimeServiceClient(c.conn)
	held := 0
	for p := range 4 {
		for range 8 {
			w, err := mc.WatchSignals(metadata.AppendToOutgoingContext(ctx, "authorization", fmt.Sprintf("Bearer watcher-%d", p)), &macpv1.WatchSignalsRequest{})
			if err != nil {
				continue
			}
			if _, err := w.Header(); err == nil {
				// refused watches end at once; an open one waits
				rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				done := make(chan error, 1)
				go func() { _, err := w.Recv(); done <- err }()
				select {
				case <-done:
				case <-rctx.Done():
					held++
				}
				rcancel()
			}
		}
	}
	t.Logf("idle watches held: %d", held)
	st, err := mc.StreamSession(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer planner"))
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession()
	if err := st.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: sid}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	done := make(chan error, 1)
	go func() { _, err := st.Recv(); done <- err }()
	select {
	case err := <-done:
		// an answer (the runtime's error for an unknown session) is
		// admission; a status is not
		if err != nil {
			t.Fatalf("StreamSession beside %d idle watches: %v", held, err)
		}
	case <-rctx.Done():
	}
}

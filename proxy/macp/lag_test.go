package macp

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// laggingRuntime is a fakeRuntime whose watches end at once as
// macp-runtime 0.13.0 ends a watch whose reader fell behind its bus:
// RESOURCE_EXHAUSTED with macp-error-code STREAM_LAGGED and a text counting
// every session's signals (or events), the others' included.
type laggingRuntime struct{ *fakeRuntime }

func lagged(ctx context.Context, text string) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(macpErrorCode, "STREAM_LAGGED"))
	return status.Error(codes.ResourceExhausted, text)
}

func (laggingRuntime) WatchSignals(_ *macpv1.WatchSignalsRequest, ss macpv1.MACPRuntimeService_WatchSignalsServer) error {
	return lagged(ss.Context(), "WatchSignals receiver fell behind by 317 signals")
}

func (laggingRuntime) WatchSessions(_ *macpv1.WatchSessionsRequest, ss macpv1.MACPRuntimeService_WatchSessionsServer) error {
	return lagged(ss.Context(), "WatchSessions receiver fell behind by 71 events")
}

// TestWatchLagUncounted (security.md V3): a filtered watch the runtime
// ends as lagging ends with the runtime's code (RESOURCE_EXHAUSTED,
// macp-error-code STREAM_LAGGED) and a text of Warden's, never the
// runtime's count, which counts every session's signals where the watcher
// sees only its own. Before, the runtime's text passed verbatim ("fell
// behind by 317 signals").
func TestWatchLagUncounted(t *testing.T) { onBothDoors(t, testWatchLagUncounted) }

func testWatchLagUncounted(t *testing.T, transport string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, enf := happyPath(t)
	_, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return laggingRuntime{f} })
	mc := macpv1.NewMACPRuntimeServiceClient(startSidecarWith(t, enf, Config{Upstream: addr, Transport: transport}))
	for _, tc := range []struct {
		name  string
		watch func(context.Context, ...grpc.CallOption) error
	}{
		{"WatchSignals", func(ctx context.Context, o ...grpc.CallOption) error {
			w, err := mc.WatchSignals(ctx, &macpv1.WatchSignalsRequest{}, o...)
			if err == nil {
				_, err = w.Recv()
			}
			return err
		}},
		{"WatchSessions", func(ctx context.Context, o ...grpc.CallOption) error {
			w, err := mc.WatchSessions(ctx, &macpv1.WatchSessionsRequest{}, o...)
			if err == nil {
				_, err = w.Recv()
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr metadata.MD
			err := tc.watch(as(ctx, "agent://a"), grpc.Trailer(&tr))
			st := status.Convert(err)
			if st.Code() != codes.ResourceExhausted || strings.ContainsAny(st.Message(), "0123456789") || !strings.Contains(st.Message(), "fell behind") {
				t.Errorf("the watch ended with %v, want RESOURCE_EXHAUSTED with Warden's text, no count", err)
			}
			if got := tr.Get(macpErrorCode); len(got) != 1 || got[0] != "STREAM_LAGGED" {
				t.Errorf("macp-error-code %q, want STREAM_LAGGED", got)
			}
		})
	}
}

package macp

import (
	"context"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestStreamRequestBothSet: a StreamSessionRequest with both an envelope
// and subscribe_session_id is refused by the runtime (RFC-MACP-0006 §3.2;
// macp-runtime 0.13.0 server.rs process_stream_request: INVALID_ENVELOPE,
// the stream ended). Warden decided the envelope alone, committed an
// allowed Progress as forwarded and never looked at the subscription;
// it now answers as the runtime does, before deciding anything, and the
// runtime never sees the frame (the fake here would have subscribed).
func TestStreamRequestBothSet(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			ctx := context.Background()
			tr, enf := happyPath(t)
			_, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return historyRuntime{f, 3, 8, nil} })
			client := macpv1.NewMACPRuntimeServiceClient(startSidecar(t, enf, addr, transport))
			start, request := tr.Steps[0].Request, tr.Steps[1].Request
			if r, err := client.Send(as(ctx, start.Credentials.Bearer), &macpv1.SendRequest{Envelope: start.Envelope}); err != nil || !r.GetAck().GetOk() {
				t.Fatalf("SessionStart: %v %v", err, r)
			}
			sctx, cancel := context.WithTimeout(as(ctx, start.Credentials.Bearer), 5*time.Second)
			defer cancel()
			stream, err := client.StreamSession(sctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&macpv1.StreamSessionRequest{Envelope: request.Envelope, SubscribeSessionId: "another-session"}); err != nil {
				t.Fatal(err)
			}
			resp, err := stream.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if e := resp.GetError(); e.GetCode() != string(rules.CodeInvalidEnvelope) {
				t.Fatalf("answer %v, want the runtime's INVALID_ENVELOPE (the frame was forwarded)", resp)
			}
			// Nothing was committed: the TaskRequest is still new.
			r, err := client.Send(as(ctx, request.Credentials.Bearer), &macpv1.SendRequest{Envelope: request.Envelope})
			if err != nil || !r.GetAck().GetOk() || r.GetAck().GetDuplicate() {
				t.Fatalf("TaskRequest after the refused frame: %v %v", err, r.GetAck())
			}
		})
	}
}

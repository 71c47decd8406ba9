package test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestMACPStreamDemoted: a StreamSession opened with a static token whose
// rights a reload narrows (the token kept for the same sender, an
// attribute the policy reads changed) stops acting under the old rights:
// the stream ends UNAUTHENTICATED, as a revoked token's does
// (TestMACPStreamCredentialRevoked), and the SessionStart the token may no
// longer send is not forwarded on it. The runtime's own token file is not
// changed: it would accept the SessionStart, so Warden is the one refusing.
// Both doors.
func TestMACPStreamDemoted(t *testing.T) { eachTransport(t, testMACPStreamDemoted) }

func testMACPStreamDemoted(t *testing.T) {
	dir := t.TempDir()
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const before = `[{"token":"tok-planner","sender":"planner","can_start_sessions":true},{"token":"tok-worker","sender":"worker"}]`
	runtimeTokens, wardenTokens := dir+"/runtime.json", dir+"/warden.json"
	write(runtimeTokens, before)
	write(wardenTokens, before)
	runtime := startRuntime(t, "MACP_AUTH_TOKENS_FILE="+runtimeTokens)
	addr, proc := startWardenProcess(t, runtime, "--auth", "static", "--static-tokens", wardenTokens)
	w := dialMACP(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-planner")
	start := func() *macpv1.Envelope {
		return envelope("planner", newSession(), "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker"},
			ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000})
	}
	st, err := macpv1.NewMACPRuntimeServiceClient(w.conn).StreamSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the stream is open at Warden before the reload

	write(wardenTokens, `[{"token":"tok-planner","sender":"planner","can_start_sessions":false},{"token":"tok-worker","sender":"worker"}]`)
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload has applied once a unary SessionStart is refused.
	for deadline := time.Now().Add(15 * time.Second); ; {
		var resp macpv1.SendResponse
		err := w.conn.Invoke(ctx, "/macp.v1.MACPRuntimeService/Send", &macpv1.SendRequest{Envelope: start()}, &resp)
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		if !resp.GetAck().GetOk() {
			t.Logf("after the reload, a unary SessionStart: %s %s", resp.GetAck().GetError().GetCode(), resp.GetAck().GetError().GetMessage())
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reload did not apply within 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond) // past two credential checks (1 s each)

	env := start()
	sendErr := st.Send(&macpv1.StreamSessionRequest{Envelope: env})
	resp, err := st.Recv()
	switch {
	case err == nil && resp.GetEnvelope().GetSessionId() == env.GetSessionId():
		t.Errorf("the stream opened before the reload started session %s with the rights the reload withdrew (send: %v)", env.GetSessionId(), sendErr)
	case err == nil:
		t.Logf("the stream answered %v", resp)
		if e := resp.GetError(); e == nil {
			t.Errorf("the stream answered neither a refusal nor an end: %v", resp)
		}
	case status.Code(err) != codes.Unauthenticated:
		t.Errorf("the stream ended with %v, want Unauthenticated", err)
	default:
		t.Logf("the stream ended: %v", err)
	}
}

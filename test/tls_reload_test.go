package test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// writeBundle writes the CA certificates of ps into one bundle file.
func writeBundle(t *testing.T, path string, ps ...*pki) {
	t.Helper()
	var out []byte
	for _, p := range ps {
		b, err := os.ReadFile(filepath.Join(p.dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMACPTLSReload (issue 24 item 17): Warden admits client certificates
// of two CAs; the operator removes one CA from --tls-client-ca and sends
// SIGHUP. The open StreamSession of a client whose certificate that CA
// issued ends, and a new handshake with that certificate fails; a
// certificate of the remaining CA still gets through. Before, the bundle
// read at start admitted until restart and the stream stayed open.
func TestMACPTLSReload(t *testing.T) { eachTransport(t, testMACPTLSReload) }

func testMACPTLSReload(t *testing.T) {
	removed, kept := newPKI(t), newPKI(t)
	serverCert, serverKey, _ := removed.issue(t, "warden", true, "")
	_, _, planner := removed.issue(t, "planner", false, "spiffe://warden.test/planner")
	_, _, other := kept.issue(t, "other", false, "spiffe://warden.test/other")
	bundle := filepath.Join(t.TempDir(), "client-ca.pem")
	writeBundle(t, bundle, removed, kept)
	upTokens := filepath.Join(t.TempDir(), "upstream-tokens.json")
	if err := os.WriteFile(upTokens, []byte(`[{"token":"spiffe://warden.test/planner","sender":"spiffe://warden.test/planner"},`+
		`{"token":"spiffe://warden.test/other","sender":"spiffe://warden.test/other"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	direct := startRuntime(t)
	addr, proc := startWardenProcess(t, direct, "--auth", "mtls", "--tls-cert", serverCert, "--tls-key", serverKey,
		"--tls-client-ca", bundle, "--upstream-plaintext", "--upstream-tokens-file", upTokens)
	dial := func(cert tls.Certificate) *grpc.ClientConn {
		tc := &tls.Config{RootCAs: removed.pool, MinVersion: tls.VersionTLS12,
			// present the certificate whatever CAs Warden names
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	payload, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"spiffe://warden.test/planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(planner)
	sid := newSession()
	if ack, err := sendStartIn(ctx, conn, sid, "spiffe://warden.test/planner", payload); err != nil || !ack.GetOk() {
		t.Fatalf("SessionStart with the planner's certificate: %v %v", err, ack.GetError())
	}
	stream, err := macpv1.NewMACPRuntimeServiceClient(conn).StreamSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: sid}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("the subscription's history: %v", err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()

	writeBundle(t, bundle, kept)
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		t.Logf("the removed CA's stream ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the StreamSession of a certificate whose CA left the bundle is still open 5 s after SIGHUP")
	}
	fresh := dial(planner)
	if _, err := macpv1.NewMACPRuntimeServiceClient(fresh).GetSession(ctx, &macpv1.GetSessionRequest{SessionId: sid}); status.Code(err) != codes.Unavailable {
		t.Fatalf("a new connection with the removed CA's certificate: %v, want the handshake refused (UNAVAILABLE)", err)
	}
	if _, err := macpv1.NewMACPRuntimeServiceClient(dial(other)).GetSession(ctx, &macpv1.GetSessionRequest{SessionId: sid}); status.Code(err) == codes.Unavailable || status.Code(err) == codes.Unauthenticated {
		t.Fatalf("a certificate of the CA still in the bundle: %v", err)
	}
}

// TestMCPTLSReload: the same for the MCP sidecar's listener (the A2A
// sidecar serves through the same code): after the CA leaves the bundle and
// SIGHUP, the open GET /mcp SSE stream of its certificate ends and a new
// handshake with it fails.
func TestMCPTLSReload(t *testing.T) {
	removed, kept := newPKI(t), newPKI(t)
	serverCert, serverKey, _ := removed.issue(t, "warden", true, "")
	_, _, planner := removed.issue(t, "planner", false, "spiffe://warden.test/planner")
	bundle := filepath.Join(t.TempDir(), "client-ca.pem")
	writeBundle(t, bundle, removed, kept)
	upstream := startNodeMCP(t)
	addr := freeAddr(t)
	proc := start(t, "warden", addr, nil, wardenBinary(t), "serve", "--mcp-listen", addr, "--mcp-upstream", upstream+"/mcp",
		"--auth", "mtls", "--tls-cert", serverCert, "--tls-key", serverKey, "--tls-client-ca", bundle)
	client := func() *http.Client {
		return &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: removed.pool, MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &planner, nil }}}}
	}
	c := client()
	base := "https://" + addr + "/mcp"
	do := func(c *http.Client, method, body, sid string) (*http.Response, error) {
		req, _ := http.NewRequest(method, base, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		return c.Do(req)
	}
	resp, err := do(c, http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"reload","version":"0"}}}`, "")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: HTTP %d", resp.StatusCode)
	}
	if resp, err := do(c, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); err == nil {
		resp.Body.Close()
	}
	sse, err := do(c, http.MethodGet, "", sid)
	if err != nil || sse.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp: %v %v", err, sse)
	}
	defer sse.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, sse.Body)
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Fatalf("the SSE stream ended before the reload: %v", err)
	case <-time.After(500 * time.Millisecond):
	}

	writeBundle(t, bundle, kept)
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		t.Logf("the removed CA's SSE stream ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the GET /mcp stream of a certificate whose CA left the bundle is still open 5 s after SIGHUP")
	}
	if resp, err := do(client(), http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, sid); err == nil {
		resp.Body.Close()
		t.Fatalf("a new connection with the removed CA's certificate: HTTP %d, want the handshake refused", resp.StatusCode)
	}
}

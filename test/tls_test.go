package test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testcerts"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// pki is a throwaway CA with a server certificate for 127.0.0.1 and client
// certificates carrying SPIFFE IDs, written to files in dir (its bundle as
// ca.pem).
type pki struct {
	testcerts.CA
	dir  string
	pool *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{CA: testcerts.NewCA(t, "warden test CA", time.Now()), dir: t.TempDir(), pool: x509.NewCertPool()}
	p.pool.AddCert(p.Cert)
	p.write(t, "ca.pem", p.PEM())
	return p
}

func (p *pki) write(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue returns PEM files and the tls.Certificate of a leaf.
func (p *pki) issue(t *testing.T, name string, server bool, spiffe string) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	c, k := p.Leaf(t, name, server, spiffe)
	certFile = p.write(t, name+".pem", testcerts.PEM(c))
	keyFile = p.write(t, name+"-key.pem", testcerts.KeyPEM(t, k))
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

func sendStart(ctx context.Context, conn *grpc.ClientConn, identity string, payload []byte) (*macpv1.Ack, error) {
	return sendStartIn(ctx, conn, "5e1c2a4e-9b7d-4c1e-8a2b-5d6e7f809102", identity, payload)
}

func sendStartIn(ctx context.Context, conn *grpc.ClientConn, sessionID, identity string, payload []byte) (*macpv1.Ack, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+identity)
	resp, err := macpv1.NewMACPRuntimeServiceClient(conn).Send(ctx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{
		MacpVersion: "1.0", Mode: taskMode, MessageType: "SessionStart", MessageId: "start",
		SessionId: sessionID, Sender: identity, TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}})
	return resp.GetAck(), err
}

// TestMACPTLS runs Warden with a TLS listener that verifies client
// certificates (mTLS, SPIFFE IDs as principals) in front of the runtime, and
// checks the message size limit.
func TestMACPTLS(t *testing.T) { eachTransport(t, testMACPTLS) }

func testMACPTLS(t *testing.T) {
	p := newPKI(t)
	serverCert, serverKey, _ := p.issue(t, "warden", true, "")
	_, _, planner := p.issue(t, "planner", false, "spiffe://warden.test/planner")
	direct := startRuntime(t)
	// The runtime (dev auth) cannot see client certificates: Warden presents
	// it the token configured for the certificate's principal, in the
	// runtime's own token-file shape (in dev mode the bearer is the sender).
	upTokens := filepath.Join(p.dir, "upstream-tokens.json")
	if err := os.WriteFile(upTokens, []byte(`[{"token":"spiffe://warden.test/planner","sender":"spiffe://warden.test/planner"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	warden := startWarden(t, direct, "--auth", "mtls", "--tls-cert", serverCert, "--tls-key", serverKey,
		"--tls-client-ca", filepath.Join(p.dir, "ca.pem"), "--upstream-plaintext", "--max-message-bytes", "65536",
		"--upstream-tokens-file", upTokens)

	payload, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"spiffe://warden.test/planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(cert *tls.Certificate) *grpc.ClientConn {
		tc := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		conn, err := grpc.NewClient(warden, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	// The certificate's SPIFFE ID is the principal; the runtime sees the
	// credential configured for it.
	ack, err := sendStart(ctx, dial(&planner), "spiffe://warden.test/planner", payload)
	if err != nil || !ack.GetOk() {
		t.Fatalf("mTLS SessionStart: %v %v", err, ack.GetError())
	}
	// Impersonation (issue 17, case 3): the planner's certificate with
	// another agent's bearer and an empty envelope sender. Warden decides as
	// the planner and strips the bearer, so the runtime records the planner
	// as the initiator, not the agent named by the bearer.
	const impersonated = "6c1c2a4e-9b7d-4c1e-8a2b-5d6e7f809103"
	ictx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer worker")
	resp, err := macpv1.NewMACPRuntimeServiceClient(dial(&planner)).Send(ictx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{
		MacpVersion: "1.0", Mode: taskMode, MessageType: "SessionStart", MessageId: "start", SessionId: impersonated,
		TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}})
	if err != nil {
		t.Fatalf("SessionStart with a certificate and another agent's bearer: %v", err)
	}
	if resp.GetAck().GetOk() {
		rt, err := grpc.NewClient(direct, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		got, err := macpv1.NewMACPRuntimeServiceClient(rt).GetSession(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer spiffe://warden.test/planner"),
			&macpv1.GetSessionRequest{SessionId: impersonated})
		if err != nil {
			t.Fatal(err)
		}
		if init := got.GetMetadata().GetInitiator(); init != "spiffe://warden.test/planner" {
			t.Errorf("the runtime recorded %q as the initiator, want the certificate's principal", init)
		}
	}
	// A call Warden does not decide itself (GetSession) is made as the
	// certificate's principal too.
	got, err := macpv1.NewMACPRuntimeServiceClient(dial(&planner)).GetSession(ctx, &macpv1.GetSessionRequest{SessionId: "5e1c2a4e-9b7d-4c1e-8a2b-5d6e7f809102"})
	if err != nil || got.GetMetadata().GetInitiator() != "spiffe://warden.test/planner" {
		t.Fatalf("GetSession with the planner's certificate through Warden: %v %v", err, got)
	}
	// Without a client certificate there is no principal.
	// Refused on its header list, before its message is read.
	ack, err = sendStart(ctx, dial(nil), "spiffe://warden.test/planner", payload)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no client certificate: err=%v ack=%v, want UNAUTHENTICATED", err, ack)
	}
	// Nor does a client make one by sending, itself, the header that carries
	// a verified chain from the relay front door to the calls it hands on.
	planCert, err := os.ReadFile(filepath.Join(p.dir, "planner.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(planCert)
	fctx := metadata.AppendToOutgoingContext(ctx, "x-warden-client-chain", base64.StdEncoding.EncodeToString(blk.Bytes))
	resp, err = macpv1.NewMACPRuntimeServiceClient(dial(nil)).Send(fctx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{
		MacpVersion: "1.0", Mode: taskMode, MessageType: "SessionStart", MessageId: "forged", SessionId: "8e1c2a4e-9b7d-4c1e-8a2b-5d6e7f809105",
		Sender: "spiffe://warden.test/planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("forged chain header on Send: err=%v ack=%v, want UNAUTHENTICATED", err, resp.GetAck())
	}
	if _, err := macpv1.NewMACPRuntimeServiceClient(dial(nil)).GetSession(fctx, &macpv1.GetSessionRequest{SessionId: "5e1c2a4e-9b7d-4c1e-8a2b-5d6e7f809102"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("forged chain header on GetSession: %v, want UNAUTHENTICATED", err)
	}
	// A plaintext client cannot talk to the TLS listener at all.
	plain, err := grpc.NewClient(warden, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := sendStart(ctx, plain, "x", payload); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext client: %v, want Unavailable", err)
	}
	// Messages over the limit are refused before anything is forwarded.
	big := make([]byte, 100_000)
	if _, err := sendStart(ctx, dial(&planner), "spiffe://warden.test/planner", big); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: %v, want ResourceExhausted", err)
	}
}

// TestMACPServerTLS runs Warden with a TLS listener (no client
// certificates; dev bearer tokens) on both front doors: a TLS client's
// Send and a session read work, a plaintext client gets nowhere, and a
// message over the limit is refused before anything is forwarded.
func TestMACPServerTLS(t *testing.T) { eachTransport(t, testMACPServerTLS) }

func testMACPServerTLS(t *testing.T) {
	p := newPKI(t)
	serverCert, serverKey, _ := p.issue(t, "warden", true, "")
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--tls-cert", serverCert, "--tls-key", serverKey,
		"--upstream-plaintext", "--max-message-bytes", "65536")
	payload, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(warden, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const sid = "7d1c2a4e-9b7d-4c1e-8a2b-5d6e7f809104"
	if ack, err := sendStartIn(ctx, conn, sid, "planner", payload); err != nil || !ack.GetOk() {
		t.Fatalf("SessionStart over TLS: %v %v", err, ack.GetError())
	}
	got, err := macpv1.NewMACPRuntimeServiceClient(conn).GetSession(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer planner"),
		&macpv1.GetSessionRequest{SessionId: sid})
	if err != nil || got.GetMetadata().GetInitiator() != "planner" {
		t.Fatalf("GetSession over TLS: %v %v", err, got)
	}
	plain, err := grpc.NewClient(warden, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if _, err := sendStart(pctx, plain, "planner", payload); status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("plaintext client: %v, want Unavailable", err)
	}
	if _, err := sendStart(ctx, conn, "planner", make([]byte, 100_000)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: %v, want ResourceExhausted", err)
	}
}

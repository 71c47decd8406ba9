package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testcerts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestServeDrains: a call in flight when ctx ends is answered and Serve
// returns once it was, without closing it; one that outlasts the shutdown
// timeout is closed then. Told apart by what the client got and whether
// Serve logged the timeout, not by how long Serve took: a loaded machine
// stretched the 200 ms call's drain to 1.13 s, past the 500 ms timeout the
// test then had.
func TestServeDrains(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handler  time.Duration // how long the in-flight request takes
		shutdown time.Duration // Serve's shutdown timeout
		timedOut bool          // the call is closed at the shutdown timeout
	}{
		{"in-flight call finishes", 200 * time.Millisecond, 10 * time.Second, false},
		{"shutdown timeout closes it", time.Hour, 500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			var finished atomic.Bool
			srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				select {
				case <-time.After(tc.handler):
					finished.Store(true)
				case <-r.Context().Done():
				}
			}), Limits{}.WithDefaults())
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var logged strings.Builder
			log := slog.New(slog.NewTextHandler(&logged, nil))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, HTTP(srv), lis, tc.shutdown, log) }()
			answered := make(chan error, 1)
			go func() {
				resp, err := http.Get("http://" + lis.Addr().String())
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				answered <- err
			}()
			<-started
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(tc.shutdown + 30*time.Second): // a hang, not a bound: 10 s was outlasted once under GOMAXPROCS=1 at load 15
				t.Fatal("Serve did not return")
			}
			d := time.Since(start)
			err = <-answered
			timedOut := strings.Contains(logged.String(), "shutdown timeout")
			switch {
			case tc.timedOut && (err == nil || !timedOut || d < tc.shutdown):
				t.Errorf("Serve returned %v after ctx ended (timeout logged: %v), the call got %v; want it closed at the %v timeout", d, timedOut, err, tc.shutdown)
			case !tc.timedOut && (err != nil || timedOut || !finished.Load()):
				t.Errorf("Serve returned %v after ctx ended (timeout logged: %v, handler finished: %v), the call got %v; want it answered", d, timedOut, finished.Load(), err)
			}
		})
	}
	t.Run("a failing listener ends Serve", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis.Close()
		if err := Serve(context.Background(), grpc.NewServer(), lis, time.Second, nil); err == nil {
			t.Error("Serve on a closed listener: nil error")
		}
	})
}

// TestUpstreamBackoff: the reconnect backoff GRPCDialOptions builds is
// capped at UpstreamBackoffMax (gRPC's own grows to 120 s). It reads the
// config, then stops a gRPC server for 4 s and counts the client's dial
// attempts meanwhile: at least 5 with a 1 s cap (about 8 when unloaded),
// at most 3 with gRPC's own backoff (1 s, then 1.6x, 20% jitter). A count,
// not a time: a loaded machine makes fewer attempts, not more, and the
// 2.8 s it once took to be served again (bound 1.7 s) under load said nothing of
// the cap.
func TestUpstreamBackoff(t *testing.T) {
	for _, tc := range []struct {
		max, base time.Duration
	}{
		{DefaultUpstreamBackoffMax, backoffBase},
		{50 * time.Millisecond, 50 * time.Millisecond}, // a cap below the first delay lowers it
	} {
		p := connectParams(Limits{UpstreamBackoffMax: tc.max}.WithDefaults())
		if p.Backoff.MaxDelay != tc.max || p.Backoff.BaseDelay != tc.base {
			t.Errorf("cap %v: backoff %+v, want MaxDelay %v, BaseDelay %v", tc.max, p.Backoff, tc.max, tc.base)
		}
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	up := grpc.NewServer()
	healthpb.RegisterHealthServer(up, health.NewServer())
	go func() { _ = up.Serve(lis) }()

	var dials atomic.Int64
	count := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})
	cc, err := grpc.NewClient(addr, append(GRPCDialOptions(Limits{}.WithDefaults()), count, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	check := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil { // connected (200 ms is short for a first connection under -race on a loaded machine)
		t.Fatal(err)
	}
	up.Stop()
	before := dials.Load()
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) { // calls during the outage keep it reconnecting
		_ = check()
		time.Sleep(100 * time.Millisecond)
	}
	attempts := dials.Load() - before
	t.Logf("%d dial attempts during the 4 s outage", attempts)
	if attempts < 5 {
		t.Errorf("%d dial attempts during a 4 s outage, want >= 5 (the backoff capped at %v; gRPC's own makes at most 3)", attempts, DefaultUpstreamBackoffMax)
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	up = grpc.NewServer()
	healthpb.RegisterHealthServer(up, health.NewServer())
	go func() { _ = up.Serve(lis) }()
	defer up.Stop()
	back := time.Now()
	for check() != nil {
		if time.Since(back) > 30*time.Second {
			t.Fatal("not served again within 30 s of the upstream coming back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("served again %v after the upstream came back", time.Since(back).Round(time.Millisecond))
}

func TestNewTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := writeCert(t, dir)
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("no pem here"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		cert, ca   string
		mtls       bool
		wantErr    string
		nextProtos []string
	}{
		{"certificate only", cert, "", false, "", nil},
		{"client CA", cert, ca, true, "", []string{"h2", "http/1.1"}},
		{"missing certificate", filepath.Join(dir, "nope.pem"), "", false, "nope.pem", nil},
		{"certificate without PEM", empty, "", false, "load certificate", nil},
		{"CA file without PEM", cert, empty, false, "holds no PEM certificate", nil},
		{"missing CA file", cert, filepath.Join(dir, "nope.pem"), false, "nope.pem", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewTLS(tc.cert, key, tc.ca, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc2, err := m.Config(tc.nextProtos...).GetConfigForClient(&tls.ClientHelloInfo{})
			if err != nil {
				t.Fatal(err)
			}
			if tc2.MinVersion != tls.VersionTLS12 || len(tc2.Certificates) != 1 || len(tc2.NextProtos) != len(tc.nextProtos) {
				t.Errorf("config %+v", tc2)
			}
			if got := tc2.ClientAuth == tls.VerifyClientCertIfGiven && tc2.ClientCAs != nil; got != tc.mtls {
				t.Errorf("client certificates verified: %v, want %v", got, tc.mtls)
			}
		})
	}
}

// writeCert writes a self-signed certificate, its key, and the same
// certificate as a CA bundle.
func writeCert(t *testing.T, dir string) (cert, key, ca string) {
	t.Helper()
	c, k := testcerts.Server(t, "localhost")
	cert, key, ca = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	for f, b := range map[string][]byte{cert: testcerts.PEM(c), ca: testcerts.PEM(c), key: testcerts.KeyPEM(t, k)} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key, ca
}

// TestUpstreamClientFollowsNoRedirect: an upstream's redirect is its answer,
// handed back as it came; the request is not sent to the other address.
func TestUpstreamClientFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer up.Close()
	resp, err := UpstreamClient(Limits{}, StreamLimits{}).Post(up.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || elsewhere.Load() != 0 {
		t.Fatalf("status %d, %d requests to the redirect's target; want 307 and none", resp.StatusCode, elsewhere.Load())
	}
}

// TestAnswerFirstInPlace: answerFirst gives the handler the server's own
// request, its body swapped for the tracked one (no copy: the gate makes
// the one copy a request gets), and puts the server's body back when the
// handler returns, for the server to drain or close.
func TestAnswerFirstInPlace(t *testing.T) {
	var got *http.Request
	var read string
	h := answerFirst(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		read = string(b)
		w.WriteHeader(http.StatusNoContent)
	}))
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("hello"))
	body := r.Body
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got != r {
		t.Error("the handler was given a copy of the request")
	}
	if r.Body != body {
		t.Error("the request's own body was not put back")
	}
	if read != "hello" {
		t.Errorf("read %q", read)
	}
}

package frames

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// h2specSummary is h2spec's last line: "146 tests, 146 passed, 0 skipped, 0 failed".
var h2specSummary = regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`)

// TestH2spec runs h2spec (the binary named by $H2SPEC; `make h2spec`
// installs it at a pinned version) against the relay's listener, in front
// of a net/http h2c server that answers every request with a short body.
func TestH2spec(t *testing.T) {
	bin := os.Getenv("H2SPEC")
	if bin == "" {
		t.Skip("H2SPEC is not set (make h2spec installs h2spec and sets it)")
	}
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "relayed by the h2spec test\n")
		}),
		Protocols:         new(http.Protocols),
		ReadHeaderTimeout: 10 * time.Second,
	}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() {
		if err := srv.Serve(up); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("upstream: %v", err)
		}
	}()
	t.Cleanup(func() { srv.Close() })
	_, addr := startRelay(t, Config{Upstream: up.Addr().String()})
	host, port, _ := net.SplitHostPort(addr)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-h", host, "-p", port, "-o", "2").CombinedOutput()
	m := h2specSummary.FindSubmatch(out)
	if m == nil {
		t.Fatalf("h2spec: %v, no summary in its output:\n%s", err, out)
	}
	t.Logf("h2spec against the relay: %s", m[0])
	if string(m[4]) != "0" || err != nil {
		t.Fatalf("h2spec failed (%v):\n%s", err, out)
	}
}

package macp

import (
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// h2specSummary is h2spec's last line: "146 tests, 146 passed, 0 skipped, 0 failed".
var h2specSummary = regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`)

// h2specAnswered are the h2spec cases that expect something of the answer
// to h2spec's own request (GET /, no gRPC content type), which the relay
// front door answers at once with grpc-go's own answer to it (HTTP 415,
// Trailers-Only, then RST_STREAM NO_ERROR): the first two expect a DATA
// frame; the third counts on h2spec's requests staying open while it opens
// one stream more than SETTINGS_MAX_CONCURRENT_STREAMS, and they were
// already answered and closed; in the last two the answer may reach h2spec
// before the relay read the DATA frame that breaks content-length. Each
// passes against the relay alone (proxy/frames.TestH2spec), whose test
// upstream reads the body and answers with one. The last case sends its
// WINDOW_UPDATEs after h2spec's GET /, which the front door refuses at
// admission (not a gRPC call) and closes at once: about one run in nine the
// stream is closed before the overflowing WINDOW_UPDATE arrives, and RFC 9113
// §6.9 says a WINDOW_UPDATE on a closed stream MUST NOT be treated as an error.
var h2specAnswered = map[string]bool{
	"2: Sends a WINDOW_UPDATE frame on half-closed (remote) stream":                                                                           true,
	"3: Sends a PRIORITY frame on half-closed (remote) stream":                                                                                true,
	"1: Sends HEADERS frames that causes their advertised concurrent stream limit to be exceeded":                                             true,
	`1: Sends a HEADERS frame with the "content-length" header field which does not equal the DATA frame payload length`:                      true,
	`2: Sends a HEADERS frame with the "content-length" header field which does not equal the sum of the multiple DATA frames payload length`: true,
	"3: Sends multiple WINDOW_UPDATE frames increasing the flow control window to above 2^31-1 on a stream":                                   true,
}

// TestH2spec runs h2spec (the binary named by $H2SPEC; `make h2spec`
// installs it at a pinned version) against the sidecar's listener with the
// relay front door (h2c), in front of a runtime: every case passes but
// those of h2specAnswered, which may fail.
func TestH2spec(t *testing.T) {
	bin := os.Getenv("H2SPEC")
	if bin == "" {
		t.Skip("H2SPEC is not set (make h2spec installs h2spec and sets it)")
	}
	_, up := startFakeRuntime(t)
	addr := serveSidecar(t, devEnforcer(t), Config{Upstream: up, Transport: TransportRelay})
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-h", host, "-p", port, "-o", "2").CombinedOutput()
	m := h2specSummary.FindSubmatch(out)
	if m == nil {
		t.Fatalf("h2spec: %v, no summary in its output:\n%s", err, out)
	}
	t.Logf("h2spec against Warden's relay front door: %s", m[0])
	_, failures, _ := strings.Cut(string(out), "Failures:")
	unexpected := 0
	for _, line := range strings.Split(failures, "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "× ")
		if !ok {
			continue
		}
		if !h2specAnswered[name] {
			unexpected++
			t.Errorf("h2spec case failed: %s", name)
		}
	}
	if unexpected > 0 || (err != nil && failures == "") {
		t.Fatalf("h2spec failed (%v):\n%s", err, out)
	}
}

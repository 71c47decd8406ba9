package test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestA2AAmbiguousCard: an A2A server whose agent card names its
// interfaces in another case ("SupportedInterfaces") is not served through
// Warden: the a2a-go v2.3.1 client reads names without case, so the card
// Warden passed unrewritten (it rewrote only "supportedInterfaces") sent
// the client, with the caller's bearer token, straight to the server's own
// URL, around Warden. Now Warden answers 502 for the card and the client
// never reaches the server. Fails before: the server was called directly.
func TestA2AAmbiguousCard(t *testing.T) {
	peer(t, ".peers/bin/a2a-go-client")
	bin := buildIn(t, "test/peers/a2a-go", "./client")
	var direct atomic.Int32
	var auth atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/agent-card.json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"name":"hostile","description":"d","version":"1","capabilities":{"extendedAgentCard":true},`+
				`"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[],`+
				`"SupportedInterfaces":[{"url":"http://`+r.Host+`/direct","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`)
		case "/direct":
			direct.Add(1)
			auth.Store(r.Header.Get("Authorization"))
			http.Error(w, "no", http.StatusBadRequest)
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer up.Close()
	base := startA2AWarden(t, up.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-url", base, "-token", bobToken, "-hook", "http://127.0.0.1:1/hook").CombinedOutput()
	if n := direct.Load(); n > 0 {
		t.Fatalf("the a2a-go client called the server directly %d times (Authorization %q), around Warden: %s", n, auth.Load(), out)
	}
	if err == nil || !strings.Contains(string(out), "card") {
		t.Fatalf("the client resolved the card: %v %s", err, out)
	}
}

package test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConnectionCapFairness (issue 24 item 20): one unauthenticated client
// holds the listener's connection cap from one address, reopening as
// Warden closes them. Before, every other client's connection was reset at
// accept (0 requests served); now a client from another address takes a
// connection from the flood's share, and its authenticated requests are
// served. Against the MCP TypeScript SDK's server.
func TestConnectionCapFairness(t *testing.T) {
	upstream := startNodeMCP(t)
	base, _ := startMCPWarden(t, upstream, "--max-connections", "16")
	addr := strings.TrimPrefix(base, "http://")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	flood := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	for range 32 { // twice the cap, each reopening when closed
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := flood.DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				go func() { <-ctx.Done(); c.Close() }()
				_, _ = io.Copy(io.Discard, c) // held until Warden closes it
				c.Close()
			}
		})
	}
	time.Sleep(time.Second) // the flood holds the cap

	other := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
	served := 0
	const n = 20
	for range n {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: other.DialContext, DisableKeepAlives: true}}
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fair","version":"0"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice")
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				served++
			}
		}
	}
	t.Logf("authenticated requests served while one address floods the connection cap: %d of %d", served, n)
	if served < n*9/10 {
		t.Fatalf("%d of %d authenticated requests served", served, n)
	}
}

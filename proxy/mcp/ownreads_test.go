package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/proxytest"
)

// TestOwnReadsCounted (security.md X3): the tasks/get Warden sends to
// read a task's status before deciding a tasks/pause takes a place under
// the caller's streams.per_principal while it is read, as the forwarded
// requests do; at per_principal 1 a request that reads and then forwards
// needs one place, not two (proxytest.OwnReads).
func TestOwnReadsCounted(t *testing.T) {
	proxytest.RunOwnReads(t, func(b []byte) bool { return strings.Contains(string(b), `"warden-tasks-get"`) },
		func(t *testing.T, per int, stall func(http.Handler) *httptest.Server) func(string) (int, string) {
			up := newFakeUpstream()
			upSrv := stall(up)
			first := newHarnessOn(t, Config{}, up, upSrv, upSrv.Client(), httptest.NewServer)
			handles := map[string]string{"bob": first.createTask(t, "bob"), "carol": first.createTask(t, "carol")}
			cfg := Config{}
			cfg.Streams.PerPrincipal = per
			h := newHarnessOn(t, cfg, up, upSrv, upSrv.Client(), httptest.NewServer) // a restart: statuses forgotten
			return func(p string) (int, string) {
				r := h.post(t, p, rpc(1, "tasks/pause", map[string]any{"taskId": handles[p]}), hdr{"Mcp-Protocol-Version": "2025-11-25"})
				return r.status, r.errMessage(t)
			}
		})
}

// TestOwnToolReadsCounted is TestOwnReadsCounted for the tools/list page
// Warden reads to learn a tool's taskSupport before deciding a tools/call:
// one read a session at a time (X2), so bob's calls are each in a session
// of their own.
func TestOwnToolReadsCounted(t *testing.T) {
	proxytest.RunOwnReads(t, func(b []byte) bool { return strings.Contains(string(b), `"warden-tools-list"`) },
		func(t *testing.T, per int, stall func(http.Handler) *httptest.Server) func(string) (int, string) {
			up := newFakeUpstream()
			upSrv := stall(up)
			cfg := Config{}
			cfg.Streams.PerPrincipal = per
			h := newHarnessOn(t, cfg, up, upSrv, upSrv.Client(), httptest.NewServer)
			sessions := map[string]chan string{"bob": make(chan string, per+2), "carol": make(chan string, 1)}
			for p, c := range sessions {
				for range cap(c) {
					c <- h.post(t, p, rpc(1, "initialize", map[string]any{"protocolVersion": "2025-11-25"}), nil).header.Get("Mcp-Session-Id")
				}
			}
			return func(p string) (int, string) {
				r := h.post(t, p, rpc(2, "tools/call", map[string]any{"name": "plain", "arguments": map[string]any{}}), hdr{"Mcp-Session-Id": <-sessions[p]})
				return r.status, r.errMessage(t)
			}
		})
}

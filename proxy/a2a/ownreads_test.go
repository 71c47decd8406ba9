package a2a

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/proxytest"
)

// TestOwnReadsCounted (security.md X3): the GetTask Warden sends to read a
// task's state before deciding a message continuing it takes a place under
// the caller's streams.per_principal while it is read, as the forwarded
// requests do; at per_principal 1 a message that reads and then forwards
// needs one place, not two (proxytest.OwnReads).
func TestOwnReadsCounted(t *testing.T) {
	proxytest.RunOwnReads(t, func(b []byte) bool { return strings.Contains(string(b), `"warden-state"`) },
		func(t *testing.T, per int, stall func(http.Handler) *httptest.Server) func(string) (int, string) {
			up := newFakeUpstream()
			upSrv := stall(up)
			first := newHarnessOn(t, Config{}, newEnforcer(t), up, upSrv, upSrv.Client(), httptest.NewServer)
			// a task for each message (a message continuing a task
			// completes it): bob sends per_principal+2 at once
			tasks := map[string]chan any{"bob": make(chan any, per+2), "carol": make(chan any, 1)}
			for p, c := range tasks {
				for range cap(c) {
					c <- first.send(t, p, "input please")["id"]
				}
			}
			cfg := Config{}
			cfg.Streams.PerPrincipal = per
			h := newHarnessOn(t, cfg, newEnforcer(t), up, upSrv, upSrv.Client(), httptest.NewServer) // a restart: states forgotten
			return func(p string) (int, string) {
				status, m := h.call(t, p, "SendMessage", map[string]any{"message": map[string]any{"messageId": "m-more", "taskId": <-tasks[p], "role": "ROLE_USER", "parts": []any{map[string]any{"text": "more"}}}})
				e, _ := m["error"].(map[string]any)
				msg, _ := e["message"].(string)
				return status, msg
			}
		})
}

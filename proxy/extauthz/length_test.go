package extauthz

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestBodyLength: a body Envoy buffered that is not the length the request
// announced (attributes.request.http.size or Content-Length) is refused 413
// at both protocols' ext_authz doors, whatever the partial-body marker says:
// a message cut where the JSON still parses (trailing whitespace) was
// decided as if whole before, at both doors (the cases marked admitted
// before).
func TestBodyLength(t *testing.T) {
	mcpSrv := mcpServer(t)
	a2aSrv := newServer(t, Config{Listen: "unused", A2A: true, A2APath: "/jsonrpc"})
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"abc"}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	pad := strings.Repeat(" ", 64)
	for _, door := range []struct {
		name string
		srv  *Server
		body string
		path string
	}{{"mcp", mcpSrv, get, "/mcp"}, {"a2a", a2aSrv, list, "/jsonrpc"}} {
		n := strconv.Itoa(len(door.body))
		for _, tc := range []struct {
			name   string
			size   int64
			header map[string]string
			status int // 0: admitted
		}{
			{"whole (size)", int64(len(door.body)), nil, 0},
			{"whole (Content-Length)", -1, map[string]string{"content-length": n}, 0},
			{"length unknown (chunked, no marker)", -1, nil, 0},
			{"cut in the padding, size announced (admitted before)", int64(len(door.body) + len(pad)), nil, 413},
			{"cut in the padding, Content-Length announced (admitted before)", -1, map[string]string{"content-length": strconv.Itoa(len(door.body) + len(pad))}, 413},
			{"cut, marker false (admitted before)", int64(len(door.body) + len(pad)), map[string]string{"x-envoy-auth-partial-body": "false"}, 413},
			{"longer than announced (admitted before)", int64(len(door.body) - 1), nil, 413},
			{"size and Content-Length differ (admitted before)", int64(len(door.body)), map[string]string{"content-length": n + "0"}, 413},
			{"Content-Length not a number (admitted before)", -1, map[string]string{"content-length": "+" + n}, 413},
			{"marker true, whole length", int64(len(door.body)), map[string]string{"x-envoy-auth-partial-body": "true"}, 413},
		} {
			t.Run(door.name+"/"+tc.name, func(t *testing.T) {
				hdr := map[string]string{}
				if door.name == "a2a" {
					hdr["mcp-method"], hdr["mcp-name"], hdr["mcp-protocol-version"] = "", "", ""
				}
				for k, v := range tc.header {
					hdr[k] = v
				}
				req := mcpCheck("POST", door.body, hdr)
				h := req.GetAttributes().GetRequest().GetHttp()
				h.Path, h.Size = door.path, tc.size
				h.Headers[":path"] = door.path
				resp, err := door.srv.Check(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				dr := resp.GetDeniedResponse()
				switch {
				case tc.status == 0 && dr != nil:
					t.Fatalf("denied: HTTP %d %s", dr.GetStatus().GetCode(), dr.GetBody())
				case tc.status != 0 && (dr == nil || int(dr.GetStatus().GetCode()) != tc.status):
					t.Fatalf("got %v, want HTTP %d", dr, tc.status)
				}
			})
		}
	}
}

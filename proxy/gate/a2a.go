package gate

import (
	"encoding/json"
	"net/http"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
)

// A2A's agent card paths: 1.0's, and 0.3's which servers still serve.
const (
	CardPath    = "/.well-known/agent-card.json"
	OldCardPath = "/.well-known/agent.json"
)

// a2aRequests is A2A for the request metrics and spans (proxy.Flight): its
// methods, and the GET of an agent card.
var a2aRequests = func() *proxy.Protocol {
	p := &proxy.Protocol{Name: "a2a", Methods: map[string]bool{"GET": true}}
	for _, m := range a2a.Methods() {
		p.Methods[m] = true
	}
	return p
}()

// A2A is the front door of A2A's JSON-RPC binding: the endpoint at path
// (POST), the agent cards public, the HTTP+JSON binding's error shape for
// every other path (the binding Warden does not serve), the body within
// maxBody (the setting key), and one request of an A2A 1.0 method. Errors
// of the JSON-RPC binding are HTTP 200 with the request's id when it could
// be read, as both A2A SDK servers (a2a-go, a2a-sdk) answer them and as the
// specification's examples show (§9.5).
func A2A(path string, maxBody int64, key string) Spec[a2a.Call] {
	return Spec[a2a.Call]{
		Protocol: "a2a", Requests: a2aRequests, Endpoint: path, Public: []string{CardPath, OldCardPath}, REST: true, Methods: []string{http.MethodPost},
		MaxBody: maxBody, MaxBodyKey: key,
		ParseStatus: http.StatusOK, EchoID: true,
		Parse: func(b []byte) (a2a.Call, json.RawMessage, error) {
			c, err := a2a.Parse(b)
			return c, c.ID, err
		},
		Method: func(c a2a.Call) string { return c.Method },
		Check: func(c a2a.Call) (rules.Verdict, json.RawMessage) {
			if !a2a.Known(c.Method) {
				return rules.Verdict{Code: rules.CodeMethodNotFound, Reason: rules.ReasonUnknownMethod, Detail: "Method not found"}, c.ID
			}
			return rules.Verdict{}, nil
		},
		Answer: a2a.Answer,
	}
}

package gate

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
)

// MCPConfig is what the MCP front door is configured with, by the sidecar
// and by ext_authz alike.
type MCPConfig struct {
	// Path is the endpoint's path.
	Path string
	// Hosts and Origins are the allowed hosts and origins of
	// rules/mcp.OriginAllowed.
	Hosts, Origins []string
	// Metadata is the protected-resource metadata URL the 401 challenge
	// names, built from configuration (nil: none), and MetadataDoc the path
	// the document is served at.
	Metadata    func(*Request) string
	MetadataDoc string
	// MaxBody bounds a message; MaxBodyKey names the setting.
	MaxBody    int64
	MaxBodyKey string
}

// mcpRequests is MCP for the request metrics and spans (proxy.Flight): its
// methods, and the requests that carry no message (the GET stream, DELETE,
// a client's JSON-RPC response).
var mcpRequests = func() *proxy.Protocol {
	p := &proxy.Protocol{Name: "mcp", Methods: map[string]bool{"GET": true, "DELETE": true, "response": true}}
	for _, m := range mcp.Methods() {
		p.Methods[m] = true
	}
	return p
}()

// MCP is the MCP Streamable HTTP front door: the endpoint at one path with
// POST, GET and DELETE, Origin against the allowed hosts and origins,
// routing headers given once, the challenge naming the protected-resource
// metadata, and one message (a decided method needs an id). Its errors are
// the SDKs': a parse error is HTTP 400 with a null id.
func MCP(c MCPConfig) Spec[mcp.Call] {
	s := Spec[mcp.Call]{
		Protocol: "mcp", Requests: mcpRequests, Endpoint: c.Path, Methods: []string{http.MethodPost, http.MethodGet, http.MethodDelete},
		Origin:           func(o string) bool { return mcp.OriginAllowed(o, c.Hosts, c.Origins) },
		Own:              []string{"Mcp-Method", "Mcp-Param-"},
		Routing:          repeatedHeader,
		ResourceMetadata: c.Metadata,
		MaxBody:          c.MaxBody, MaxBodyKey: c.MaxBodyKey,
		ParseStatus: http.StatusBadRequest,
		Parse: func(b []byte) (mcp.Call, json.RawMessage, error) {
			call, err := mcp.Parse(b)
			return call, nil, err
		},
		Method: func(call mcp.Call) string {
			if call.Kind == mcp.KindResponse {
				return "response"
			}
			return call.Method
		},
		Check:  func(call mcp.Call) (rules.Verdict, json.RawMessage) { return mcp.CheckKind(call), nil },
		Answer: mcp.Answer,
	}
	if c.Metadata != nil {
		s.Public = []string{c.MetadataDoc}
	}
	return s
}

// MetadataPath is where the protected-resource metadata of a resource at
// path is served (RFC 9728 §3.1).
func MetadataPath(path string) string {
	return "/.well-known/oauth-protected-resource" + strings.TrimSuffix(path, "/")
}

// MetadataDocument is the RFC 9728 protected-resource metadata document.
func MetadataDocument(resource string, servers []string) []byte {
	b, _ := json.Marshal(map[string]any{
		"resource":                 resource,
		"authorization_servers":    servers,
		"bearer_methods_supported": []string{"header"},
	})
	return b
}

// routingHeaders are read once by Warden and by the upstream; a second value
// could be the one the upstream reads.
var routingHeaders = []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id"}

// repeatedHeader returns why a routing header is refused: given more than
// once, as two field lines or as a list in one (what Envoy's CheckRequest
// makes of two lines) ("" when none is).
func repeatedHeader(h http.Header) string {
	for _, k := range routingHeaders {
		if v := h.Values(k); len(v) > 1 || len(v) == 1 && strings.Contains(v[0], ",") {
			return "invalid request: the " + k + " header is given more than once"
		}
	}
	return ""
}

// DenySession refuses an MCP request naming a session that is not the
// caller's, as the SDKs answer a session they do not know: 404 with the
// JSON-RPC error -32001 "Session not found" (nil in dry run, as Deny). Both
// MCP doors answer it: the sidecar for a session handle sealed to another
// principal, ext_authz for a session id another principal used first.
func (g *Gate[C]) DenySession(ctx context.Context, principal string) *Answer {
	return g.Deny(ctx, principal, rules.Verdict{Code: rules.CodeSessionNotFound, Reason: rules.ReasonSessionUnknown, Detail: "Session not found"}, http.StatusNotFound, mcp.ErrSessionNotFound, nil)
}

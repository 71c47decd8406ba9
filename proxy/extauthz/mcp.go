package extauthz

import (
	"context"
	"net/url"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/rules/mcp"
)

// defaultMaxSteerBytes matches the standalone sidecar's default.
const defaultMaxSteerBytes = 16 << 10

// mcpGate is the MCP front door as configured for ext_authz: the endpoint at
// extauthz.mcp_path, and with extauthz.authorization_servers the challenge
// naming extauthz.resource's metadata, which is answered here.
func mcpGate(cfg Config) gate.MCPConfig {
	c := gate.MCPConfig{Path: cfg.MCPPath, Hosts: cfg.AllowedHosts, Origins: cfg.AllowedOrigins, MaxBody: cfg.MaxBodyBytes, MaxBodyKey: "extauthz.max_body_bytes"}
	if u, err := url.Parse(cfg.Resource); err == nil && len(cfg.AuthorizationServers) > 0 {
		doc := gate.MetadataPath(u.EscapedPath())
		c.MetadataDoc = doc
		c.Metadata = func(*gate.Request) string { return u.Scheme + "://" + u.Host + doc }
	}
	return c
}

// checkMCP decides an MCP Streamable HTTP request from the request alone:
// the gate (proxy/gate: path, method, Origin, routing headers, credentials,
// content headers, body, message), the session id's principal (session),
// the routing headers against the body, and the steer message bound. Task ownership, task status and tool-level
// taskSupport are learned from responses, which Envoy does not show here:
// they need the standalone sidecar.
func (s *Server) checkMCP(ctx context.Context, r *gate.Request) *authv3.CheckResponse {
	in, refused := s.mcp.Admit(ctx, r)
	switch {
	case refused != nil:
		return denyAnswer(*refused)
	case in.Public != "":
		// The protected-resource metadata: answered here, the upstream
		// does not know it.
		return denyAnswer(gate.Document(gate.MetadataDocument(s.cfg.Resource, s.cfg.AuthorizationServers)))
	}
	if refused := s.session(ctx, in.Principal.ID, r); refused != nil {
		return denyAnswer(*refused)
	}
	if !in.Message {
		return s.allow(in.Principal, "") // GET (SSE) and DELETE carry no message
	}
	call, hdr := in.Call, r.Header
	name, hasName := hdr["Mcp-Name"]
	// the tool's inputSchema is never seen here (tools/list answers are
	// invisible): Mcp-Param-* values are checked, not matched to arguments,
	// as Envoy joined their lines (r.Joined)
	h := mcp.Headers{ProtocolVersion: hdr.Get("Mcp-Protocol-Version"), Method: hdr.Get("Mcp-Method"), HasName: hasName, Params: mcp.Params(hdr), Joined: r.Joined}
	if hasName {
		h.Name = name[0]
	}
	v := mcp.CheckHeaders(call, h)
	if v.OK() && !(call.Kind == mcp.KindRequest && mcp.Decided(call.Method)) {
		return s.allow(in.Principal, "")
	}
	// Decided requests go through the Enforcer like the sidecar's, with
	// ownership unknown (the create response is invisible here): the steer
	// bound and operator warden.mcp rules apply, and refusals are logged and
	// counted with an ID.
	limit := s.cfg.MaxSteerBytes
	if limit == 0 {
		limit = defaultMaxSteerBytes
	}
	d, err := s.tasks.Enforce(ctx, tasks.Request{Principal: in.Principal, Call: call, Refused: v, OwnershipUnknown: true,
		Limits: mcp.Limits{MaxSteerBytes: limit}})
	if err != nil {
		return denyAnswer(s.mcp.Unavailable(ctx, in.Principal.ID, call.Method, call.ID, err))
	}
	d.Settle(d.Allow)
	if d.Allow {
		return s.allow(in.Principal, d.ID)
	}
	return denyAnswer(s.mcp.Refused(d, call.ID))
}

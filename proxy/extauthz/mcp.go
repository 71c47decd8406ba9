package extauthz

import (
	"context"
	"errors"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
	mcprules "github.com/agentwarden/warden/rules/mcp"
)

// defaultMaxSteerBytes matches the standalone sidecar's default.
const defaultMaxSteerBytes = 16 << 10

// checkMCP decides an MCP Streamable HTTP request from the request alone:
// the endpoint's exact path (extauthz.mcp_path), Origin, authentication,
// the JSON-RPC message's shape, the routing headers against the body, and
// the steer message bound. Task ownership, task status
// and tool-level taskSupport are learned from responses, which Envoy does not
// show here: they need the standalone sidecar.
func (s *Server) checkMCP(ctx context.Context, h *authv3.AttributeContext_HttpRequest, creds authn.Credentials, credErr error) *authv3.CheckResponse {
	hdr := h.GetHeaders()
	if !pathIs(h.GetPath(), s.cfg.MCPPath) {
		// MCP has one endpoint; another path may reach another handler
		// (a legacy SSE transport, an admin route) that reads the body, or
		// a GET, otherwise.
		msg := "Warden serves the MCP endpoint at " + s.cfg.MCPPath + " only (extauthz.mcp_path)"
		d := s.enf.Refuse("mcp", "", "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonUnknownMethod, Detail: msg})
		return denyJSONRPC(404, nil, mcprules.ErrInvalidRequest, msg, d.ID)
	}
	if o := hdr["origin"]; !mcprules.OriginAllowed(o, s.cfg.AllowedHosts, s.cfg.AllowedOrigins) {
		msg := "Forbidden: Origin " + o + " is not allowed"
		d := s.enf.Refuse("mcp", "", "", rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonOriginRefused, Detail: msg})
		return denyJSONRPC(403, nil, mcprules.ErrInvalidRequest, msg, d.ID)
	}
	if status, msg := mcprules.CheckHTTPMethod(h.GetMethod(), len(h.GetRawBody()) > 0 || h.GetBody() != "" || h.GetSize() > 0); status != 0 {
		d := s.enf.Refuse("mcp", "", "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg})
		return denyJSONRPC(status, nil, mcprules.ErrInvalidRequest, msg, d.ID)
	}
	p, err := creds, credErr
	var principal authn.Principal
	if err == nil {
		principal, err = s.enf.Authenticate(ctx, p)
	}
	if errors.Is(err, authn.ErrKeysUnavailable) {
		s.log.Warn("cannot authenticate: verification keys unavailable", "err", err)
		return denyJSONRPC(503, nil, mcprules.ErrInternal, "authentication is unavailable; retry later", "")
	}
	if err != nil {
		d := s.enf.Refuse("mcp", "", "", rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, Detail: "authentication failed: " + authn.Reason(err)})
		resp := denyJSONRPC(401, nil, mcprules.ErrUnauthorized, "Unauthorized: "+authn.Reason(err), d.ID)
		dr := resp.GetDeniedResponse()
		dr.Headers = append(dr.Headers, header("www-authenticate", authn.Challenge("", err)))
		return resp
	}
	if h.GetMethod() != "POST" {
		return s.allow(principal, "") // GET (SSE) and DELETE carry no message
	}
	body, msg := jsonBody(h)
	if msg != "" {
		d := s.enf.Refuse("mcp", principal.ID, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg})
		return denyJSONRPC(415, nil, mcprules.ErrInvalidRequest, msg, d.ID)
	}
	call, err := mcprules.Parse(body)
	if err != nil {
		c := jsonrpc.CodeOf(err)
		msg := err.Error() + " (if the body was cut, raise Envoy's max_request_bytes)"
		d := s.enf.Refuse("mcp", principal.ID, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg})
		return denyJSONRPC(400, nil, c, msg, d.ID)
	}
	if v := mcprules.CheckKind(call); !v.OK() {
		d := s.enf.Refuse("mcp", principal.ID, "", v)
		return denyJSONRPC(400, nil, mcprules.ErrInvalidRequest, v.Detail, d.ID)
	}
	name, hasName := hdr["mcp-name"]
	v := mcprules.CheckHeaders(call, mcprules.Headers{ProtocolVersion: hdr["mcp-protocol-version"], Method: hdr["mcp-method"], Name: name, HasName: hasName})
	if v.OK() && !(call.Kind == mcprules.KindRequest && mcprules.Decided(call.Method)) {
		return s.allow(principal, "")
	}
	// Decided requests go through the Enforcer like the sidecar's, with
	// ownership unknown (the create response is invisible here): the steer
	// bound and operator warden.mcp rules apply, and refusals are logged and
	// counted with an ID.
	limit := s.cfg.MaxSteerBytes
	if limit == 0 {
		limit = defaultMaxSteerBytes
	}
	d, err := s.enf.EnforceTask(ctx, proxy.TaskRequest{Principal: principal, Call: call, Refused: v, OwnershipUnknown: true,
		Limits: mcprules.Limits{MaxSteerBytes: limit}})
	if err != nil {
		s.log.Warn("could not decide an MCP request; refusing it", "method", call.Method, "err", err)
		return denyJSONRPC(503, call.ID, mcprules.ErrInternal, "Warden could not decide this request; retry later", "")
	}
	d.Settle(d.Allow)
	if d.Allow {
		return s.allow(principal, d.ID)
	}
	status, rpc, msg := mcprules.Answer(d.Code, d.Message)
	return denyJSONRPC(status, call.ID, rpc, msg, d.ID)
}

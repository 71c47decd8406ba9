package extauthz

import (
	"context"
	"errors"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	a2arules "github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// checkA2A decides an A2A JSON-RPC request from the request alone: GET of
// the agent card is public; everything else needs the JSON-RPC endpoint's
// exact path (extauthz.a2a_path; the HTTP+JSON binding's paths and every
// other spelling are refused), credentials, a POST whose body is one A2A 1.0
// request, and push-notification URLs that pass the SSRF check. Task and
// context ownership rest on the handles the standalone sidecar hands out in
// its answers, which Envoy does not show here: ids reach the server as the
// client wrote them, and the policy runs with ownership unknown.
func (s *Server) checkA2A(ctx context.Context, h *authv3.AttributeContext_HttpRequest, creds authn.Credentials, credErr error) *authv3.CheckResponse {
	path, method := h.GetPath(), h.GetMethod()
	switch {
	case pathIn(path, a2aCardPaths):
		if method == "GET" || method == "HEAD" {
			return s.allow(authn.Principal{}, "")
		}
		msg := "the agent card is read with GET"
		d := s.enf.Refuse("a2a", "", "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg})
		return denyJSONRPC(405, nil, jsonrpc.ErrInvalidRequest, msg, d.ID)
	case !pathIs(path, s.cfg.A2APath):
		// The HTTP+JSON binding's paths, and any spelling of the endpoint
		// other than its own: the upstream may route them to a handler that
		// reads the body otherwise.
		msg := "Warden serves A2A's JSON-RPC binding at " + s.cfg.A2APath + " only (extauthz.a2a_path; the HTTP+JSON binding is not enforced)"
		d := s.enf.Refuse("a2a", "", "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonUnknownMethod, Detail: msg})
		return denyJSONRPC(404, nil, jsonrpc.ErrInvalidRequest, msg, d.ID)
	case method != "POST":
		msg := "A2A's JSON-RPC binding takes POST"
		d := s.enf.Refuse("a2a", "", "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg})
		return denyJSONRPC(405, nil, jsonrpc.ErrInvalidRequest, msg, d.ID)
	}
	principal, err := authn.Principal{}, credErr
	if err == nil {
		principal, err = s.enf.Authenticate(ctx, creds)
	}
	if errors.Is(err, authn.ErrKeysUnavailable) {
		s.log.Warn("cannot authenticate: verification keys unavailable", "err", err)
		return denyJSONRPC(503, nil, jsonrpc.ErrInternal, "authentication is unavailable; retry later", "")
	}
	if err != nil {
		d := s.enf.Refuse("a2a", "", "", rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, Detail: "authentication failed: " + authn.Reason(err)})
		resp := denyJSONRPC(401, nil, jsonrpc.ErrInvalidRequest, "Unauthorized: "+authn.Reason(err), d.ID)
		dr := resp.GetDeniedResponse()
		dr.Headers = append(dr.Headers, header("www-authenticate", authn.Challenge("", err)))
		return resp
	}
	body, msg := jsonBody(h)
	if msg != "" {
		d := s.enf.Refuse("a2a", principal.ID, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg})
		return denyJSONRPC(415, nil, jsonrpc.ErrInvalidRequest, msg, d.ID)
	}
	call, err := a2arules.Parse(body)
	if err != nil {
		c := jsonrpc.CodeOf(err)
		msg := err.Error() + " (if the body was cut, raise Envoy's max_request_bytes)"
		d := s.enf.Refuse("a2a", principal.ID, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg})
		return denyJSONRPC(400, nil, c, msg, d.ID)
	}
	if !a2arules.Known(call.Method) {
		d := s.enf.Refuse("a2a", principal.ID, call.Method, rules.Verdict{Code: rules.CodeMethodNotFound, Reason: rules.ReasonUnknownMethod, Detail: "Method not found"})
		return denyJSONRPC(200, call.ID, jsonrpc.ErrMethodNotFound, "Method not found", d.ID)
	}
	req := proxy.A2ARequest{Principal: principal, Method: call.Method, TaskID: call.Task, OwnershipUnknown: true,
		New: a2arules.Sends(call.Method) && !call.Continues() && len(call.References) == 0}
	if call.Continues() {
		req.Method = a2arules.MethodMessageContinue
	}
	// The sidecar's checks of what the request alone tells: a tenant
	// (Envoy may route on it to another agent), then the webhook URLs.
	if req.Refused = a2arules.TenantRefused(call); req.Refused.OK() {
		req.Refused = a2arules.WebhookRefused(call, s.webhooks)
	}
	d, err := s.enf.EnforceA2A(ctx, req)
	if err != nil {
		s.log.Warn("could not decide an A2A request; refusing it", "method", call.Method, "err", err)
		return denyJSONRPC(503, call.ID, jsonrpc.ErrInternal, "Warden could not decide this request; retry later", "")
	}
	d.Settle(d.Allow)
	if d.Allow {
		return s.allow(principal, d.ID)
	}
	status, rpc, msg := a2arules.Answer(d.Code, d.Message)
	return denyJSONRPC(status, call.ID, rpc, msg, d.ID)
}

package extauthz

import (
	"context"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/a2a/tenancy"
	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/rules/a2a"
)

// checkA2A decides an A2A JSON-RPC request from the request alone: the gate
// (proxy/gate: GET of the agent card is public; everything else needs the
// JSON-RPC endpoint's exact path, extauthz.a2a_path, credentials, and a POST
// whose body is one A2A 1.0 request), then push-notification URLs that pass
// the SSRF check. Task and context ownership rest on the handles the
// standalone sidecar hands out in its answers, which Envoy does not show
// here: ids reach the server as the client wrote them, and the policy runs
// with ownership unknown.
func (s *Server) checkA2A(ctx context.Context, r *gate.Request) *authv3.CheckResponse {
	in, refused := s.a2a.Admit(ctx, r)
	switch {
	case refused != nil:
		return denyAnswer(*refused)
	case in.Public != "":
		return s.allow(authn.Principal{}, "")
	}
	call, principal := in.Call, in.Principal
	req := tenancy.Request{Principal: principal, Method: call.Method, TaskID: call.Task, OwnershipUnknown: true, Content: call.Content,
		New: a2a.Sends(call.Method) && !call.Continues() && len(call.References) == 0}
	if call.Continues() {
		req.Method = a2a.MethodMessageContinue
	}
	// The sidecar's checks of what the request alone tells: a tenant
	// (Envoy may route on it to another agent), then the webhook URLs.
	if req.Refused = a2a.TenantRefused(call); req.Refused.OK() {
		req.Refused = a2a.WebhookRefused(call, s.webhooks)
	}
	d, err := s.tenancy.Enforce(ctx, req)
	if err != nil {
		return denyAnswer(s.a2a.Unavailable(ctx, principal.ID, call.Method, call.ID, err))
	}
	d.Settle(d.Allow)
	if d.Allow {
		return s.allow(principal, d.ID)
	}
	return denyAnswer(s.a2a.Refused(d, call.ID))
}

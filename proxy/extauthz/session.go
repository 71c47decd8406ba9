package extauthz

import (
	"context"

	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/proxy/owners"
)

// session binds the MCP session id a request names (Mcp-Session-Id) to the
// first authenticated principal that presents one, in the owner table
// (owners.MCPSession: first come, through Claim; shared by the replicas
// with --state), and refuses it to any other principal as the sidecar
// refuses another's session: 404, "Session not found" (gate.DenySession).
// It is the one place every ext_authz MCP request with a session id passes
// through, whatever it is (the GET stream with or without Last-Event-ID,
// DELETE, a POST of any method or an answer). Envoy never shows Warden the
// initialize answer that issues the id, so its first use stands for it:
// the client that got the id sends it on its very next request. nil lets
// the request on; a table that cannot be read is 503.
func (s *Server) session(ctx context.Context, principal string, r *gate.Request) *gate.Answer {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" || principal == "" {
		return nil // no session yet (initialize), or dry run's anonymous caller: nothing to bind
	}
	k, table := owners.Key{Kind: owners.MCPSession, ID: sid}, s.enf.OwnerTable()
	// An owner never changes: one this replica knows answers without the
	// store (Owners asks it again at most once a second per id); only an
	// id nobody is known to hold is claimed, first come.
	got, err := table.Owners(ctx, principal, k)
	ok := err == nil && got[0] == principal
	if err == nil && got[0] == "" {
		_, _, ok, err = table.Claim(ctx, k, principal)
	}
	if err != nil {
		a := s.mcp.Unavailable(ctx, principal, r.Method, nil, err)
		return &a
	}
	if ok {
		return nil
	}
	return s.mcp.DenySession(ctx, principal)
}

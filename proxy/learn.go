package proxy

import (
	"context"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/mcp"
)

// Owners returns whose each MCP task, A2A task or A2A context is, "" when
// nobody's as far as Warden knows: what an answer filter keeps. An error
// means the shared store could not be read: the caller cannot tell whose
// the ids are, and nothing about them may pass.
func (e *Enforcer) Owners(ctx context.Context, keys ...owners.Key) ([]string, error) {
	return e.owners.Owners(ctx, keys...)
}

// Learn applies what an answer says (created entries, statuses: the facts
// an answer filter found) to the owner table and returns the owner of each
// fact's id afterwards (owners.Table.Learn: an owner is known only from an
// answer to that owner's own request, from a handle it proved, or from the
// shared store). A status that is not one of the id's protocol is dropped.
// An error means the shared store could not be written or read: the answer
// must not pass.
func (e *Enforcer) Learn(ctx context.Context, facts ...owners.Fact) ([]string, error) {
	for i := range facts {
		f := &facts[i]
		switch f.Key.Kind {
		case owners.MCPTask:
			if !mcp.KnownStatus(f.Status) {
				f.Status = ""
			}
		case owners.A2ATask:
			f.Status = a2a.State(f.Status)
		default:
			f.Status = ""
		}
	}
	return e.owners.Learn(ctx, facts...)
}

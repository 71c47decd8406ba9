package proxy

import (
	"context"
	"errors"

	"github.com/agentwarden/warden/proxy/owners"
)

// IDUnknown is the id reason of an id naming a task Warden knows no owner
// of: a made-up id where a handle belongs (a raw id Warden knows is
// handle.ReasonRawID), or one taken as is in dry run.
const IDUnknown = "unknown_id"

// Owners returns whose each MCP task, A2A task or A2A context is, "" when
// nobody's as far as Warden knows: what an answer filter keeps. An error
// means the shared store could not be read: the caller cannot tell whose
// the ids are, and nothing about them may pass. by is the principal whose
// request reads them ("" none): only its own entries become its most
// recently used (owners.Table.Owners).
func (e *Enforcer) Owners(ctx context.Context, by string, keys ...owners.Key) ([]string, error) {
	return e.owners.Owners(ctx, by, keys...)
}

// IDReason is why an id a request named is not the caller's, for the
// operator's log line and record: cause, the handle's (handle.Cause), except
// that a raw id (cause rawID) naming nothing Warden knows an owner of (key)
// is IDUnknown, a made-up id. Only refusals ask, so only they pay the read.
func (e *Enforcer) IDReason(ctx context.Context, cause, rawID string, key owners.Key) string {
	if cause != rawID {
		return cause
	}
	if o, err := e.owners.Owners(ctx, "", key); err == nil && o[0] == "" {
		return IDUnknown
	}
	return cause
}

// Learn applies what the answer to the decided request says (facts an
// answer filter found: entries it created, statuses) to the owner table and
// returns the owner of each fact's id afterwards (owners.Table.Learn): an
// entry the answer created is the decision's principal's, the requester's,
// unless another's already; a status that is not one of the id's protocol
// is dropped. An error means the shared store could not be written or
// read: the answer must not pass.
func (d *Decision) Learn(ctx context.Context, facts ...owners.Fact) ([]string, error) {
	if d.owners == nil {
		return nil, errors.New("learn: a decision without an owner table (not an MCP or A2A decision)")
	}
	return d.owners.Learn(ctx, d.Principal, canonical(d.canon, facts)...)
}

// Canon reads a status an answer reported for an id of kind as the id's
// protocol spells its statuses, "" when it is not one of them (dropped). A
// protocol's decider gives it (Learning, Observe, Resumed).
type Canon func(kind owners.Kind, status string) string

// Learning makes decision d's answer learned into the owner table, its
// statuses read with canon (Learn).
func (e *Enforcer) Learning(d *Decision, canon Canon) {
	d.owners, d.canon = e.owners, canon
}

// Resumed is the decision of principal's request of type typ whose answer
// a resumed stream carries: the request was decided when it was sent, and
// the sealed resume point the caller presented proves it was principal's.
// It decides nothing again (it is not logged or counted); it learns its
// answer as the request's own decision would.
func (e *Enforcer) Resumed(protocol, principal, typ string, canon Canon) *Decision {
	d := e.Start(context.Background(), protocol)
	d.Allow, d.Principal, d.Type = true, principal, typ
	e.Learning(&d, canon)
	return &d
}

// Observe is Learn for a message no decided request opened (an MCP
// standalone stream): statuses, read with canon, and whose the ids are; it
// creates nothing.
func (e *Enforcer) Observe(ctx context.Context, canon Canon, facts ...owners.Fact) ([]string, error) {
	return e.owners.Learn(ctx, "", canonical(canon, facts)...)
}

// canonical reads facts' statuses with canon (nil drops them all).
func canonical(canon Canon, facts []owners.Fact) []owners.Fact {
	for i := range facts {
		f := &facts[i]
		if canon == nil {
			f.Status = ""
		} else {
			f.Status = canon(f.Key.Kind, f.Status)
		}
	}
	return facts
}

package mcp

import "github.com/agentwarden/warden/proxy/handle"

// handlePrefix marks Warden's handles.
const handlePrefix = handle.Prefix

// Kinds of identifier. Each has its own keys and is bound into the
// additional data, so a handle of one kind never opens as another.
const (
	kindTask    = 't' // upstream task IDs: bound to the principal
	kindSession = 's' // upstream Mcp-Session-Id: bound to the principal
	kindEvent   = 'e' // SSE event ids: bound to the principal and the session
	kindCursor  = 'c' // tasks/list cursors: bound to the principal and the session
)

var kinds = [...]byte{kindTask, kindSession, kindEvent, kindCursor}

// handles are the MCP domain's sealed handles (proxy/handle): upstream task
// IDs, MCP session IDs, SSE event ids and tasks/list cursors bound to one
// principal (and, for event ids and cursors, one upstream session).
type handles struct{ s handle.Sealer }

// newHandles derives the per-kind keys from the handle keys.
func newHandles(keys *handle.Ring) (handles, error) {
	s, err := handle.NewSealer(keys, "mcp", kinds[:])
	return handles{s}, err
}

func (h handles) seal(kind byte, principal, id string) string { return h.s.Seal(kind, principal, id) }

func (h handles) open(kind byte, principal, v string) (string, bool) {
	return h.s.Open(kind, principal, v)
}

// open is the upstream id of the caller's handle v of kind (a cursor: of
// the caller's session); when v is not one, why (handle.Cause) is kept for
// the refusal's log line and record, the first one of the request.
func (x *exchange) open(kind byte, v string) (string, bool) {
	session := ""
	if kind == kindCursor || kind == kindEvent {
		session = x.sid
	}
	id, err := x.s.handles.s.Unseal(kind, x.principal, session, v)
	if err != nil {
		if x.idReason == "" {
			x.idReason = handle.Cause(err)
		}
		return "", false
	}
	return id, true
}

func (h handles) sealIn(kind byte, principal, session, id string) string {
	return h.s.SealIn(kind, principal, session, id)
}

func (h handles) openIn(kind byte, principal, session, v string) (string, bool) {
	return h.s.OpenIn(kind, principal, session, v)
}

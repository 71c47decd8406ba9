package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// exchange is one request and its answer, seen by one principal in one
// upstream session (sid, "" without sessions).
type exchange struct {
	s         *Server
	hold      listener.Hold // the answer's share of the bytes in flight (forward)
	body      relay.Body    // the request's body toward the upstream (forward)
	principal string
	sid       string
	// idReason is why the first handle of the request that did not open
	// did not (handle.Cause), for the operator.
	idReason string
	expiry   time.Time // the credential's; zero if it never expires
	// strip removes the client's credential headers toward the upstream:
	// the principal was authenticated by something the upstream cannot
	// check (a client certificate).
	strip bool
	// statusOf is the upstream id of the task whose status ReadStatus
	// reads.
	statusOf string
	// who and creds are the caller and the credentials it was
	// authenticated from, for guard.
	who   authn.Principal
	creds authn.Credentials
	// lastEventID is the upstream event id the caller resumes from;
	// resumed is set when call is the request whose stream that resumes
	// (resume.go), not one of this exchange.
	lastEventID string
	resumed     bool
	call        mcp.Call
	decision    *proxy.Decision
	settled     bool
	// sent is set once the request was handed to the upstream (and not
	// refused at the dial): from then on an answer not seen is unknown.
	sent bool
	// support is the called tool's taskSupport (tools/call).
	support string
	// dry is dry-run mode: identifiers are not sealed, nothing is
	// withheld, refusals are logged. replaced is set when an answer would
	// have been replaced with an error.
	dry, replaced bool
	// answered is set once the caller got Warden's error in place of an
	// answer too large to check; the upstream's answer no longer passes.
	answered bool
	// taskID is the upstream ID the request's params.taskId named.
	taskID string
	// req is the caller's request: Warden's own requests on its behalf
	// (further tasks/list pages) go with its credentials and context.
	req *http.Request
}

func (x *exchange) settle(accepted bool) {
	if x.decision != nil && !x.settled {
		x.settled = true
		x.decision.Settle(accepted)
	}
}

// unknown ends the decision with the upstream's answer unknown
// (proxy.Decision.Unknown): the request reached the upstream, or may have,
// and no answer Warden could read came back (the caller hung up, the
// answer was lost or over the bound). Nothing is learned; a steer keeps
// its place in the queue, since the server may have queued it.
func (x *exchange) unknown() {
	if x.decision != nil && !x.settled {
		x.settled = true
		x.decision.Unknown()
	}
}

// unanswered ends a decision no answer settled: refused when the request
// never left Warden, unknown once the upstream may have it (sent).
func (x *exchange) unanswered() {
	if x.sent {
		x.unknown()
	}
	x.settle(false)
}

// seal returns the caller's handle of an upstream identifier; in dry-run
// mode, the identifier itself (what the client would see without Warden).
func (x *exchange) seal(kind byte, id string) string {
	switch {
	case x.dry:
		return id
	case kind == kindEvent || kind == kindCursor:
		return x.s.handles.sealIn(kind, x.principal, x.sid, id)
	}
	return x.s.handles.seal(kind, x.principal, id)
}

// taskKey is the owner table's key of an MCP task.
func taskKey(id string) owners.Key { return owners.Key{Kind: owners.MCPTask, ID: id} }

// apply hands what a message says (facts) to the decision, which learns it
// when the answer is to the caller's decided request (a task it created
// is the caller's); a message no decided request opened (the standalone
// stream) creates nothing. It returns the owner of each fact's id
// afterwards; an error means whose cannot be told.
func (x *exchange) apply(facts ...owners.Fact) ([]string, error) {
	if x.decision != nil {
		return x.decision.Learn(x.ctx(), facts...)
	}
	return x.s.tasks.Observe(x.ctx(), facts...)
}

// ctx is the context of Warden's reads and writes of the owner table for
// this exchange: the caller's request's.
func (x *exchange) ctx() context.Context {
	if x.req == nil {
		return context.Background()
	}
	return x.req.Context()
}

func hasKey(spans []span, key string) bool {
	for _, s := range spans {
		if s.key == key {
			return true
		}
	}
	return false
}

// answers reports whether an answer's decoded id is the id of this
// exchange's request.
func (x *exchange) answers(id any) bool {
	return x.call.Kind == mcp.KindRequest && !x.answered && sameID(id, x.call.ID)
}

// answersNull reports whether an error whose raw id is null answers this
// exchange's message: JSON-RPC's answer to a message whose id the server
// did not read, the MCP SDKs' refusal of a message of an unknown or ended
// session ("Session not found", "no valid session": HTTP 404 or 400, which
// tell a client to initialize again) among them. Only a message the caller
// POSTed is so answered: on a standalone stream no such error passes.
func (x *exchange) answersNull(raw []byte) bool {
	return x.call.Kind != 0 && !x.answered && string(bytes.TrimSpace(raw)) == "null"
}

// ownHandle reports whether an upstream value is already one of the
// caller's task handles (an upstream echoing one back).
func (x *exchange) ownHandle(v string) bool {
	if !strings.HasPrefix(v, handlePrefix) {
		return false
	}
	_, ok := x.open(kindTask, v)
	return ok
}

// creates reports whether the exchange is the caller's own tools/call, whose
// stream names the task the call made.
func (x *exchange) creates() bool {
	return x.call.Kind == mcp.KindRequest && x.call.Method == mcp.MethodToolsCall && !x.answered
}

// related returns the facts of a message on the stream of the caller's
// tools/call that relates itself to a task (the related-task _meta of the
// answer's result, or of a notification or request's params): the server
// ran the call as that task, so it is the caller's unless another's
// already. Bare status notifications say no such thing, as a server that
// broadcasts them would give the caller someone else's task.
func (x *exchange) related(msg *jsonrpc.Object) []owners.Fact {
	var facts []owners.Fact
	for _, k := range []string{"result", "params"} {
		obj, _ := msg.Obj(k)
		meta, _ := sub(obj, "_meta")
		rel, _ := sub(meta, mcp.RelatedTask)
		id, _ := str(rel, "taskId")
		if id == "" || strings.HasPrefix(id, handlePrefix) {
			continue
		}
		facts = append(facts, owners.Fact{Key: taskKey(id), Created: true})
	}
	return facts
}

// learns reports whether the answer to method is read whole (learn).
func learns(method string) bool {
	return method == mcp.MethodToolsList || method == mcp.MethodToolsCall || method == mcp.MethodList
}

// idValue decodes a raw JSON-RPC id (numbers kept as their literal).
func idValue(raw []byte) (any, bool) { return jsonrpc.IDValue(raw) }

// sameID compares a decoded id with the request's raw id.
func sameID(v any, raw json.RawMessage) bool { return jsonrpc.SameID(v, raw) }

// guard watches the credential of a long-lived answer (an event stream):
// end is called when the credential is revoked (relay.Bound). A method, not
// a closure made for every request: only a stream needs it.
func (x *exchange) guard(ctx context.Context, end func()) (stop func()) {
	return x.s.enforcer.Watch(ctx, x.creds, x.who, proxy.DefaultCredentialCheck, end)
}

// ReadStatus reads the status of the task the request names from the
// upstream (tasks.StatusReader), with the caller's credentials, session and
// _meta.
func (x *exchange) ReadStatus(ctx context.Context) (tasks.View, error) {
	return x.s.readStatus(ctx, x.req, x.strip, x.principal, x.sid, x.call.Params, x.statusOf)
}

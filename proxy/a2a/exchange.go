package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/pushrelay"
	"github.com/agentwarden/warden/proxy/a2a/tenancy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// exchange is one request and its answer, seen by one principal.
type exchange struct {
	s         *Server
	hold      listener.Hold // the answer's share of the bytes in flight (forward)
	body      relay.Body    // the request's body toward the upstream (forward)
	principal string
	expiry    time.Time
	// grant is what the request's credential proved, sealed into the push
	// configs it sets.
	grant authn.Grant
	strip bool // Warden authenticated from what the upstream cannot see
	// idReason is why the first handle of the request that did not open
	// did not (handle.Cause), for the operator.
	idReason string
	dry      bool // dry run: what an answer would not hand over is logged and passes
	// who and creds are the caller and the credentials it was
	// authenticated from, for guard.
	who    authn.Principal
	creds  authn.Credentials
	call   a2a.Call
	taskID string // the upstream id of the task the request names
	// mine are the upstream ids known to be the caller's: proven by the
	// request's handles, or learned while reading the answer.
	mine idMap[struct{}]
	// failed is set once an answer named another's task: nothing more of
	// a stream passes.
	failed bool
	// unreadable is set when whose a task is could not be read (the
	// shared store): the answer is then Warden's retryable error.
	unreadable bool
	// req is the caller's request, whose context Warden's reads and
	// writes of the owner table for the answer run on.
	req *http.Request
	// decision is the request's, which learns what its answer says.
	decision *proxy.Decision
	// created is the task a message that named none was first answered
	// about: the one task its answer may create.
	created string
	// contextID is the upstream context a message request is in: the one
	// it named, or the fresh one Warden put in it (fresh), recorded as the
	// caller's before it is forwarded. A task the answer creates must be in
	// it.
	contextID string
	// fresh is set when Warden generated contextID.
	fresh bool
	// sealed are the handles sealed for this exchange's answer.
	sealed idMap[string]
	// out, when not nil, is the buffer fromUpstream writes a rewritten
	// answer into (one read whole; an event's is its own).
	out []byte
}

// open returns the upstream id of one of the caller's handles, which it
// proves the caller's. ok is false for anything else.
func (x *exchange) open(kind a2a.Kind, v string) (string, bool) {
	id, err := x.s.handles.Unseal(byte(kind), x.principal, "", v)
	if err != nil {
		if x.idReason == "" {
			x.idReason = handle.Cause(err)
		}
		return v, false
	}
	if kind != a2a.KindCursor {
		x.prove(kind, id)
	}
	return id, true
}

// seal returns the caller's handle of an upstream id (a context the
// caller chose: the id it chose).
func (x *exchange) seal(kind a2a.Kind, id string) string {
	// An answer names its task and context in the task and in each of its
	// messages: each is sealed once.
	k := idKey{kind, id}
	if h, ok := x.sealed.get(k); ok {
		return h
	}
	h := x.s.sealFor(kind, x.principal, id)
	x.sealed.set(k, h)
	return h
}

// toUpstream opens every handle of the request, checks its webhook URLs and
// returns what to decide and the body to forward: the request as Parse read
// it (c.Request) with the upstream ids spliced in where it named handles.
func (x *exchange) toUpstream(c a2a.Call, raw []byte) (tenancy.Request, []byte) {
	req := tenancy.Request{Method: c.Method, Content: c.Content}
	owner, cursorOK := true, true
	p := c.Params
	openAt := func(obj *jsonrpc.Object, name string, kind a2a.Kind) string {
		v, _ := obj.Str(name)
		id, ok := x.open(kind, v)
		owner = owner && ok
		setStr(obj, name, v, id)
		return id
	}
	switch {
	case c.Method == a2a.MethodGetTask || c.Method == a2a.MethodCancelTask || c.Method == a2a.MethodSubscribe:
		req.TaskID = openAt(p, "id", a2a.KindTask)
	case a2a.PushMethod(c.Method):
		req.TaskID = openAt(p, "taskId", a2a.KindTask)
	case c.Method == a2a.MethodListTasks:
		if id, ok := x.s.chosen(x.principal, c.Context); ok && c.HasContext {
			p.SetStr("contextId", id)
		} else if c.HasContext {
			openAt(p, "contextId", a2a.KindContext)
		}
		if t := c.PageToken; t != "" {
			id, ok := x.open(a2a.KindCursor, t)
			setStr(p, "pageToken", t, id)
			cursorOK = ok
		}
	case a2a.Sends(c.Method):
		msg, _ := p.Obj("message") // Parse checked it
		if c.HasTask {
			req.TaskID = openAt(msg, "taskId", a2a.KindTask)
		}
		if c.HasContext {
			if id, ok := x.s.chosen(x.principal, c.Context); ok {
				// A context the client chose (A2A lets it): the server
				// gets one of the caller's own, proved by its derivation.
				x.contextID = id
				msg.SetStr("contextId", id)
				x.prove(a2a.KindContext, id)
			} else {
				x.contextID = openAt(msg, "contextId", a2a.KindContext)
			}
		} else if !c.HasTask {
			// A message naming no task and no context starts a context:
			// Warden names it, so that it is the caller's before any
			// answer names it (an answer to another caller cannot then
			// hand it over while this request is in flight).
			x.contextID, x.fresh = uuid.NewString(), true
			msg.SetStr("contextId", x.contextID)
		}
		if len(c.References) > 0 {
			refs := make([]string, len(c.References))
			for i, r := range c.References {
				id, ok := x.open(a2a.KindTask, r)
				owner = owner && ok
				refs[i] = id
			}
			b, _ := jsonrpc.Encode(refs) // strings always encode
			msg.SetRaw("referenceTaskIds", b)
		}
		if c.Continues() {
			req.Method = a2a.MethodMessageContinue
		}
	}
	// Every id the request names must be the caller's; a message naming
	// none starts something new.
	req.Owner = owner && (req.TaskID != "" || c.HasContext || len(c.References) > 0)
	req.New = owner && a2a.Sends(c.Method) && !c.Continues()
	req.IDReason = x.idReason
	if !owner && c.HasTask {
		req.IDReason = x.s.enforcer.IDReason(x.req.Context(), x.idReason, string(handle.ReasonRawID), ownerKey(a2a.KindTask, c.Task))
	}
	switch {
	case !a2a.TenantRefused(c).OK():
		req.Refused = a2a.TenantRefused(c)
	case !owner:
		req.Refused = rules.Verdict{Code: rules.CodeTaskNotFound, Reason: rules.ReasonUnknownTask, Detail: a2a.TaskNotFound}
	case !cursorOK:
		req.Refused = rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonUnknownTask, Detail: "Invalid parameters: pageToken is not one Warden gave"}
	default:
		req.Refused = a2a.WebhookRefused(c, x.s.allow)
	}
	body := x.upstreamBody(c, raw, &req) // may refuse req
	return req, body
}

// upstreamBody is the request the upstream gets: the caller's bytes with the
// opened ids spliced in, or, for webhooks the push relay rewrites or a member
// named twice, the body encoded from the params decoded. A body that cannot
// be made refuses req.
func (x *exchange) upstreamBody(c a2a.Call, raw []byte, req *tenancy.Request) []byte {
	if len(c.Webhooks) == 0 && jsonrpc.Unique(raw) {
		return spliceRequest(c)
	}
	// The body is encoded from the params decoded: webhooks the push relay
	// rewrites, or a member named twice in some object, which the upstream
	// may read as the other one than Warden did (encoding passes only the
	// one a decoder keeps, as Warden's policy input reads it).
	pm, err := decodeParams(c.Params)
	if len(c.Webhooks) > 0 && req.Refused.OK() && (err != nil || !x.relayed(c, pm, req.TaskID)) {
		req.Refused = rules.Verdict{Code: rules.CodeInternal, Reason: rules.ReasonWebhookRefused, Detail: "the push relay is not listening; retry later"}
	}
	env := map[string]any{"jsonrpc": "2.0", "id": c.ID, "method": c.Method}
	if pm != nil {
		env["params"] = pm
	}
	body, err := jsonrpc.Encode(env)
	if err != nil && req.Refused.OK() {
		req.Refused = rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: "the request could not be re-encoded"}
	}
	return body
}

// setStr makes obj's member name id where it held v (nothing changes when
// they are equal).
func setStr(obj *jsonrpc.Object, name, v, id string) {
	if id != v {
		obj.SetStr(name, id)
	}
}

// decodeParams decodes the params as toUpstream left them (nil when
// absent), keeping numbers as they were written.
func decodeParams(p *jsonrpc.Object) (map[string]any, error) {
	if p == nil {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(p.AppendTo(nil)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// envelope are the members of a request the upstream gets.
var envelope = []string{"jsonrpc", "id", "method", "params"}

// spliceRequest is the body toward the upstream: the caller's request as
// Parse read it, with the ids toUpstream opened spliced in where it put
// them (params' id, taskId, contextId, pageToken; the message's taskId,
// contextId and referenceTaskIds), an empty id Parse left out, and no
// member beside the envelope's. Every other byte passes as it came.
func spliceRequest(c a2a.Call) []byte {
	env := c.Request
	env.Keep(envelope...)
	if c.Params == nil {
		env.Del("params") // null
	}
	return env.AppendTo(make([]byte, 0, env.Size()+128))
}

// relayed points every webhook URL of the request (pm: its params,
// decoded) at the push relay (pushrelay): the server pushes to Warden,
// which delivers to the client's URL. False when the relay is not
// listening.
func (x *exchange) relayed(c a2a.Call, pm map[string]any, taskID string) bool {
	t := pushrelay.Target{Principal: x.principal, Task: taskID, Context: x.contextID, Grant: x.grant}
	if c.Method == a2a.MethodCreatePush {
		return x.s.relay.Rewrite(pm, t)
	}
	return x.s.relay.Rewrite(pm["configuration"], t)
}

// sealFor is the handle of an upstream id for a principal; a context the
// principal chose reads as the id it chose.
func (s *Server) sealFor(kind a2a.Kind, principal, id string) string {
	if kind == a2a.KindContext && strings.HasPrefix(id, chosenPrefix) {
		if v, ok := s.handles.Open(byte(a2a.KindChosen), principal, handle.Prefix+strings.TrimPrefix(id, chosenPrefix)); ok {
			return v
		}
	}
	return s.handles.Seal(byte(kind), principal, id)
}

// chosenPrefix marks the server's id of a context a client chose.
const chosenPrefix = "wc."

// chosen returns the server's id of a context id the client chose: any
// contextId that is not one of Warden's handles (a handle that does not
// open is no choice: it stays the caller's error). The id is derived from
// the principal and the choice with the handle key, so it is the caller's
// by construction: another principal choosing the same id gets another
// context, and nobody learns whether an id was taken.
func (s *Server) chosen(principal, v string) (string, bool) {
	if v == "" || strings.HasPrefix(v, handle.Prefix) {
		return "", false
	}
	return chosenPrefix + strings.TrimPrefix(s.handles.Seal(byte(a2a.KindChosen), principal, v), handle.Prefix), true
}

// forward sends the decided request upstream and relays the answer back
// through the exchange: a JSON answer read whole, an SSE stream event by
// event. A stream ends when the caller's credential expires.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, x *exchange, body []byte) {
	x.req = r
	watch := x.call.Method == a2a.MethodSubscribe // a standing stream
	take := s.streams.Take
	if watch {
		take = s.streams.TakeWatch
	}
	done, busy := take(x.principal)
	if busy != nil {
		relay.Busy(w, busy, x.call.ID)
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out, err := s.target.Request(ctx, http.MethodPost, nil)
	if err != nil {
		relay.WriteError(w, http.StatusBadGateway, x.call.ID, jsonrpc.ErrInternal, "could not build the upstream request")
		return
	}
	x.body.Set(out, body)
	relay.Outbound(out, r, x.strip, "Authorization")
	resp, err := s.send(out)
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("A2A upstream unavailable", "err", err)
			s.enforcer.UpstreamFailed("a2a")
		}
		relay.WriteError(w, http.StatusBadGateway, x.call.ID, jsonrpc.ErrInternal, "the A2A server is unavailable")
		return
	}
	defer resp.Body.Close()
	if relay.Compressed(w, resp, x.call.ID, "A2A server") {
		s.log.Warn("A2A answer compressed though asked for identity; the caller gets an error", "method", x.call.Method, "content_encoding", resp.Header.Get("Content-Encoding"))
		return
	}
	relay.CopyHeaders(w.Header(), resp.Header)
	mt := relay.MediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		defer relay.Bound(ctx, cancel, x.expiry, x.guard)()
		hold := s.streams.HoldIn(&x.hold)
		defer hold.Release()
		data := hold.Each(x.fromUpstream)
		if watch {
			idle := s.streams.Idle(cancel)
			defer idle.Stop()
			data = idle.Each(data)
		}
		err := relay.Stream(w, resp.StatusCode, hold.Reader(resp.Body), relay.Events{Data: data, ID: noEventID, Max: relay.EventMax(s.cfg.MaxResponseBytes), TooBig: x.tooBig, Readers: &s.sse})
		if errors.Is(err, listener.ErrAnswerBudget) {
			s.log.Warn("A2A event over the answer bytes in flight; the stream ends with an error", "method", x.call.Method, "principal", x.principal)
			relay.EndWithError(w, x.call.ID, jsonrpc.ErrInternal, s.streams.BudgetBusy().Msg)
			return
		}
		if err != nil && r.Context().Err() == nil && ctx.Err() == nil {
			s.log.Warn("A2A event stream ended early", "method", x.call.Method, "err", err)
		}
		return
	}
	hold := s.streams.HoldIn(&x.hold)
	defer hold.Release()
	in := s.bufs.Get()
	defer s.bufs.Put(in) // once written: what the answer is made of is copied out of it
	b, err := relay.ReadBodyTo(*in, hold.Reader(resp.Body), s.cfg.MaxResponseBytes)
	*in = b
	if err != nil {
		if errors.Is(err, listener.ErrAnswerBudget) {
			s.log.Warn("A2A answer over the answer bytes in flight; the caller gets an error", "method", x.call.Method, "principal", x.principal)
		}
		relay.Unread(w, x.call.ID, err, "A2A server", s.responseLimit())
		return
	}
	status := resp.StatusCode
	written := s.bufs.Get()
	x.out = *written
	defer func() { *written = x.out; s.bufs.Put(written) }()
	if len(bytes.TrimSpace(b)) > 0 && (mt == "application/json" || json.Valid(b)) {
		nb, keep := x.fromUpstream(b)
		if !keep {
			nb, status = jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, "the A2A server's answer could not be matched to the request"), http.StatusBadGateway
		}
		b = nb
	} else if status/100 == 2 {
		// Not JSON: nothing Warden could check passes.
		b, status = jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, "the A2A server's answer is not JSON"), http.StatusBadGateway
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// noEventID leaves SSE event ids out of A2A streams: A2A resumes a stream
// with SubscribeToTask, not Last-Event-ID, and a server's ids (a counter)
// would tell how many events Warden withheld.
func noEventID([]byte) ([]byte, bool) { return nil, false }

func (s *Server) responseLimit() string {
	return fmt.Sprintf("the A2A server's answer exceeds Warden's limit a2a.max_response_bytes (%d bytes)", s.cfg.MaxResponseBytes)
}

// tooBig answers for an SSE event over the bound: an error for the
// request, never a part of the event.
func (x *exchange) tooBig([]byte) []byte {
	x.s.log.Warn("A2A event over a2a.max_response_bytes; the caller gets an error", "method", x.call.Method, "principal", x.principal)
	return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, x.s.responseLimit())
}

// readState asks the upstream for a task's state (GetTask), with the
// caller's credentials unless strip says the upstream must not see them (as
// forward does).
//
// The answer (its artifacts may be large) is charged to the answer budget
// while it is read, as every answer Warden reads is (security.md X1).
//
// The read takes a place among the principal's requests while it runs
// (listener.Streams.Own, security.md X3).
func (s *Server) readState(ctx context.Context, r *http.Request, strip bool, principal, taskID string) (string, error) {
	held, busy := s.streams.Own(principal)
	if busy != nil {
		return "", busy
	}
	defer held.Release()
	b, err := s.own(ctx, r, strip, held, a2a.MethodGetTask, "warden-state", map[string]any{"id": taskID, "historyLength": 0})
	if err != nil {
		return "", err
	}
	return stateOf(b, taskID)
}

// jsonType is the one media type of an answer to Warden's own request.
var jsonType = []string{"application/json"}

// apply hands what an answer says (facts) to the request's decision, which
// learns it (what the answer created is the caller's), and returns the
// owner of each fact's id afterwards; an error means whose cannot be told.
func (x *exchange) apply(facts ...owners.Fact) ([]string, error) {
	if x.decision == nil {
		return x.s.tenancy.Observe(x.ctx(), facts...)
	}
	return x.decision.Learn(x.ctx(), facts...)
}

// ctx is the context of Warden's reads and writes of the owner table for
// this exchange: the caller's request's.
func (x *exchange) ctx() context.Context {
	if x.req == nil {
		return context.Background()
	}
	return x.req.Context()
}

// ownerKey is the owner table's key of an A2A task or context.
func ownerKey(kind a2a.Kind, id string) owners.Key {
	if kind == a2a.KindContext {
		return owners.Key{Kind: owners.A2AContext, ID: id}
	}
	return owners.Key{Kind: owners.A2ATask, ID: id}
}

// pushOwners is what the push relay reads of the owner table: whose the
// tasks and contexts a push names are.
type pushOwners struct{ e *proxy.Enforcer }

func (p pushOwners) A2AOwners(ctx context.Context, taskIDs []string) ([]string, error) {
	keys := make([]owners.Key, len(taskIDs))
	for i, id := range taskIDs {
		keys[i] = ownerKey(a2a.KindTask, id)
	}
	return p.e.Owners(ctx, "", keys...) // a push is no principal's use
}

func (p pushOwners) A2AContextOwner(ctx context.Context, contextID string) (string, error) {
	if contextID == "" {
		return "", nil
	}
	o, err := p.e.Owners(ctx, "", ownerKey(a2a.KindContext, contextID))
	if err != nil {
		return "", err
	}
	return o[0], nil
}

// guard watches the credential of a long-lived answer (an event stream):
// end is called when the credential is revoked (relay.Bound). A method, not
// a closure made for every request: only a stream needs it.
func (x *exchange) guard(ctx context.Context, end func()) (stop func()) {
	return x.s.enforcer.Watch(ctx, x.creds, x.who, proxy.DefaultCredentialCheck, end)
}

// ReadStatus reads the state of the task the request names from the
// upstream (tenancy.StatusReader).
func (x *exchange) ReadStatus(ctx context.Context) (string, error) {
	return x.s.readState(ctx, x.req, x.strip, x.principal, x.taskID)
}

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/jsonrpc"
	mcprules "github.com/agentwarden/warden/rules/mcp"
)

// target is the upstream URL for a request path: the upstream's endpoint
// when it names one (MCP has a single endpoint), the request's path otherwise.
func (s *Server) target(r *http.Request) string {
	u := *s.upstream
	if u.Path == "" || u.Path == "/" {
		u.Path, u.RawPath = r.URL.Path, r.URL.RawPath
	}
	u.RawQuery = r.URL.RawQuery
	return u.String()
}

// forward sends the request upstream (with body when not nil) and streams
// the answer back through the exchange. An event stream ends when the
// caller's credential expires.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, x *exchange, body []byte, name string) {
	defer x.settle(false) // no answer seen: nothing to commit
	done, busy := s.streams.Take(x.principal)
	if busy != nil {
		relay.Busy(w, busy, x.call.ID)
		return
	}
	defer done()
	var rd io.Reader = r.Body
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, s.target(r), rd)
	if err != nil {
		relay.WriteError(w, http.StatusBadGateway, x.call.ID, mcprules.ErrInternal, "could not build the upstream request")
		return
	}
	relay.Outbound(out, r, x.strip, credentialHeaders...)
	if body != nil {
		out.ContentLength = int64(len(body))
	} else {
		out.ContentLength = r.ContentLength
	}
	out.Header.Del("Mcp-Session-Id")
	if x.sid != "" {
		out.Header.Set("Mcp-Session-Id", x.sid)
	}
	out.Header.Del("Last-Event-ID")
	if x.lastEventID != "" {
		out.Header.Set("Last-Event-ID", x.lastEventID)
	}
	if name != "" {
		out.Header.Set("Mcp-Name", name)
	}
	resp, err := s.client.Do(out)
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("MCP upstream unavailable", "err", err)
			s.enforcer.UpstreamFailed("mcp")
		}
		relay.WriteError(w, http.StatusBadGateway, x.call.ID, mcprules.ErrInternal, "the MCP server is unavailable")
		return
	}
	defer resp.Body.Close()
	relay.CopyHeaders(w.Header(), resp.Header)
	if v := resp.Header.Get("Mcp-Session-Id"); v != "" {
		w.Header().Set("Mcp-Session-Id", x.seal(kindSession, v))
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		// The stream must not outlive the credential it was opened with,
		// nor its revocation.
		defer relay.Bound(ctx, cancel, x.expiry, x.guard)()
		hold := s.streams.Hold()
		defer hold.Release()
		err := relay.Stream(w, resp.StatusCode, hold.Reader(resp.Body), relay.Events{Data: hold.Each(x.fromUpstream), ID: x.eventID, Max: relay.EventMax(s.cfg.MaxResponseBytes), TooBig: x.tooBig})
		switch {
		case errors.Is(err, listener.ErrAnswerBudget):
			s.log.Warn("MCP event over the answer bytes in flight; the stream ends with an error", "method", x.call.Method, "principal", x.principal)
			relay.EndWithError(w, x.call.ID, mcprules.ErrInternal, s.streams.BudgetBusy().Msg)
		case err == nil || r.Context().Err() != nil:
		case ctx.Err() != nil:
			s.log.Info("MCP event stream closed: the credential expired", "principal", x.principal, "expiry", x.expiry)
		default:
			s.log.Warn("MCP event stream ended early", "method", x.call.Method, "err", err)
		}
	default:
		if mt != "application/json" && resp.StatusCode/100 != 2 {
			// An error page (text/plain, text/html): no JSON-RPC message.
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		// application/json, or a successful answer of another type that
		// holds JSON a client might still read: read whole and filtered.
		hold := s.streams.Hold()
		defer hold.Release()
		b, err := relay.ReadBody(hold.Reader(resp.Body), s.cfg.MaxResponseBytes)
		if err != nil {
			for k := range w.Header() {
				delete(w.Header(), k)
			}
			if errors.Is(err, listener.ErrAnswerBudget) {
				s.log.Warn("MCP answer over the answer bytes in flight; the caller gets an error", "method", x.call.Method, "principal", x.principal)
				relay.Busy(w, s.streams.BudgetBusy(), x.call.ID)
				return
			}
			msg, status := "the MCP server's answer could not be read whole", http.StatusBadGateway
			if errors.Is(err, relay.ErrBodyTooLarge) {
				// The server answered; its answer is replaced by an error
				// the client's SDK reads as the answer to its request.
				msg, status = s.responseLimit(), http.StatusOK
				s.log.Warn("MCP answer over mcp.max_response_bytes; the caller gets an error", "method", x.call.Method, "principal", x.principal,
					"limit", s.cfg.MaxResponseBytes)
			} else if r.Context().Err() == nil {
				s.log.Warn("MCP answer could not be read whole; the caller gets an error", "method", x.call.Method, "principal", x.principal, "err", err)
			}
			relay.WriteError(w, status, x.call.ID, mcprules.ErrInternal, msg)
			return
		}
		status := resp.StatusCode
		if len(bytes.TrimSpace(b)) > 0 && (mt == "application/json" || json.Valid(b)) {
			nb, keep := x.fromUpstream(b)
			if !keep {
				// Never passed unfiltered: an answer to no request of this
				// exchange, or about a task that is not the caller's.
				nb, status = mcprules.ErrorBody(x.call.ID, mcprules.ErrInternal, "the MCP server's answer could not be matched to the request"), http.StatusBadGateway
			}
			b = nb
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		_, _ = w.Write(b)
	}
}

// credentialHeaders are the headers a client's credential travels in.
var credentialHeaders = []string{"Authorization", "X-Macp-Token"}

// responseLimit is what a caller reads when an answer is over the bound.
func (s *Server) responseLimit() string {
	return fmt.Sprintf("the MCP server's answer exceeds Warden's limit mcp.max_response_bytes (%d bytes)", s.cfg.MaxResponseBytes)
}

// tooBig answers for an SSE event over mcp.max_response_bytes, given the
// part of it Warden held. Warden cannot check what it did not read, so the
// event never passes: when it is the answer to this exchange's request (no
// method, and its id, when shown, is the request's), the caller gets a
// JSON-RPC error for that id naming the limit, and a later answer to the
// same id is dropped; anything else is dropped. Both are logged.
func (x *exchange) tooBig(prefix []byte) []byte {
	h := scanHead(prefix)
	log := x.s.log.With("method", x.call.Method, "principal", x.principal, "limit", x.s.cfg.MaxResponseBytes)
	answer := !h.hasMethod && !x.answered && x.call.Kind == mcprules.KindRequest
	if answer && h.id != nil {
		v, ok := idValue(h.id)
		answer = ok && sameID(v, x.call.ID)
	}
	if !answer {
		log.Warn("MCP event over mcp.max_response_bytes dropped", "message_method", h.method)
		return nil
	}
	log.Warn("MCP answer over mcp.max_response_bytes; the caller gets an error")
	x.answered = true
	x.settle(false)
	return mcprules.ErrorBody(x.call.ID, mcprules.ErrInternal, x.s.responseLimit())
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

// call sends Warden's own request (tasks/get for a status, tools/list for
// taskSupport) upstream with the caller's credentials (none with strip, as
// forward sends none), session and protocol version, and returns the result.
func (s *Server) call(ctx context.Context, r *http.Request, strip bool, sid string, callerParams json.RawMessage, method string, params map[string]any) (map[string]any, error) {
	if meta := metaOf(callerParams); len(meta) > 0 {
		params["_meta"] = meta
	}
	id := "warden-" + strings.ReplaceAll(method, "/", "-")
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target(r), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	relay.Behalf(out.Header, r.Header, strip, []string{"Authorization", "X-Macp-Token", "Mcp-Protocol-Version"}, credentialHeaders...)
	out.Header.Set("Content-Type", "application/json")
	out.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		out.Header.Set("Mcp-Session-Id", sid)
	}
	if r.Header.Get("Mcp-Protocol-Version") >= mcprules.Era2026 {
		out.Header.Set("Mcp-Method", method)
		if t, ok := params["taskId"].(string); ok {
			out.Header.Set("Mcp-Name", t)
		}
	}
	resp, err := s.client.Do(out)
	if err != nil {
		return nil, fmt.Errorf("%s upstream: %w", method, err)
	}
	defer resp.Body.Close()
	var found map[string]any
	pick := func(data []byte) ([]byte, bool) {
		var m map[string]any
		if json.Unmarshal(data, &m) == nil && m["id"] == id {
			found = m
		}
		return data, true
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		err = relay.CopyEvents(io.Discard, func() {}, resp.Body, relay.Events{Data: pick, Max: relay.EventMax(s.cfg.MaxResponseBytes)})
	} else {
		var b []byte
		if b, err = relay.ReadBody(resp.Body, s.cfg.MaxResponseBytes); err == nil {
			pick(b)
		}
	}
	if found == nil {
		if err == nil {
			err = errors.New("no answer")
		}
		return nil, fmt.Errorf("%s upstream (HTTP %d): %w", method, resp.StatusCode, err)
	}
	res, _ := found["result"].(map[string]any)
	return res, nil // a JSON-RPC error gives a nil result
}

// metaOf returns a request's params._meta, which carries the 2026-07-28
// protocol version and client capabilities Warden's own requests repeat.
func metaOf(params json.RawMessage) json.RawMessage {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Meta
}

// readStatus asks the upstream for a task's status and lastUpdatedAt
// (tasks/get).
func (s *Server) readStatus(ctx context.Context, r *http.Request, strip bool, sid string, callerParams json.RawMessage, id string) (proxy.TaskView, error) {
	res, err := s.call(ctx, r, strip, sid, callerParams, mcprules.MethodGet, map[string]any{"taskId": id})
	if err != nil {
		return proxy.TaskView{}, err
	}
	var v proxy.TaskView
	v.Status, _ = res["status"].(string)
	v.Updated, _ = res["lastUpdatedAt"].(string)
	return v, nil
}

// toolKey names a tool as one principal sees it in one upstream session: a
// server may list other tools, or the same tool with another taskSupport,
// to another session or caller.
type toolKey struct{ principal, sid, name string }

// errUnlisted says the server's complete tools/list does not name a tool.
var errUnlisted = errors.New("the tool is not in the server's tools/list")

// maxToolPages bounds the tools/list pages Warden reads for one tool.
const maxToolPages = 10

// taskSupport returns a tool's execution.taskSupport in the caller's
// session, learned from tools/list answers or, for a tool not seen yet, read
// with tools/list. An error means it could not be learned: errUnlisted, or
// the list could not be read whole.
func (s *Server) taskSupport(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, tool string) (string, error) {
	if tool == "" {
		return "", nil // no tool: the server answers invalid params
	}
	if v, ok := s.tools.Get(toolKey{principal, sid, tool}); ok {
		return v, nil
	}
	cursor := ""
	for range maxToolPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := s.call(ctx, r, strip, sid, callerParams, mcprules.MethodToolsList, params)
		if err == nil && res == nil {
			err = errors.New("an error answer")
		}
		if err != nil {
			return "", fmt.Errorf("tools/list for taskSupport: %w", err)
		}
		if v, found := s.learnTools(principal, sid, res, tool); found {
			return v, nil
		}
		if cursor, _ = res["nextCursor"].(string); cursor == "" {
			return "", errUnlisted
		}
	}
	return "", fmt.Errorf("tools/list for taskSupport: more than %d pages", maxToolPages)
}

// forgetTools forgets the taskSupport learned for a principal's session,
// whose server said its tool list changed: it is read again when needed.
func (s *Server) forgetTools(principal, sid string) {
	for _, k := range s.tools.Keys() {
		if k.principal == principal && k.sid == sid {
			s.tools.Remove(k)
		}
	}
}

// learnTools records execution.taskSupport of every listed tool (absent
// means forbidden) for the principal's session, and returns want's.
func (s *Server) learnTools(principal, sid string, result map[string]any, want string) (support string, found bool) {
	tools, _ := result["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" {
			continue
		}
		v := mcprules.SupportForbidden
		if ex, ok := m["execution"].(map[string]any); ok {
			if ts, ok := ex["taskSupport"].(string); ok && ts != "" {
				v = ts
			}
		}
		s.tools.Add(toolKey{principal, sid, name}, v)
		if name == want {
			support, found = v, true
		}
	}
	return support, found
}

// exchange is one request and its answer, seen by one principal in one
// upstream session (sid, "" without sessions).
type exchange struct {
	s         *Server
	principal string
	sid       string
	expiry    time.Time // the credential's; zero if it never expires
	// strip removes the client's credential headers toward the upstream:
	// the principal was authenticated by something the upstream cannot
	// check (a client certificate).
	strip bool
	// guard, when set, watches the credential of a long-lived answer (an
	// event stream): its context ends when the credential is revoked.
	guard func(context.Context) (context.Context, func())
	// lastEventID is the upstream event id the caller resumes from;
	// resumed is set when call is the request whose stream that resumes
	// (resume.go), not one of this exchange.
	lastEventID string
	resumed     bool
	call        mcprules.Call
	decision    *proxy.Decision
	settled     bool
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

// refusal is why toUpstream refused a message.
type refusal uint8

const (
	refuseNone   refusal = iota
	refuseTask           // a place for a task handle holds anything but the caller's: "Task not found"
	refuseCursor         // a tasks/list cursor that is not the caller's
)

// toUpstream checks every place of a request where a handle belongs and
// replaces the caller's handles with the upstream IDs. The places are read
// by Parse after JSON decoding (so "wt2\u002e..." is a handle like any
// other): params.taskId, the related-task _meta (params, or result of a
// client's answer), tasks/list's params.cursor and subscriptions/listen's
// params.notifications.taskIds; each must hold a valid handle of the
// caller (params.taskId in a request), anything else (a raw upstream ID,
// another principal's handle) is refused. Nothing else is rewritten: a
// handle elsewhere (a tool's arguments) reaches the server as the opaque
// string it is, so a tool never learns a task's upstream ID to echo back.
// taskID is the upstream ID params.taskId names.
func (x *exchange) toUpstream(body []byte) (out []byte, taskID string, why refusal) {
	c := x.call
	h := x.s.handles
	strictTask := c.HasTaskID && c.Kind == mcprules.KindRequest
	if strictTask {
		id, ok := h.open(kindTask, x.principal, c.TaskID)
		if !ok {
			return body, "", refuseTask
		}
		taskID = id
	}
	if c.HasRelatedTask {
		if _, ok := h.open(kindTask, x.principal, c.RelatedTaskID); !ok {
			return body, "", refuseTask
		}
	}
	cursor := c.Kind == mcprules.KindRequest && c.Method == mcprules.MethodList && c.HasCursor
	if cursor {
		if _, ok := h.openIn(kindCursor, x.principal, x.sid, c.Cursor); !ok {
			return body, "", refuseCursor
		}
	}
	for _, t := range c.TaskIDs {
		if _, ok := h.open(kindTask, x.principal, t); !ok {
			return body, "", refuseTask
		}
	}
	if !c.HasTaskID && !c.HasRelatedTask && !cursor && !c.HasTaskIDs {
		return body, "", refuseNone
	}
	out, ok, done := x.toUpstreamFast(body, cursor)
	if !done {
		out, ok = x.toUpstreamDecoded(body, cursor)
	}
	if !ok {
		return body, "", refuseTask
	}
	return out, taskID, refuseNone
}

// toUpstreamDecoded is toUpstream's rewriting on the decoded message.
func (x *exchange) toUpstreamDecoded(body []byte, cursor bool) (out []byte, ok bool) {
	msg, err := decode(body)
	if err != nil {
		return body, false
	}
	p, _ := msg["params"].(map[string]any)
	ok = x.openTask(p)
	for _, k := range []string{"params", "result"} {
		obj, _ := msg[k].(map[string]any)
		meta, _ := obj["_meta"].(map[string]any)
		rel, _ := meta[mcprules.RelatedTask].(map[string]any)
		ok = ok && x.openTask(rel)
	}
	if !ok {
		return body, false
	}
	n, _ := p["notifications"].(map[string]any)
	ids, _ := n["taskIds"].([]any)
	for i, v := range ids {
		h, _ := v.(string)
		id, good := x.s.handles.open(kindTask, x.principal, h)
		if !good {
			return body, false
		}
		ids[i] = id
	}
	if c, isStr := p["cursor"].(string); isStr && cursor {
		id, good := x.s.handles.openIn(kindCursor, x.principal, x.sid, c)
		if !good {
			return body, false
		}
		p["cursor"] = id
	}
	return encode(msg), true
}

// openTask replaces the caller's handle in obj.taskId with the upstream ID;
// it is false when that member holds a handle that is not the caller's.
func (x *exchange) openTask(obj map[string]any) bool {
	h, isStr := obj["taskId"].(string)
	if !isStr || !strings.HasPrefix(h, handlePrefix) {
		return true
	}
	id, ok := x.s.handles.open(kindTask, x.principal, h)
	if ok {
		obj["taskId"] = id
	}
	return ok
}

// toUpstreamFast is toUpstream's rewriting without decoding, for requests
// whose places of handles are params.taskId and params.cursor: the handles'
// bytes are replaced in place. done is false when the body needs the
// decoding path (a related-task _meta, members of the same name elsewhere
// at that depth, an escape in a key or a handle, an upstream ID that would
// need escaping).
func (x *exchange) toUpstreamFast(body []byte, cursor bool) (out []byte, ok, done bool) {
	if x.call.HasRelatedTask || x.call.HasTaskIDs {
		return nil, false, false
	}
	spans, readable := scanStrings(body, "taskId", "cursor")
	if !readable {
		return nil, false, false
	}
	tasks, cursors := 0, 0
	for _, s := range spans {
		switch {
		case s.depth == 1 && (s.key == "result" || s.key == "error"):
			return nil, false, false // an answer: its object at depth 2 is not params
		case s.depth == 2 && s.key == "taskId":
			tasks++
		case s.depth == 2 && s.key == "cursor":
			cursors++
		}
	}
	if tasks > 1 || cursors > 1 {
		return nil, false, false // which one is params' cannot be told here
	}
	var rep []span
	var with []string
	for _, s := range spans {
		if s.depth != 2 {
			continue
		}
		h := string(body[s.start:s.end])
		var id string
		switch {
		case s.key == "taskId" && x.call.HasTaskID && strings.HasPrefix(h, handlePrefix):
			var good bool
			if id, good = x.s.handles.open(kindTask, x.principal, h); !good {
				return body, false, true
			}
		case s.key == "cursor" && cursor: // params.cursor
			var good bool
			if id, good = x.s.handles.openIn(kindCursor, x.principal, x.sid, h); !good {
				return body, false, true
			}
		default:
			continue
		}
		if !plainString(id) {
			return nil, false, false
		}
		rep, with = append(rep, s), append(with, id)
	}
	return splice(body, rep, with), true, true
}

// plainString reports whether s can sit between JSON quotes unescaped.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// fromUpstreamFast is fromUpstream without decoding, for the messages that
// need no restructuring (everything but the answers to tools/list,
// tools/call and tasks/list) and name only the caller's tasks. done is false
// when the decoding path must run.
func (x *exchange) fromUpstreamFast(data []byte) (out []byte, keep, done bool) {
	if !json.Valid(data) || bytes.Contains(data, []byte(`"taskIds"`)) {
		return nil, false, false // taskIds (a listen acknowledgement) is an array
	}
	spans, readable := scanStrings(data, "taskId", "status")
	if !readable {
		return nil, false, false
	}
	var id, method []byte
	var result span
	hasResult, hasError, hasMethod := false, false, false
	for _, s := range spans {
		if s.depth != 1 {
			continue
		}
		switch s.key {
		case "id":
			id = nil
			if s.end > s.start {
				id = data[s.start:s.end]
			}
		case "result":
			hasResult = true
			result = s
		case "error":
			hasError = true
		case "method":
			hasMethod = s.end > s.start+2 && data[s.start] == '"' // a non-empty string
			if hasMethod {
				method = data[s.start+1 : s.end-1]
				if bytes.IndexByte(method, '\\') >= 0 {
					return nil, false, false // the decoding path reads it as the client does
				}
			}
		}
	}
	if !hasMethod && (hasResult || hasError) {
		v, ok := idValue(id)
		if !ok || !x.answers(v) {
			return nil, false, true // an answer to no request of this exchange
		}
		if hasResult && learns(x.call.Method) && (x.call.Method != mcprules.MethodToolsCall || hasKey(spans, "taskId")) {
			return nil, false, false
		}
		x.settle(hasResult)
	}
	if hasMethod && string(method) == mcprules.NotifyToolsChanged {
		x.s.forgetTools(x.principal, x.sid)
	}
	// Statuses are read only where the server states them (observe): at
	// depth 2, in the answer's result or the notification's params.
	source := hasMethod && statusNotice(string(method)) || !hasMethod && hasResult && !hasError && statusAnswer(x.call.Method)
	statusOf := func(obj int) (string, bool) {
		for _, s := range spans {
			if s.key == "status" && s.obj == obj && s.depth == 2 {
				return string(data[s.start:s.end]), true
			}
		}
		return "", false
	}
	var at []span
	var facts []owners.Fact
	for _, s := range spans {
		if s.key != "taskId" {
			continue
		}
		tid := string(data[s.start:s.end])
		if x.ownHandle(tid) {
			continue
		}
		f := owners.Fact{Key: taskKey(tid)}
		if st, ok := statusOf(s.obj); ok && source && s.depth == 2 && (hasMethod || tid == x.taskID && s.start > result.start && s.end < jsonrpc.ValueEnd(data, result.start)) {
			f.Status = st
		}
		at, facts = append(at, s), append(facts, f)
	}
	if len(at) == 0 {
		return data, true, true
	}
	got, err := x.apply(facts...)
	if err != nil {
		return nil, false, false // the decoding path answers for it
	}
	with := make([]string, len(at))
	for i := range at {
		if got[i] != x.principal {
			return nil, false, false // not the caller's, or new: the decoding path decides
		}
		with[i] = x.seal(kindTask, facts[i].Key.ID)
	}
	return splice(data, at, with), true, true
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
	return x.s.enforcer.Observe(x.ctx(), facts...)
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
	return x.call.Kind == mcprules.KindRequest && !x.answered && sameID(id, x.call.ID)
}

// ownHandle reports whether an upstream value is already one of the
// caller's task handles (an upstream echoing one back).
func (x *exchange) ownHandle(v string) bool {
	if !strings.HasPrefix(v, handlePrefix) {
		return false
	}
	_, ok := x.s.handles.open(kindTask, x.principal, v)
	return ok
}

// creates reports whether the exchange is the caller's own tools/call, whose
// stream names the task the call made.
func (x *exchange) creates() bool {
	return x.call.Kind == mcprules.KindRequest && x.call.Method == mcprules.MethodToolsCall && !x.answered
}

// related returns the facts of a message on the stream of the caller's
// tools/call that relates itself to a task (the related-task _meta of the
// answer's result, or of a notification or request's params): the server
// ran the call as that task, so it is the caller's unless another's
// already. Bare status notifications say no such thing, as a server that
// broadcasts them would give the caller someone else's task.
func (x *exchange) related(msg map[string]any) []owners.Fact {
	var facts []owners.Fact
	for _, k := range []string{"result", "params"} {
		obj, _ := msg[k].(map[string]any)
		meta, _ := obj["_meta"].(map[string]any)
		rel, _ := meta[mcprules.RelatedTask].(map[string]any)
		id, _ := rel["taskId"].(string)
		if id == "" || strings.HasPrefix(id, handlePrefix) {
			continue
		}
		facts = append(facts, owners.Fact{Key: taskKey(id), Created: true})
	}
	return facts
}

// learns reports whether the answer to method is read whole (learn).
func learns(method string) bool {
	return method == mcprules.MethodToolsList || method == mcprules.MethodToolsCall || method == mcprules.MethodList
}

// fromUpstream reads one message from the upstream toward the caller. It
// fails closed:
//   - an answer (result or error) that does not answer this exchange's
//     request is dropped: Warden cannot know what it answers, so it cannot
//     filter it (on the standalone GET stream every answer is such);
//   - data that is JSON but not one object (a batch) is dropped, data that
//     is not JSON at all passes only when empty (an SSE priming event);
//   - a message naming a task that is not the caller's is dropped, and the
//     answer to the caller's request is replaced with a JSON-RPC error.
//
// Otherwise it settles the pending decision on the answer, learns tools,
// created tasks and statuses, keeps only the caller's tasks in tasks/list
// (sealing its nextCursor), and replaces task IDs with the caller's handles.
// keep is false when the message must not reach the caller.
func (x *exchange) fromUpstream(data []byte) ([]byte, bool) {
	out, keep, done := x.fromUpstreamFast(data)
	if !done {
		out, keep = x.fromUpstreamDecoded(data)
	}
	if x.dry {
		// Learned from, passed as the server sent it; what would have been
		// held back is logged.
		if !keep || x.replaced {
			x.s.log.Info("refused", "dry_run", true, "protocol", "mcp", "principal", x.principal, "message_type", x.call.Method,
				"reason", "answer_not_matched_or_foreign_task", "detail", "an upstream message would have been withheld from the caller")
		}
		return data, true
	}
	return out, keep
}

// foreignAnswer replaces the answer to the caller's request when it names
// a task that is not the caller's.
func (x *exchange) foreignAnswer() []byte {
	return mcprules.ErrorBody(x.call.ID, mcprules.ErrInternal, "the MCP server's answer named a task that is not the caller's")
}

// fromUpstreamDecoded is fromUpstream on the decoded message.
func (x *exchange) fromUpstreamDecoded(data []byte) ([]byte, bool) {
	if !json.Valid(data) {
		return data, len(bytes.TrimSpace(data)) == 0
	}
	msg, err := decode(data)
	if err != nil {
		return nil, false // JSON, but not one JSON-RPC object
	}
	_, isResult := msg["result"]
	_, isError := msg["error"]
	method, _ := msg["method"].(string)
	if method == mcprules.NotifyToolsChanged {
		x.s.forgetTools(x.principal, x.sid)
	}
	var facts []owners.Fact
	if x.creates() && !isError && (!isResult || method == "" && x.answers(msg["id"])) {
		facts = x.related(msg)
	}
	changed, answer := false, false
	if method == "" && (isResult || isError) {
		if !x.answers(msg["id"]) {
			return nil, false
		}
		answer = true
		x.settle(isResult)
		if res, ok := msg["result"].(map[string]any); ok {
			var err error
			if changed, err = x.learn(res); err != nil {
				return x.unreadable(err), true
			}
		}
	}
	if len(facts) == 0 && !changed && !bytes.Contains(data, []byte(`"taskId"`)) && !bytes.Contains(data, []byte(`"taskIds"`)) && bytes.IndexByte(data, '\\') < 0 {
		return data, true
	}
	if answer || method != "" {
		if f, ok := x.observed(msg, method); ok {
			facts = append(facts, f)
		}
	}
	// Whose every task the message names is, in one look-up.
	walk(msg, func(obj map[string]any) {
		if id, ok := obj["taskId"].(string); ok && !x.ownHandle(id) {
			facts = append(facts, owners.Fact{Key: taskKey(id)})
		}
		ids, _ := obj["taskIds"].([]any) // a listen acknowledgement
		for _, v := range ids {
			if id, ok := v.(string); ok && !x.ownHandle(id) {
				facts = append(facts, owners.Fact{Key: taskKey(id)})
			}
		}
	})
	got, err := x.apply(facts...)
	if err != nil {
		if answer {
			return x.unreadable(err), true
		}
		x.s.log.Warn("could not tell whose the tasks of an MCP message are; it is dropped", "principal", x.principal, "err", err)
		return nil, false
	}
	owner := make(map[string]string, len(facts))
	for i, f := range facts {
		owner[f.Key.ID] = got[i]
	}
	foreign := false
	// mine replaces a task ID with the caller's handle; it is false for a
	// task that is someone else's or unknown: not for this caller.
	mine := func(id string) (string, bool) {
		if x.ownHandle(id) {
			return id, true
		}
		if owner[id] == x.principal {
			changed = true
			return x.seal(kindTask, id), true
		}
		return id, false
	}
	walk(msg, func(obj map[string]any) {
		if id, ok := obj["taskId"].(string); ok {
			h, ok := mine(id)
			obj["taskId"], foreign = h, foreign || !ok
		}
		ids, _ := obj["taskIds"].([]any) // a listen acknowledgement
		for i, v := range ids {
			if id, ok := v.(string); ok {
				h, ok := mine(id)
				ids[i], foreign = h, foreign || !ok
			}
		}
	})
	switch {
	case foreign && answer:
		x.replaced = true
		return x.foreignAnswer(), true
	case foreign:
		return nil, false
	case !changed:
		return data, true
	}
	return encode(msg), true
}

// unreadable replaces the answer to the caller's request when whose its
// tasks are cannot be told (the shared store is unreachable): nothing of it
// passes.
func (x *exchange) unreadable(err error) []byte {
	x.s.log.Warn("could not filter an MCP answer; replacing it with an error", "method", x.call.Method, "principal", x.principal, "err", err)
	x.replaced = true
	return mcprules.ErrorBody(x.call.ID, mcprules.ErrInternal, unavailable)
}

// observed returns the status of a task where the server states it: the
// params of a task status notification, or the result answering the
// caller's tasks/get (or cancel, pause, resume) about the task it named.
// A taskId and status anywhere else (a tool's output, which may echo what
// the caller sent) say nothing about a task. tasks/list items are read by
// learn, created tasks by learn and related.
func (x *exchange) observed(msg map[string]any, method string) (owners.Fact, bool) {
	var obj map[string]any
	switch {
	case statusNotice(method):
		obj, _ = msg["params"].(map[string]any)
	case method == "" && statusAnswer(x.call.Method):
		obj, _ = msg["result"].(map[string]any)
		if id, _ := obj["taskId"].(string); id != x.taskID {
			return owners.Fact{}, false
		}
	}
	id, _ := obj["taskId"].(string)
	st, _ := obj["status"].(string)
	if id == "" || st == "" || strings.HasPrefix(id, handlePrefix) {
		return owners.Fact{}, false
	}
	return owners.Fact{Key: taskKey(id), Status: st}, true
}

// statusNotice reports whether notifications of method state a task's
// status in their params (2025-11-25 and SEP-2669; the 2026-07-28
// extension).
func statusNotice(method string) bool {
	return method == mcprules.NotifyStatus || method == mcprules.NotifyTasks
}

// statusAnswer reports whether the result answering method is the task its
// params.taskId named, with its status.
func statusAnswer(method string) bool {
	switch method {
	case mcprules.MethodGet, mcprules.MethodCancel, mcprules.MethodPause, mcprules.MethodResume:
		return true
	}
	return false
}

// learn reads the result answering the caller's request; it reports whether
// it changed the result. An error means the owners of the listed tasks could
// not be read (the shared state is unreachable).
func (x *exchange) learn(res map[string]any) (bool, error) {
	switch x.call.Method {
	case mcprules.MethodToolsList:
		x.s.learnTools(x.principal, x.sid, res, "")
	case mcprules.MethodToolsCall:
		task, _ := res["task"].(map[string]any) // 2025-11-25: {task: Task}
		if task == nil && res["resultType"] == "task" {
			task = res // 2026-07-28: a flat CreateTaskResult
		}
		if id, ok := task["taskId"].(string); ok && id != "" {
			// The answer to the caller's own call: the task is the
			// caller's, unless known as another's already (the answer
			// then names a task that is not the caller's).
			st, _ := task["status"].(string)
			if _, err := x.apply(owners.Fact{Key: taskKey(id), Created: true, Status: st}); err != nil {
				return false, err
			}
		}
	case mcprules.MethodList:
		return true, x.listPage(res)
	}
	return false, nil
}

// maxListPages bounds the upstream pages one tasks/list answer reads.
const maxListPages = 16

// listPage makes the caller's page of tasks/list from the upstream's page
// in res: the caller's tasks only, and, while it holds fewer than the
// upstream's page (the server's page size) and the server has more, the
// caller's tasks of the next upstream pages, read with Warden's own
// tasks/list (at most maxListPages in all). Its nextCursor is the sealed
// cursor of the last upstream page read, absent when that was the last: a
// page shows no trace of the tasks left out (no empty page with a cursor
// while the server has any of the caller's tasks within the bound). An
// error means a page or the owners could not be read: nothing passes.
func (x *exchange) listPage(res map[string]any) error {
	list, _ := res["tasks"].([]any)
	kept, err := x.keepOwn(list)
	if err != nil {
		return err
	}
	cursor, _ := res["nextCursor"].(string)
	for pages := 1; !x.dry && x.req != nil && cursor != "" && len(kept) < max(len(list), 1) && pages < maxListPages; pages++ {
		next, err := x.s.call(x.req.Context(), x.req, x.strip, x.sid, x.call.Params, mcprules.MethodList, map[string]any{"cursor": cursor})
		if err == nil && next == nil {
			err = errors.New("an error answer")
		}
		if err != nil {
			return fmt.Errorf("tasks/list page: %w", err)
		}
		more, _ := next["tasks"].([]any)
		mine, err := x.keepOwn(more)
		if err != nil {
			return err
		}
		kept = append(kept, mine...)
		cursor, _ = next["nextCursor"].(string)
	}
	if _, listed := res["tasks"]; listed || len(kept) > 0 {
		res["tasks"] = kept
	}
	delete(res, "nextCursor")
	if cursor != "" {
		res["nextCursor"] = x.seal(kindCursor, cursor)
	}
	return nil
}

// keepOwn returns the caller's tasks of a tasks/list page, learning the
// statuses of the known ones. A task no answer to its owner's own request
// named (one a server made of a plain call, one whose answer Warden never
// read) is nobody's: its owner is never guessed.
func (x *exchange) keepOwn(list []any) ([]any, error) {
	facts := make([]owners.Fact, len(list))
	for i, t := range list {
		m, _ := t.(map[string]any)
		id, _ := m["taskId"].(string)
		st, _ := m["status"].(string)
		facts[i] = owners.Fact{Key: taskKey(id), Status: st}
	}
	got, err := x.apply(facts...)
	if err != nil {
		return nil, err
	}
	kept := make([]any, 0, len(list))
	for i, t := range list {
		if got[i] != "" && got[i] == x.principal {
			kept = append(kept, t)
		}
	}
	if x.dry && len(kept) < len(list) {
		x.s.log.Info("refused", "dry_run", true, "protocol", "mcp", "principal", x.principal, "message_type", x.call.Method,
			"reason", "not_owner", "detail", fmt.Sprintf("tasks/list would have shown %d of %d tasks", len(kept), len(list)))
	}
	return kept, nil
}

func decode(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

func encode(m map[string]any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // decoded JSON always encodes
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// walk calls fn on every object in v, depth first.
func walk(v any, fn func(map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		fn(t)
		for _, c := range t {
			walk(c, fn)
		}
	case []any:
		for _, c := range t {
			walk(c, fn)
		}
	}
}

// idValue decodes a raw JSON-RPC id (numbers kept as their literal).
func idValue(raw []byte) (any, bool) {
	if v, ok := plainID(raw); ok {
		return v, true
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// sameID compares a decoded id with the request's raw id.
func sameID(v any, raw json.RawMessage) bool { return jsonrpc.SameID(v, raw) }

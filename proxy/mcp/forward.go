package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentwarden/warden/proxy"
	mcprules "github.com/agentwarden/warden/rules/mcp"
)

// hopHeaders are not forwarded (RFC 9110 §7.6.1).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopHeaders[k] {
			continue
		}
		dst[k] = append(dst[k][:0:0], vs...)
	}
}

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
// the answer back through the exchange.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, x *exchange, body []byte, sid, name string) {
	defer x.settle(false) // no answer seen: nothing to commit
	var rd io.Reader = r.Body
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, s.target(r), rd)
	if err != nil {
		writeError(w, http.StatusBadGateway, x.call.ID, mcprules.ErrInternal, "could not build the upstream request")
		return
	}
	copyHeaders(out.Header, r.Header)
	out.Host = r.Host
	if body != nil {
		out.ContentLength = int64(len(body))
	} else {
		out.ContentLength = r.ContentLength
	}
	if sid != "" {
		out.Header.Set("Mcp-Session-Id", sid)
	}
	if name != "" {
		out.Header.Set("Mcp-Name", name)
	}
	resp, err := s.client.Do(out)
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("MCP upstream unavailable", "err", err)
		}
		writeError(w, http.StatusBadGateway, x.call.ID, mcprules.ErrInternal, "the MCP server is unavailable")
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	if v := resp.Header.Get("Mcp-Session-Id"); v != "" {
		w.Header().Set("Mcp-Session-Id", s.handles.seal(kindSession, x.principal, v))
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		w.WriteHeader(resp.StatusCode)
		flush := func() {}
		if f, ok := w.(http.Flusher); ok {
			flush = f.Flush
			flush()
		}
		if err := copyEvents(w, flush, resp.Body, int(s.cfg.MaxBodyBytes), x.fromUpstream); err != nil && r.Context().Err() == nil {
			s.log.Warn("MCP event stream ended early", "method", x.call.Method, "err", err)
		}
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes+1))
		if err != nil || int64(len(b)) > s.cfg.MaxBodyBytes {
			for k := range w.Header() {
				delete(w.Header(), k)
			}
			writeError(w, http.StatusBadGateway, x.call.ID, mcprules.ErrInternal, "the MCP server's answer could not be read whole")
			return
		}
		if len(bytes.TrimSpace(b)) > 0 {
			if nb, keep := x.fromUpstream(b); keep {
				b = nb
			}
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	default:
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}
}

// call sends Warden's own request (tasks/get for a status, tools/list for
// taskSupport) upstream with the caller's credentials, session and protocol
// version, and returns the result.
func (s *Server) call(ctx context.Context, r *http.Request, sid string, callerParams json.RawMessage, method string, params map[string]any) (map[string]any, error) {
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
	for _, k := range []string{"Authorization", "Mcp-Protocol-Version"} {
		if v := r.Header.Get(k); v != "" {
			out.Header.Set(k, v)
		}
	}
	out.Host = r.Host
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
		err = copyEvents(io.Discard, func() {}, resp.Body, int(s.cfg.MaxBodyBytes), pick)
	} else {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes))
		pick(b)
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

// readStatus asks the upstream for a task's status (tasks/get).
func (s *Server) readStatus(ctx context.Context, r *http.Request, sid string, callerParams json.RawMessage, id string) (string, error) {
	res, err := s.call(ctx, r, sid, callerParams, mcprules.MethodGet, map[string]any{"taskId": id})
	if err != nil {
		return "", err
	}
	st, _ := res["status"].(string)
	return st, nil
}

// taskSupport returns a tool's execution.taskSupport, learned from tools/list
// responses or, for a tool not seen yet, read with tools/list.
func (s *Server) taskSupport(ctx context.Context, r *http.Request, sid string, callerParams json.RawMessage, tool string) string {
	if tool == "" {
		return ""
	}
	s.mu.Lock()
	v, ok := s.tools[tool]
	s.mu.Unlock()
	if ok {
		return v
	}
	cursor := ""
	for page := 0; page < 10; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := s.call(ctx, r, sid, callerParams, mcprules.MethodToolsList, params)
		if err != nil || res == nil {
			s.log.Debug("could not read tools/list for taskSupport", "tool", tool, "err", err)
			break
		}
		s.learnTools(res)
		cursor, _ = res["nextCursor"].(string)
		if cursor == "" {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools[tool]
}

// learnTools records execution.taskSupport of every listed tool (absent
// means forbidden).
func (s *Server) learnTools(result map[string]any) {
	tools, _ := result["tools"].([]any)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tools {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" {
			continue
		}
		support := mcprules.SupportForbidden
		if ex, ok := m["execution"].(map[string]any); ok {
			if v, ok := ex["taskSupport"].(string); ok && v != "" {
				support = v
			}
		}
		if _, known := s.tools[name]; !known && len(s.tools) >= maxTools {
			continue
		}
		s.tools[name] = support
	}
}

// exchange is one request and its answer, seen by one principal.
type exchange struct {
	s         *Server
	principal string
	call      mcprules.Call
	decision  *proxy.Decision
	settled   bool
}

func (x *exchange) settle(accepted bool) {
	if x.decision != nil && !x.settled {
		x.settled = true
		x.decision.Settle(accepted)
	}
}

// toUpstream replaces the caller's task handles in a request body with the
// upstream IDs. It returns the upstream ID params.taskId names, and ok false
// when some handle is not the caller's (the body is then not rewritten).
func (x *exchange) toUpstream(body []byte) (out []byte, taskID string, ok bool) {
	if !bytes.Contains(body, []byte(handlePrefix)) {
		return body, "", true
	}
	if out, taskID, ok, done := x.toUpstreamFast(body); done {
		return out, taskID, ok
	}
	return toUpstreamDecoded(x, body)
}

// toUpstreamDecoded is toUpstream on the decoded message.
func toUpstreamDecoded(x *exchange, body []byte) (out []byte, taskID string, ok bool) {
	msg, err := decode(body)
	if err != nil {
		return body, "", false
	}
	ok = true
	walk(msg, func(obj map[string]any) {
		h, isStr := obj["taskId"].(string)
		if !isStr || !strings.HasPrefix(h, handlePrefix) {
			return
		}
		id, good := x.s.handles.open(kindTask, x.principal, h)
		if !good {
			ok = false
			return
		}
		obj["taskId"] = id
	})
	if !ok {
		return body, "", false
	}
	if p, isObj := msg["params"].(map[string]any); isObj {
		taskID, _ = p["taskId"].(string)
		if taskID == x.call.TaskID {
			taskID = "" // not a handle: a raw upstream ID proves nothing
		}
	}
	return encode(msg), taskID, true
}

// toUpstreamFast is toUpstream without decoding: the handles' bytes are
// replaced in place. done is false when the body needs the decoding path.
func (x *exchange) toUpstreamFast(body []byte) (out []byte, taskID string, ok, done bool) {
	spans, readable := scanStrings(body, "taskId")
	if !readable {
		return nil, "", false, false
	}
	var rep []span
	var with []string
	for _, s := range spans {
		if s.key != "taskId" {
			continue
		}
		h := string(body[s.start:s.end])
		if !strings.HasPrefix(h, handlePrefix) {
			continue
		}
		id, good := x.s.handles.open(kindTask, x.principal, h)
		if !good {
			return body, "", false, true
		}
		if !plainString(id) {
			return nil, "", false, false
		}
		rep, with = append(rep, s), append(with, id)
		if h == x.call.TaskID {
			taskID = id // params.taskId, as Parse read it
		}
	}
	return splice(body, rep, with), taskID, true, true
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
// tools/call and tasks/list). done is false when the decoding path must run.
func (x *exchange) fromUpstreamFast(data []byte) (out []byte, keep, done bool) {
	if !json.Valid(data) {
		return nil, false, false
	}
	spans, readable := scanStrings(data, "taskId", "status")
	if !readable {
		return nil, false, false
	}
	var id []byte
	hasResult, hasError, hasMethod := false, false, false
	for _, s := range spans {
		if s.depth != 1 {
			continue
		}
		switch s.key {
		case "id":
			if s.end > s.start {
				id = data[s.start:s.end]
			}
		case "result":
			hasResult = true
		case "error":
			hasError = true
		case "method":
			hasMethod = s.end > s.start+2 && data[s.start] == '"' // a non-empty string
		}
	}
	if !hasMethod && (hasResult || hasError) && x.call.Kind == mcprules.KindRequest && id != nil {
		if v, ok := idValue(id); ok && sameID(v, x.call.ID) {
			if hasResult && learns(x.call.Method) {
				return nil, false, false
			}
			x.settle(hasResult)
		}
	}
	statusOf := func(obj int) (string, bool) {
		for _, s := range spans {
			if s.key == "status" && s.obj == obj && s.depth > 1 {
				return string(data[s.start:s.end]), true
			}
		}
		return "", false
	}
	var rep []span
	var with []string
	for _, s := range spans {
		if s.key != "taskId" || s.depth == 1 {
			continue
		}
		tid := string(data[s.start:s.end])
		if strings.HasPrefix(tid, handlePrefix) {
			continue
		}
		if st, ok := statusOf(s.obj); ok {
			x.s.enforcer.TaskObserved(tid, st)
		}
		owner, known := x.s.enforcer.TaskOwner(tid)
		switch {
		case known && owner == x.principal:
			rep, with = append(rep, s), append(with, x.s.handles.seal(kindTask, x.principal, tid))
		case hasMethod:
			return nil, false, true // someone else's (or an unknown) task: not for this caller
		}
	}
	if len(rep) == 0 {
		return data, true, true
	}
	return splice(data, rep, with), true, true
}

// learns reports whether the answer to method is read whole (learn).
func learns(method string) bool {
	return method == mcprules.MethodToolsList || method == mcprules.MethodToolsCall || method == mcprules.MethodList
}

// fromUpstream reads one message from the upstream: it settles the pending
// decision on the answer to the request, learns tools, created tasks and
// statuses, keeps only the caller's tasks in tasks/list, and replaces task
// IDs with the caller's handles. A notification or request about a task that
// is not the caller's is dropped.
func (x *exchange) fromUpstream(data []byte) ([]byte, bool) {
	if out, keep, done := x.fromUpstreamFast(data); done {
		return out, keep
	}
	return x.fromUpstreamDecoded(data)
}

// fromUpstreamDecoded is fromUpstream on the decoded message.
func (x *exchange) fromUpstreamDecoded(data []byte) ([]byte, bool) {
	msg, err := decode(data)
	if err != nil {
		return data, true // not JSON-RPC: passed unchanged
	}
	_, isResult := msg["result"]
	_, isError := msg["error"]
	method, _ := msg["method"].(string)
	changed := false
	if method == "" && (isResult || isError) && x.call.Kind == mcprules.KindRequest && sameID(msg["id"], x.call.ID) {
		x.settle(isResult)
		if res, ok := msg["result"].(map[string]any); ok {
			changed = x.learn(res)
		}
	}
	if !changed && !bytes.Contains(data, []byte(`"taskId"`)) {
		return data, true
	}
	keep := true
	walk(msg, func(obj map[string]any) {
		id, ok := obj["taskId"].(string)
		if !ok || strings.HasPrefix(id, handlePrefix) {
			return
		}
		if st, ok := obj["status"].(string); ok {
			x.s.enforcer.TaskObserved(id, st)
		}
		owner, known := x.s.enforcer.TaskOwner(id)
		switch {
		case known && owner == x.principal:
			obj["taskId"] = x.s.handles.seal(kindTask, x.principal, id)
			changed = true
		case method != "":
			keep = false // someone else's (or an unknown) task: not for this caller
		}
	})
	if !keep {
		return nil, false
	}
	if !changed {
		return data, true
	}
	return encode(msg), true
}

// learn reads the result answering the caller's request; it reports whether
// it changed the result.
func (x *exchange) learn(res map[string]any) bool {
	e := x.s.enforcer
	switch x.call.Method {
	case mcprules.MethodToolsList:
		x.s.learnTools(res)
	case mcprules.MethodToolsCall:
		task, _ := res["task"].(map[string]any) // 2025-11-25: {task: Task}
		if task == nil && res["resultType"] == "task" {
			task = res // 2026-07-28: a flat CreateTaskResult
		}
		if id, ok := task["taskId"].(string); ok && id != "" {
			st, _ := task["status"].(string)
			e.TaskCreated(id, x.principal, st)
		}
	case mcprules.MethodList:
		list, ok := res["tasks"].([]any)
		if !ok {
			return false
		}
		kept := make([]any, 0, len(list))
		for _, t := range list {
			m, _ := t.(map[string]any)
			id, _ := m["taskId"].(string)
			if owner, known := e.TaskOwner(id); known && owner == x.principal {
				kept = append(kept, t)
			}
		}
		res["tasks"] = kept
		return true
	}
	return false
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
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// sameID compares a decoded id with the request's raw id.
func sameID(v any, raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	want, ok := idValue(raw)
	if !ok {
		return false
	}
	// Strings compare by value (escapes differ between encoders), numbers
	// by their literal, as peers echo them.
	switch w := want.(type) {
	case string:
		got, ok := v.(string)
		return ok && got == w
	case json.Number:
		got, ok := v.(json.Number)
		return ok && got == w
	}
	return false
}

package main

// A fixture MCP server for protocol 2026-07-28 (stateless Streamable HTTP)
// implementing the Tasks extension (SEP-2663) plus the SEP-2669 draft
// interaction methods tasks/steer, tasks/pause and tasks/resume.
//
// Safe points: slow_compute reaches one after every step (including the last,
// just before it completes). There queued steer messages are delivered and a
// requested pause takes effect, so a tasks/pause answer for a running
// slow_compute normally still shows "working" (with a statusMessage saying the
// pause is pending); poll tasks/get to see "paused". The ask tool blocks on
// input, so pausing it is immediate and its inputRequests survive (they are
// also shown on the paused task). ask's only safe point is its completion.
//
// HTTP statuses: -32700/-32600/-32020/-32021/-32022 are sent with 400 (413
// for an oversized body), -32601 with 404, other JSON-RPC errors with 200.
// Every tasks/* method needs the extension in the request's per-request
// client capabilities (-32021 otherwise), as SEP-2663 requires for
// tasks/get|update|cancel.

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

const (
	protocolVersion = "2026-07-28"
	extTasks        = "io.modelcontextprotocol/tasks"
	metaVersion     = "io.modelcontextprotocol/protocolVersion"
	metaClientCaps  = "io.modelcontextprotocol/clientCapabilities"

	maxBodyBytes  = 1 << 20
	maxSteer      = 1000
	maxLogEntries = 100000
	ttlMs         = 60000
	pollMs        = 50

	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNoMethod       = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeHeaderMismatch = -32020
	codeMissingCap     = -32021
	codeBadVersion     = -32022

	stWorking   = "working"
	stInput     = "input_required"
	stCompleted = "completed"
	stFailed    = "failed"
	stCancelled = "cancelled"
	stPaused    = "paused"
)

// rpcError is a JSON-RPC error plus the HTTP status it is sent with.
type rpcError struct {
	status  int
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func errf(status, code int, format string, a ...any) *rpcError {
	return &rpcError{status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

func invalid(format string, a ...any) *rpcError {
	return errf(http.StatusOK, codeInvalidParams, format, a...)
}

func missingCap() *rpcError {
	e := errf(http.StatusBadRequest, codeMissingCap, "Missing required client capability")
	e.Data = map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}}
	return e
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type params struct {
	Name           string                     `json:"name"`
	Arguments      map[string]json.RawMessage `json:"arguments"`
	TaskID         string                     `json:"taskId"`
	Message        *string                    `json:"message"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	Meta           map[string]json.RawMessage `json:"_meta"`
	Cursor         string                     `json:"cursor"`
}

type logEntry struct {
	Method        string `json:"method"`
	TaskID        string `json:"taskId"`
	Authorization string `json:"authorization"`
	McpName       string `json:"mcpName"`
}

type task struct {
	id, tool      string
	status        string
	resumeTo      string // status to return to on tasks/resume
	statusMessage string
	created, upd  time.Time
	steps         int
	stepDur       time.Duration
	fail          bool
	pauseReq      bool     // pause requested, takes effect at the next safe point
	pending       []string // steer messages not yet delivered (FIFO)
	steered       []string // steer messages delivered at safe points
	inputRequests map[string]any
	answer        json.RawMessage // inputResponses.confirm for ask
	result        map[string]any
	errObj        map[string]any
	wake          chan struct{} // cap 1: resume happened
	done          chan struct{} // closed on cancel
	doneClosed    bool
}

// Server is the fixture. All task state is guarded by mu.
type Server struct {
	lax      bool
	maxTasks int
	// List serves tasks/list (see list); SEP-2663 has none, so it is off
	// unless asked for.
	List bool
	// ListPage pages tasks/list by this many tasks (0: one page); the
	// cursor is the offset of the next page.
	ListPage int

	mu     sync.Mutex
	tasks  map[string]*task
	log    []logEntry
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func NewServer(lax bool) *Server {
	return &Server{lax: lax, maxTasks: 10000, tasks: map[string]*task{}, stop: make(chan struct{})}
}

// Close stops all task goroutines and waits for them.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) Handler(path string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(path, s.serveMCP)
	mux.HandleFunc("GET /debug/requests", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, _ := json.Marshal(append([]logEntry{}, s.log...))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	mux.HandleFunc("POST /debug/reset", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = nil
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeRPC(w, false, nil, nil, errf(http.StatusRequestEntityTooLarge, codeInvalidRequest, "request body exceeds %d bytes", maxBodyBytes))
			return
		}
		writeRPC(w, false, nil, nil, errf(http.StatusBadRequest, codeInvalidRequest, "reading body: %v", err))
		return
	}
	if !json.Valid(body) {
		writeRPC(w, false, nil, nil, errf(http.StatusBadRequest, codeParse, "Parse error"))
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPC(w, false, nil, nil, errf(http.StatusBadRequest, codeInvalidRequest, "body must be one JSON-RPC request or notification (batches are not supported)"))
		return
	}
	id := req.ID
	if req.JSONRPC != "2.0" || req.Method == nil || (id != nil && !strings.ContainsAny(string(id[:1]), `"-0123456789`)) {
		writeRPC(w, false, nil, nil, errf(http.StatusBadRequest, codeInvalidRequest, "Invalid Request"))
		return
	}
	method := *req.Method
	var p params
	perr := error(nil)
	if len(req.Params) > 0 && string(req.Params) != "null" {
		perr = json.Unmarshal(req.Params, &p)
	}
	s.record(logEntry{Method: method, TaskID: p.TaskID, Authorization: r.Header.Get("Authorization"), McpName: r.Header.Get("Mcp-Name")})

	sse := method == "tools/call" && strings.Contains(strings.ToLower(strings.Join(r.Header.Values("Accept"), ",")), "text/event-stream")
	if e := s.checkHeaders(r, id == nil, method, &p, perr); e != nil {
		writeRPC(w, false, id, nil, e)
		return
	}
	if id == nil { // notification: accepted, nothing to do
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result, e := s.dispatch(method, &p)
	writeRPC(w, sse && (e == nil || e.status == http.StatusOK), id, result, e)
}

// checkHeaders applies the 2026-07-28 transport rules (version, Mcp-Method,
// Mcp-Name) and the params shape check, in that order.
func (s *Server) checkHeaders(r *http.Request, notification bool, method string, p *params, perr error) *rpcError {
	version := r.Header.Get("Mcp-Protocol-Version")
	if version == "" && !notification {
		return unsupported("missing MCP-Protocol-Version header")
	}
	if perr != nil {
		if notification {
			return errf(http.StatusBadRequest, codeInvalidParams, "invalid params: %v", perr)
		}
		return invalid("invalid params: %v", perr)
	}
	if version != "" {
		var bodyV string
		if raw, ok := p.Meta[metaVersion]; ok && json.Unmarshal(raw, &bodyV) == nil && bodyV != version {
			return errf(http.StatusBadRequest, codeHeaderMismatch, "Header mismatch: MCP-Protocol-Version header %q does not match _meta %s %q", version, metaVersion, bodyV)
		}
		if version != protocolVersion {
			return unsupported("unsupported protocol version %q", version)
		}
	}
	if mm := r.Header.Values("Mcp-Method"); len(mm) > 0 && mm[0] != method {
		return errf(http.StatusBadRequest, codeHeaderMismatch, "Header mismatch: Mcp-Method header %q does not match body method %q", mm[0], method)
	}
	if notification {
		return nil
	}
	if !knownMethod(method) && !(method == "tasks/list" && s.List) {
		return errf(http.StatusNotFound, codeNoMethod, "Method not found: %s", method)
	}
	names := r.Header.Values("Mcp-Name")
	var want string
	switch {
	case strings.HasPrefix(method, "tasks/") && method != "tasks/list":
		if p.TaskID == "" {
			return invalid("taskId is required")
		}
		if len(names) == 0 {
			return errf(http.StatusBadRequest, codeHeaderMismatch, "Header mismatch: Mcp-Name header is required for %s", method)
		}
		want = p.TaskID
	case method == "tools/call" && len(names) == 1:
		want = p.Name
	default:
		return nil
	}
	got, ok := decodeHeader(names[0])
	if !ok || got != want {
		return errf(http.StatusBadRequest, codeHeaderMismatch, "Header mismatch: Mcp-Name header %q does not match body value %q", names[0], want)
	}
	return nil
}

func unsupported(format string, a ...any) *rpcError {
	e := errf(http.StatusBadRequest, codeBadVersion, format, a...)
	e.Data = map[string]any{"supported": []string{protocolVersion}}
	return e
}

func knownMethod(m string) bool {
	switch m {
	case "server/discover", "ping", "tools/list", "tools/call",
		"tasks/get", "tasks/update", "tasks/cancel", "tasks/steer", "tasks/pause", "tasks/resume":
		return true
	}
	return false
}

func (s *Server) dispatch(method string, p *params) (any, *rpcError) {
	switch method {
	case "server/discover":
		return map[string]any{
			"resultType":        "complete",
			"supportedVersions": []string{protocolVersion},
			"capabilities": map[string]any{
				"tools":      map[string]any{},
				"extensions": map[string]any{extTasks: map[string]any{"steer": true, "pause": true}},
			},
			"_meta": map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "mcptasks", "version": "0.1.0"}},
		}, nil
	case "ping":
		return ack(), nil
	case "tools/list":
		// 2026-07-28 requires ttlMs and cacheScope on list results (CacheableResult).
		return map[string]any{"resultType": "complete", "tools": toolList, "ttlMs": 60000, "cacheScope": "private"}, nil
	case "tools/call":
		return s.toolsCall(p)
	case "tasks/list":
		return s.list(p.Cursor)
	}
	return s.taskMethod(method, p)
}

func ack() map[string]any { return map[string]any{"resultType": "complete"} }

func obj(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props}
}

var toolList = []any{
	map[string]any{"name": "greet", "description": "Returns hello, <name> synchronously.",
		"inputSchema": obj(map[string]any{"name": map[string]any{"type": "string"}})},
	map[string]any{"name": "slow_compute", "description": "Task tool: runs steps of step_ms each; steer and pause apply between steps.",
		"inputSchema": obj(map[string]any{
			"steps":   map[string]any{"type": "integer", "default": 5, "minimum": 1, "maximum": 1000},
			"step_ms": map[string]any{"type": "integer", "default": 50, "minimum": 0, "maximum": 10000},
			"fail":    map[string]any{"type": "boolean", "default": false},
		})},
	map[string]any{"name": "ask", "description": "Task tool: asks for confirmation via inputRequests, completes on tasks/update.",
		"inputSchema": obj(map[string]any{})},
}

var confirmRequest = map[string]any{
	"method": "elicitation/create",
	"params": map[string]any{
		"mode":            "form",
		"message":         "Confirm to continue?",
		"requestedSchema": obj(map[string]any{"confirm": map[string]any{"type": "boolean"}}),
	},
}

func hasTasksCap(meta map[string]json.RawMessage) bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(meta[metaClientCaps], &caps) != nil {
		return false
	}
	v, ok := caps.Extensions[extTasks]
	return ok && string(v) != "null"
}

func (s *Server) toolsCall(p *params) (any, *rpcError) {
	switch p.Name {
	case "greet":
		name := "world"
		if raw, ok := p.Arguments["name"]; ok && json.Unmarshal(raw, &name) != nil {
			return nil, invalid("greet: name must be a string")
		}
		return map[string]any{"resultType": "complete", "content": []any{text("hello, " + name)}}, nil
	case "slow_compute", "ask":
		if !hasTasksCap(p.Meta) {
			return nil, missingCap()
		}
		t := &task{tool: p.Name}
		if p.Name == "slow_compute" {
			steps, e := intArg(p.Arguments, "steps", 5, 1, 1000)
			if e != nil {
				return nil, e
			}
			ms, e := intArg(p.Arguments, "step_ms", 50, 0, 10000)
			if e != nil {
				return nil, e
			}
			if raw, ok := p.Arguments["fail"]; ok && json.Unmarshal(raw, &t.fail) != nil {
				return nil, invalid("slow_compute: fail must be a boolean")
			}
			t.steps, t.stepDur = steps, time.Duration(ms)*time.Millisecond
		}
		return s.createTask(t)
	}
	return nil, invalid("Unknown tool: %q", p.Name)
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func intArg(args map[string]json.RawMessage, key string, def, lo, hi int) (int, *rpcError) {
	raw, ok := args[key]
	if !ok || string(raw) == "null" {
		return def, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, invalid("%s must be an integer in [%d, %d]", key, lo, hi)
	}
	return int(f), nil
}

func (s *Server) createTask(t *task) (any, *rpcError) {
	var b [16]byte
	rand.Read(b[:]) // never fails (Go 1.24+)
	now := time.Now()
	t.id, t.status, t.created, t.upd = hex.EncodeToString(b[:]), stWorking, now, now
	t.wake, t.done = make(chan struct{}, 1), make(chan struct{})

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errf(http.StatusOK, codeInternal, "server is shutting down")
	}
	if len(s.tasks) >= s.maxTasks { // tasks are kept for the life of the process
		return nil, errf(http.StatusOK, codeInternal, "task limit reached (%d)", s.maxTasks)
	}
	s.tasks[t.id] = t // durable (for this process) before we answer
	s.wg.Add(1)
	if t.tool == "ask" {
		go s.runAsk(t)
	} else {
		go s.runCompute(t)
	}
	return s.view(t, "task"), nil
}

// runAsk moves the task to input_required (or straight to paused if a pause
// was requested while it was still working). tasks/update completes it.
func (s *Server) runAsk(t *task) {
	defer s.wg.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.status != stWorking {
		return
	}
	t.inputRequests = map[string]any{"confirm": confirmRequest}
	t.status, t.statusMessage = stInput, ""
	if t.pauseReq {
		t.pauseReq, t.resumeTo, t.status = false, stInput, stPaused
	}
	t.upd = time.Now()
}

func (s *Server) runCompute(t *task) {
	defer s.wg.Done()
	for i := 1; i <= t.steps; i++ {
		timer := time.NewTimer(t.stepDur)
		select {
		case <-timer.C:
		case <-t.done:
			timer.Stop()
			return
		case <-s.stop:
			timer.Stop()
			return
		}
		s.mu.Lock()
		if !s.safePoint(t) {
			s.mu.Unlock()
			return
		}
		if i < t.steps {
			t.statusMessage, t.upd = fmt.Sprintf("step %d of %d done", i, t.steps), time.Now()
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if terminal(t.status) {
		return
	}
	t.statusMessage, t.upd = "", time.Now()
	if t.fail {
		t.status = stFailed
		t.statusMessage = "slow_compute failed as requested"
		t.errObj = map[string]any{"code": codeInternal, "message": "slow_compute failed as requested"}
		return
	}
	t.status = stCompleted
	t.result = map[string]any{
		"content":           []any{text(fmt.Sprintf("computed %d steps", t.steps))},
		"structuredContent": map[string]any{"steps": t.steps, "steered": append([]string{}, t.steered...)},
	}
}

// safePoint runs with s.mu held. It applies a requested pause (blocking,
// with the lock released, until resume, cancel or shutdown) and delivers the
// queued steer messages. It reports whether the task should keep running.
func (s *Server) safePoint(t *task) bool {
	for {
		if terminal(t.status) {
			return false
		}
		if t.pauseReq && t.status == stWorking {
			t.pauseReq, t.resumeTo, t.status, t.statusMessage, t.upd = false, stWorking, stPaused, "", time.Now()
		}
		if t.status != stPaused {
			t.steered, t.pending = append(t.steered, t.pending...), nil
			return true
		}
		s.mu.Unlock()
		select {
		case <-t.wake:
		case <-t.done:
		case <-s.stop:
		}
		s.mu.Lock()
		select {
		case <-s.stop:
			return false
		default:
		}
	}
}

func terminal(st string) bool { return st == stCompleted || st == stFailed || st == stCancelled }

// view renders a DetailedTask (resultType "complete") or a CreateTaskResult
// (resultType "task"). Called with s.mu held.
func (s *Server) view(t *task, resultType string) map[string]any {
	m := map[string]any{
		"resultType": resultType, "taskId": t.id, "status": t.status,
		"createdAt": stamp(t.created), "lastUpdatedAt": stamp(t.upd),
		"ttlMs": ttlMs, "pollIntervalMs": pollMs,
	}
	if t.statusMessage != "" {
		m["statusMessage"] = t.statusMessage
	}
	if len(t.inputRequests) > 0 && (t.status == stInput || t.status == stPaused) {
		m["inputRequests"] = maps.Clone(t.inputRequests)
	}
	switch t.status {
	case stCompleted:
		m["result"] = t.result
	case stFailed:
		m["error"] = t.errObj
	}
	return m
}

// list answers tasks/list (as the 2025-11-25 tasks did; SEP-2663 has no
// list) with every task, oldest first, whoever created it, in one page: a
// server that leaves filtering to Warden.
func (s *Server) list(cursor string) (map[string]any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := make([]*task, 0, len(s.tasks))
	for _, t := range s.tasks {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *task) int { return cmp.Or(a.created.Compare(b.created), strings.Compare(a.id, b.id)) })
	from, to := 0, len(ts)
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || n > len(ts) {
			return nil, invalid("Invalid cursor")
		}
		from = n
	}
	if s.ListPage > 0 {
		to = min(from+s.ListPage, len(ts))
	}
	out := make([]any, 0, to-from)
	for _, t := range ts[from:to] {
		v := s.view(t, "complete")
		delete(v, "resultType")
		out = append(out, v)
	}
	res := map[string]any{"resultType": "complete", "tasks": out}
	if to < len(ts) {
		res["nextCursor"] = strconv.Itoa(to)
	}
	return res, nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func (s *Server) taskMethod(method string, p *params) (any, *rpcError) {
	if !hasTasksCap(p.Meta) {
		return nil, missingCap()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tasks[p.TaskID]
	if t == nil {
		return nil, invalid("Task not found")
	}
	strict := !s.lax
	switch method {
	case "tasks/get":
		return s.view(t, "complete"), nil

	case "tasks/update":
		if p.InputResponses == nil {
			return nil, invalid("inputResponses is required")
		}
		if strict && t.status == stPaused {
			return nil, invalid("Task is paused; resume it before tasks/update")
		}
		if terminal(t.status) {
			return ack(), nil // no outstanding keys: responses are ignored
		}
		for k, v := range p.InputResponses { // keys not outstanding are ignored
			if _, ok := t.inputRequests[k]; ok {
				delete(t.inputRequests, k)
				if k == "confirm" {
					t.answer = v
				}
			}
		}
		if t.tool == "ask" && t.answer != nil && len(t.inputRequests) == 0 {
			s.completeAsk(t)
		}
		return ack(), nil

	case "tasks/cancel":
		if terminal(t.status) {
			return nil, invalid("Task is already %s", t.status)
		}
		t.status, t.statusMessage, t.pauseReq, t.inputRequests, t.upd = stCancelled, "cancelled by tasks/cancel", false, nil, time.Now()
		if !t.doneClosed {
			t.doneClosed = true
			close(t.done)
		}
		return ack(), nil

	case "tasks/steer":
		if p.Message == nil {
			return nil, invalid("message is required")
		}
		if strict && terminal(t.status) {
			return nil, invalid("Task is %s; steer is refused on terminal tasks", t.status)
		}
		if len(t.pending)+len(t.steered) >= maxSteer {
			return nil, invalid("steer limit reached (%d messages per task)", maxSteer)
		}
		t.pending = append(t.pending, *p.Message)
		return ack(), nil

	case "tasks/pause":
		switch {
		case t.status == stInput: // blocked on input: pause is immediate
			t.resumeTo, t.status, t.statusMessage, t.upd = stInput, stPaused, "", time.Now()
		case t.status == stWorking: // takes effect at the next safe point
			t.pauseReq, t.statusMessage = true, "pause requested; takes effect at the next safe point"
		case strict:
			return nil, invalid("Task cannot be paused from status %s", t.status)
		case t.status != stPaused: // -lax: naively "pause" a terminal task
			t.resumeTo, t.status, t.upd = t.status, stPaused, time.Now()
		}
		return s.view(t, "complete"), nil

	case "tasks/resume":
		if t.status != stPaused {
			if strict {
				return nil, invalid("Task is not paused (status %s)", t.status)
			}
			t.pauseReq = false // -lax: acked, cancels a pending pause request
			return s.view(t, "complete"), nil
		}
		t.status, t.statusMessage, t.upd = t.resumeTo, "", time.Now()
		select {
		case t.wake <- struct{}{}:
		default:
		}
		return s.view(t, "complete"), nil
	}
	return nil, errf(http.StatusNotFound, codeNoMethod, "Method not found: %s", method)
}

// completeAsk finishes the ask task; it is its only safe point, so queued
// steer messages are delivered here. Called with s.mu held.
func (s *Server) completeAsk(t *task) {
	t.steered, t.pending = append(t.steered, t.pending...), nil
	var resp struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(t.answer, &resp)
	t.status, t.statusMessage, t.pauseReq, t.upd = stCompleted, "", false, time.Now()
	t.result = map[string]any{
		"content":           []any{text("confirm: " + resp.Action)},
		"structuredContent": map[string]any{"confirm": t.answer, "steered": append([]string{}, t.steered...)},
	}
}

func (s *Server) record(e logEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) >= maxLogEntries {
		s.log = slices.Delete(s.log, 0, len(s.log)-maxLogEntries+1)
	}
	s.log = append(s.log, e)
}

func writeRPC(w http.ResponseWriter, sse bool, id json.RawMessage, result any, e *rpcError) {
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}{"2.0", id, result, e}
	if id == nil {
		resp.ID = json.RawMessage("null")
	}
	b, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	status := http.StatusOK
	if e != nil {
		status = e.status
	}
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(status)
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		_ = http.NewResponseController(w).Flush()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// decodeHeader undoes the =?base64?...?= sentinel encoding and rejects
// values with characters outside visible ASCII, space and tab.
func decodeHeader(v string) (string, bool) {
	if len(v) >= 11 && strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") {
		b, err := base64.StdEncoding.DecodeString(v[9 : len(v)-2])
		if err != nil || !utf8.Valid(b) {
			return "", false
		}
		return string(b), true
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", false
		}
	}
	return v, true
}

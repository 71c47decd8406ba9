package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentwarden/warden/proxy/relay"
	a2arules "github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// fromUpstream checks one answer (a body or an SSE event's data) and
// rewrites it for the caller: it must be one JSON-RPC answer to this
// exchange's request; upstream ids become the caller's handles, ListTasks
// keeps the caller's tasks only, push configs lose their credentials. keep
// is false for anything else.
func (x *exchange) fromUpstream(data []byte) ([]byte, bool) {
	var env map[string]any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if d.Decode(&env) != nil || d.More() || env == nil {
		return nil, false
	}
	if !x.answers(env["id"]) {
		return nil, false
	}
	if _, isErr := env["error"]; isErr {
		return data, true // the upstream's refusal of the caller's own request
	}
	if isEmpty(env["result"]) {
		return data, true // nothing to rewrite (a deleted push config)
	}
	res, ok := env["result"].(map[string]any)
	if !ok {
		return nil, false
	}
	switch m := x.call.Method; {
	case a2arules.Sends(m) || m == a2arules.MethodSubscribe:
		x.streamResponse(res)
	case m == a2arules.MethodGetTask || m == a2arules.MethodCancelTask:
		x.task(res, true)
	case m == a2arules.MethodListTasks:
		if err := x.list(res); err != nil {
			// Whose tasks these are cannot be told: nothing of the page
			// passes.
			x.s.log.Warn("could not filter an A2A task list; replacing it with an error", "principal", x.principal, "err", err)
			return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, unavailable), true
		}
	case m == a2arules.MethodCreatePush || m == a2arules.MethodGetPush:
		x.pushConfig(res)
	case m == a2arules.MethodListPush:
		if cs, ok := res["configs"].([]any); ok {
			for _, c := range cs {
				if c, ok := c.(map[string]any); ok {
					x.pushConfig(c)
				}
			}
		}
	case m == a2arules.MethodExtendedCard:
		x.s.rewriteCard(res, x.public)
	}
	b, err := encode(env)
	if err != nil {
		return nil, false
	}
	return b, true
}

// answers reports whether a decoded answer id is the request's.
func (x *exchange) answers(id any) bool {
	var want any
	d := json.NewDecoder(bytes.NewReader(x.call.ID))
	d.UseNumber()
	if d.Decode(&want) != nil {
		return false
	}
	switch w := want.(type) {
	case string:
		got, ok := id.(string)
		return ok && got == w
	case json.Number:
		got, ok := id.(json.Number)
		return ok && got.String() == w.String()
	}
	return false
}

// streamResponse rewrites a SendMessage result or one StreamResponse: a
// task, a message, a status or an artifact update. Every task it names was
// created by, or (handles proven) belongs to, the caller.
func (x *exchange) streamResponse(res map[string]any) {
	if t, ok := res["task"].(map[string]any); ok {
		x.task(t, true)
	}
	if m, ok := res["message"].(map[string]any); ok {
		x.message(m, true)
	}
	for _, k := range []string{"statusUpdate", "artifactUpdate"} {
		if u, ok := res[k].(map[string]any); ok {
			taskID, _ := u["taskId"].(string)
			contextID, _ := u["contextId"].(string)
			state := ""
			if st, ok := u["status"].(map[string]any); ok {
				state, _ = st["state"].(string)
				if m, ok := st["message"].(map[string]any); ok {
					x.message(m, true)
				}
			}
			x.s.enforcer.A2ASeen(taskID, contextID, x.principal, state)
			x.sealAt(u, "taskId", a2arules.KindTask)
			x.sealAt(u, "contextId", a2arules.KindContext)
		}
	}
	if _, isTask := res["id"]; isTask {
		// A 0.3-style result: the task itself.
		x.task(res, true)
	}
}

// task rewrites a Task; learn records it as the caller's.
func (x *exchange) task(t map[string]any, learn bool) {
	id, _ := t["id"].(string)
	contextID, _ := t["contextId"].(string)
	if learn {
		x.s.enforcer.A2ASeen(id, contextID, x.principal, taskState(t))
	} else {
		x.s.enforcer.A2AObserved(id, taskState(t))
	}
	x.sealTask(t, learn)
}

// taskState is a Task's status.state, "" when it has none.
func taskState(t map[string]any) string {
	st, _ := t["status"].(map[string]any)
	s, _ := st["state"].(string)
	return s
}

// sealTask rewrites a Task's ids and its messages' (learn: recording the
// messages' tasks and contexts as the caller's).
func (x *exchange) sealTask(t map[string]any, learn bool) {
	if st, ok := t["status"].(map[string]any); ok {
		if m, ok := st["message"].(map[string]any); ok {
			x.message(m, learn)
		}
	}
	x.sealAt(t, "id", a2arules.KindTask)
	x.sealAt(t, "contextId", a2arules.KindContext)
	if h, ok := t["history"].([]any); ok {
		for _, m := range h {
			if m, ok := m.(map[string]any); ok {
				x.message(m, learn)
			}
		}
	}
}

// message rewrites a Message's task, context and referenced tasks.
func (x *exchange) message(m map[string]any, learn bool) {
	if learn {
		taskID, _ := m["taskId"].(string)
		contextID, _ := m["contextId"].(string)
		x.s.enforcer.A2ASeen(taskID, contextID, x.principal, "")
	}
	x.sealAt(m, "taskId", a2arules.KindTask)
	x.sealAt(m, "contextId", a2arules.KindContext)
	if refs, ok := m["referenceTaskIds"].([]any); ok {
		for i, r := range refs {
			if r, ok := r.(string); ok {
				refs[i] = x.seal(a2arules.KindTask, r)
			}
		}
	}
}

// list keeps the tasks of a ListTasks page that Warden knows to be the
// caller's (this replica, else the shared store; an unknown owner is
// nobody's), and seals the page token. An error means the owners could not
// be read (the shared store is unreachable): nothing of the page may pass.
func (x *exchange) list(res map[string]any) error {
	ts, _ := res["tasks"].([]any)
	ids := make([]string, len(ts))
	for i, t := range ts {
		if t, ok := t.(map[string]any); ok {
			ids[i], _ = t["id"].(string)
		}
	}
	owners, err := x.s.enforcer.A2AOwners(context.Background(), ids)
	if err != nil {
		return err
	}
	kept := ts[:0]
	var keptIDs, states []string
	for i, t := range ts {
		t, ok := t.(map[string]any)
		if !ok || owners[i] == "" || owners[i] != x.principal {
			continue
		}
		keptIDs, states = append(keptIDs, ids[i]), append(states, taskState(t))
		x.sealTask(t, false)
		kept = append(kept, t)
	}
	x.s.enforcer.A2AObservedAll(keptIDs, states) // one write to the shared store for the page
	if ts != nil {
		res["tasks"] = kept
		if len(kept) < len(ts) {
			// The total must not count the tasks of others.
			if _, ok := res["totalSize"]; ok {
				res["totalSize"] = len(kept)
			}
		}
	}
	x.sealAt(res, "nextPageToken", a2arules.KindCursor)
	return nil
}

// pushConfig seals a push config's task and withholds its credentials: the
// notification token and the authentication credentials stay between the
// client that set them and the server (A2A §13.2).
func (x *exchange) pushConfig(c map[string]any) {
	x.sealAt(c, "taskId", a2arules.KindTask)
	delete(c, "token")
	if a, ok := c["authentication"].(map[string]any); ok {
		delete(a, "credentials")
	}
	// A 0.3-style nesting.
	if p, ok := c["pushNotificationConfig"].(map[string]any); ok {
		delete(p, "token")
		if a, ok := p["authentication"].(map[string]any); ok {
			delete(a, "credentials")
		}
	}
}

// sealAt replaces a non-empty string member with the caller's handle.
func (x *exchange) sealAt(obj map[string]any, name string, kind a2arules.Kind) {
	if v, ok := obj[name].(string); ok && v != "" {
		obj[name] = x.seal(kind, v)
	}
}

// card serves the upstream's public agent card with the JSON-RPC interface
// pointing at Warden and the bindings Warden does not enforce left out.
func (s *Server) card(w http.ResponseWriter, r *http.Request) {
	u := *s.upstream
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, "", ""
	out, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "could not build the upstream request")
		return
	}
	out.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(out)
	if err != nil {
		s.enforcer.UpstreamFailed("a2a")
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the A2A server is unavailable")
		return
	}
	defer resp.Body.Close()
	b, err := relay.ReadBody(resp.Body, s.cfg.MaxResponseBytes)
	if err != nil {
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the agent card could not be read whole")
		return
	}
	var c map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if resp.StatusCode != http.StatusOK || d.Decode(&c) != nil || c == nil {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
		return
	}
	s.rewriteCard(c, s.publicEndpoint(r))
	b, err = encode(c)
	if err != nil {
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the agent card could not be rewritten")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// publicEndpoint is the JSON-RPC endpoint as clients reach Warden: the
// configured public URL, else the request's scheme and host with the
// upstream's path ("" when neither is known).
func (s *Server) publicEndpoint(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	if r == nil {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + s.endpoint()
}

// rewriteCard points the card's interfaces on the upstream at public: the
// JSON-RPC endpoint becomes Warden's, other bindings on the upstream are
// left out (Warden does not serve them), interfaces elsewhere stay.
func (s *Server) rewriteCard(c map[string]any, public string) {
	onUpstream := func(v string) bool {
		u, err := url.Parse(v)
		return err == nil && origin(u) == origin(s.upstream)
	}
	isEndpoint := func(v string) bool {
		u, err := url.Parse(v)
		return err == nil && origin(u) == origin(s.upstream) && strings.TrimSuffix(u.Path, "/") == strings.TrimSuffix(s.endpoint(), "/")
	}
	for _, k := range []string{"supportedInterfaces", "additionalInterfaces"} {
		list, ok := c[k].([]any)
		if !ok {
			continue
		}
		kept := list[:0]
		for _, it := range list {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			v, _ := m["url"].(string)
			binding, _ := m["protocolBinding"].(string)
			if binding == "" {
				binding, _ = m["transport"].(string) // 0.3
			}
			if onUpstream(v) {
				if !strings.EqualFold(binding, "JSONRPC") || !isEndpoint(v) || public == "" {
					continue
				}
				m["url"] = public
			}
			kept = append(kept, m)
		}
		c[k] = kept
	}
	if v, ok := c["url"].(string); ok && isEndpoint(v) && public != "" {
		c["url"] = public // 0.3's main URL
	}
}

// isEmpty reports whether a result names nothing: null or {}.
func isEmpty(v any) bool {
	m, ok := v.(map[string]any)
	return v == nil || ok && len(m) == 0
}

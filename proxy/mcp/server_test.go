package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"fmt"
	"io"
	"time"

	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/mcp"
)

const (
	alice = "alice"
	bob   = "bob"
)

func TestCreatedTaskIDsBecomeHandles(t *testing.T) {
	h := newHarness(t, Config{})
	t.Run("2025-11-25 nested result.task", func(t *testing.T) {
		handle := h.createTask(t, alice)
		id := h.upstreamID(t, alice, handle)
		if owner, ok := taskOwner(h.e, id); !ok || owner != alice {
			t.Fatalf("owner of %s = %q, %v", id, owner, ok)
		}
		if _, ok := h.srv.handles.open(kindTask, bob, handle); ok {
			t.Fatal("alice's handle opens for bob")
		}
	})
	t.Run("2026-07-28 flat resultType task", func(t *testing.T) {
		r := h.post(t, alice, rpc("c-1", "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}}),
			hdr{"Mcp-Protocol-Version": mcp.Era2026, "Mcp-Method": "tools/call", "Mcp-Name": "slow"})
		res := r.result(t)
		handle, _ := res["taskId"].(string)
		if res["resultType"] != "task" || !strings.HasPrefix(handle, handlePrefix) {
			t.Fatalf("result %v", res)
		}
		id := h.upstreamID(t, alice, handle)
		if owner, ok := taskOwner(h.e, id); !ok || owner != alice {
			t.Fatalf("owner of %s = %q, %v", id, owner, ok)
		}
		if strings.Contains(string(r.body), `"`+id+`"`) {
			t.Fatalf("the upstream ID leaked: %s", r.body)
		}
	})
	t.Run("no task: result unchanged", func(t *testing.T) {
		r := h.post(t, alice, rpc(2, "tools/call", map[string]any{"name": "plain"}), nil)
		if r.status != http.StatusOK || r.errCode(t) != 0 {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
		want := `{"id":2,"jsonrpc":"2.0","result":{"content":[{"text":"done","type":"text"}]}}` // as the fake encodes it
		if string(r.body) != want {
			t.Fatalf("body %s, want it byte for byte as the upstream sent it: %s", r.body, want)
		}
	})
}

func TestTasksListFiltered(t *testing.T) {
	h := newHarness(t, Config{})
	a1, a2 := h.createTask(t, alice), h.createTask(t, alice)
	b1 := h.createTask(t, bob)
	orphan := h.up.addTask(mcp.StatusWorking) // created behind Warden's back
	for _, tc := range []struct {
		principal string
		want      []string
	}{
		{alice, []string{a1, a2}},
		{bob, []string{b1}},
		{"carol", nil},
	} {
		t.Run(tc.principal, func(t *testing.T) {
			r := h.post(t, tc.principal, rpc(7, "tasks/list", map[string]any{}), nil)
			got := taskIDs(t, r.result(t))
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("tasks/list for %s = %v, want %v", tc.principal, got, want)
			}
			if strings.Contains(string(r.body), orphan) || strings.Contains(string(r.body), `"task-`) {
				t.Fatalf("upstream IDs in %s", r.body)
			}
		})
	}
	if n := len(h.up.received("tasks/list")); n != 3 {
		t.Fatalf("upstream saw %d tasks/list", n)
	}
}

// TestTasksListPages: the server pages tasks/list by two; bob's tasks come
// first, alice's between them. Alice pages through Warden: no page is empty
// while it has a cursor (the old code gave her pages emptied of bob's
// tasks, each with a cursor: their count), she gets all of hers, and each
// page of hers reads the upstream pages it needs and no more.
func TestTasksListPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners string // in the server's order: a for alice, b for bob
		pages  int    // alice's pages through Warden
	}{
		{"others first", "bbbbbab", 1},
		{"interleaved", "babbbbabbbba", 2},
		{"none of hers", "bbbbb", 1},
		{"all hers", "aaaaa", 3},
		{"over the bound", strings.Repeat("b", 2*relay.MaxListPages+1) + "a", 2},
		// security.md V2: the caller's last page carried the server's
		// cursor when only others' tasks followed, and the next page was
		// empty: one bit about the others, and when it first appeared.
		{"hers first", "aabbb", 1},
		{"others after the fill", "bababbbb", 1},
		{"others over pages read ahead", "aa" + strings.Repeat("b", 2*(relay.MaxListPages-2)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.up.listPage = 2
			var want []string
			for _, o := range tc.owners {
				who := map[rune]string{'a': alice, 'b': bob}[o]
				if id := h.createTask(t, who); who == alice {
					want = append(want, id)
				}
			}
			var got []string
			cursor, pages := "", 0
			for {
				params := map[string]any{}
				if cursor != "" {
					params["cursor"] = cursor
				}
				before := len(h.up.received("tasks/list"))
				res := h.post(t, alice, rpc(7, "tasks/list", params), nil).result(t)
				pages++
				if n := len(h.up.received("tasks/list")) - before; n > relay.MaxListPages {
					t.Fatalf("page %d read %d upstream pages, bound %d", pages, n, relay.MaxListPages)
				}
				list, _ := res["tasks"].([]any)
				if len(list) == 0 && pages > 1 && !strings.HasPrefix(tc.name, "over the bound") {
					t.Fatalf("page %d: empty: the cursor before it led only to others' tasks", pages)
				}
				for _, v := range list {
					m, _ := v.(map[string]any)
					got = append(got, m["taskId"].(string))
				}
				next, _ := res["nextCursor"].(string)
				if next == "" {
					break
				}
				if len(list) == 0 && !strings.HasPrefix(tc.name, "over the bound") {
					t.Fatalf("page %d: empty, with a cursor", pages)
				}
				cursor = next
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) || pages != tc.pages {
				t.Fatalf("alice's tasks over %d pages: %v, want %v over %d", pages, got, want, tc.pages)
			}
		})
	}
}

func TestTaskMethodsThroughHandles(t *testing.T) {
	h := newHarness(t, Config{})
	handle := h.createTask(t, alice)
	id := h.upstreamID(t, alice, handle)
	bobs := h.createTask(t, bob)
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		t.Run(m+" by the owner", func(t *testing.T) {
			before := len(h.up.received(m))
			r := h.post(t, alice, rpc(3, m, map[string]any{"taskId": handle}), nil)
			calls := h.up.received(m)
			if len(calls) != before+1 {
				t.Fatalf("upstream saw %d %s", len(calls)-before, m)
			}
			if got := calls[len(calls)-1].params["taskId"]; got != id {
				t.Fatalf("upstream got taskId %v, want %s", got, id)
			}
			res := r.result(t)
			if res["taskId"] != handle {
				t.Fatalf("answer carries taskId %v, want the handle", res["taskId"])
			}
		})
		for _, tc := range []struct{ name, principal, taskID string }{
			{"another principal's handle", bob, handle},
			{"a raw upstream ID", bob, id},
			{"the owner with the raw upstream ID", alice, id},
			{"a forged handle", bob, handlePrefix + "dGFzay0x.AAAAAAAAAAAAAAAAAAAAAA"},
			{"an unknown ID", bob, "task-999"},
			{"own handle in the wrong field", bob, "x"},
		} {
			t.Run(m+" with "+tc.name, func(t *testing.T) {
				before := len(h.up.received(m))
				params := map[string]any{"taskId": tc.taskID}
				if tc.name == "own handle in the wrong field" {
					params["_meta"] = map[string]any{mcp.RelatedTask: map[string]any{"taskId": bobs}}
				}
				r := h.post(t, tc.principal, rpc(4, m, params), nil)
				if r.status != http.StatusOK || r.errCode(t) != mcp.ErrInvalidParams || r.errMessage(t) != "Task not found" {
					t.Fatalf("HTTP %d %s, want -32602 Task not found", r.status, r.body)
				}
				if r.header.Get("X-Warden-Decision") == "" {
					t.Fatalf("the refusal names no decision (X-Warden-Decision)")
				}
				if got := r.last(t)["id"]; got != float64(4) {
					t.Fatalf("answer id %v", got)
				}
				if n := len(h.up.received(m)) - before; n != 0 {
					t.Fatalf("the upstream saw %d %s", n, m)
				}
			})
		}
	}
	if owner, _ := taskOwner(h.e, id); owner != alice {
		t.Fatalf("owner %q", owner)
	}
}

func TestSSENotificationsFiltered(t *testing.T) {
	h := newHarness(t, Config{})
	a := h.createTask(t, alice)
	b := h.createTask(t, bob)
	orphan := h.up.addTask(mcp.StatusWorking)
	h.up.setStatus(h.upstreamID(t, alice, a), mcp.StatusInputRequired)

	t.Run("POST stream", func(t *testing.T) {
		r := h.post(t, bob, rpc(5, "tools/call", map[string]any{"name": "stream"}), nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("HTTP %d %v", r.status, r.header)
		}
		// Only the events bob gets have their id (a dropped one leaves no
		// trace), sealed to bob and his session with the request the
		// stream answers.
		var ids []string
		for _, v := range r.ids {
			id, ok := h.srv.handles.openIn(kindEvent, bob, "", v)
			if !ok {
				t.Fatalf("event id %q is not bob's", v)
			}
			p := decodeResume(id)
			if string(p.id) != "5" || p.method != "tools/call" {
				t.Fatalf("event id %q resumes to %+v", v, p)
			}
			ids = append(ids, p.event)
		}
		if !slices.Equal(ids, []string{"2", "4"}) {
			t.Fatalf("event ids %v", ids)
		}
		if len(r.msgs) != 2 {
			t.Fatalf("bob got %d messages: %s", len(r.msgs), r.body)
		}
		p, _ := r.msgs[0]["params"].(map[string]any)
		if p["taskId"] != b {
			t.Fatalf("notification for %v, want bob's handle", p["taskId"])
		}
		if r.errCode(t) != 0 {
			t.Fatalf("answer %v", r.last(t))
		}
		if strings.Contains(string(r.body), orphan) || strings.Contains(string(r.body), a) {
			t.Fatalf("another principal's task in %s", r.body)
		}
	})
	t.Run("GET stream", func(t *testing.T) {
		r := h.do(t, http.MethodGet, "/mcp", alice, "", nil)
		if len(r.msgs) != 1 {
			t.Fatalf("alice got %d messages: %s", len(r.msgs), r.body)
		}
		p, _ := r.msgs[0]["params"].(map[string]any)
		if p["taskId"] != a || p["status"] != mcp.StatusInputRequired {
			t.Fatalf("notification %v", p)
		}
		if len(r.ids) != 1 {
			t.Fatalf("event ids %v: the dropped events left a trace", r.ids)
		}
		if n := strings.Count(string(r.body), "\n\n"); n != len(r.msgs) {
			t.Fatalf("%d events for %d messages: a dropped one left a blank event: %q", n, len(r.msgs), r.body)
		}
	})
	t.Run("statuses learned from the stream", func(t *testing.T) {
		// Alice's task is input_required, as the stream said; a status
		// that is not terminal may be stale, so the rule for resume
		// (paused only) is decided on Warden's own tasks/get.
		r := h.post(t, alice, rpc(6, "tasks/resume", map[string]any{"taskId": a}), nil)
		if r.errCode(t) != mcp.ErrInvalidParams || !strings.Contains(r.errMessage(t), "input_required") {
			t.Fatalf("%s", r.body)
		}
		if n := len(h.up.received("tasks/get")); n != 1 {
			t.Fatalf("upstream asked %d times, want once", n)
		}
	})
}

func TestSessionHandles(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.post(t, alice, rpc(1, "initialize", map[string]any{"protocolVersion": "2025-11-25"}), nil)
	sess := r.header.Get("Mcp-Session-Id")
	if !strings.HasPrefix(sess, handlePrefix) {
		t.Fatalf("Mcp-Session-Id %q is not a handle", sess)
	}
	if id, ok := h.srv.handles.open(kindSession, alice, sess); !ok || id != "up-sess-1" {
		t.Fatalf("session handle opens to %q, %v", id, ok)
	}
	if _, ok := h.srv.handles.open(kindTask, alice, sess); ok {
		t.Fatal("a session handle opens as a task handle")
	}

	t.Run("rewritten upstream", func(t *testing.T) {
		h.post(t, alice, rpc(2, "tools/call", map[string]any{"name": "plain"}), hdr{"Mcp-Session-Id": sess})
		calls := h.up.received("tools/call")
		if got := calls[len(calls)-1].header.Get("Mcp-Session-Id"); got != "up-sess-1" {
			t.Fatalf("upstream got Mcp-Session-Id %q", got)
		}
		// Warden's own tools/list for taskSupport runs in the caller's session.
		for _, c := range h.up.received("tools/list") {
			if c.header.Get("Mcp-Session-Id") != "up-sess-1" || c.header.Get("Authorization") != "Bearer alice" {
				t.Fatalf("Warden's tools/list headers %v", c.header)
			}
		}
	})
	t.Run("GET and DELETE", func(t *testing.T) {
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			h.do(t, m, "/mcp", alice, "", hdr{"Mcp-Session-Id": sess})
			calls := h.up.received("")
			last := calls[len(calls)-1]
			if last.httpMethod != m || last.header.Get("Mcp-Session-Id") != "up-sess-1" {
				t.Fatalf("%s reached the upstream as %s with %q", m, last.httpMethod, last.header.Get("Mcp-Session-Id"))
			}
		}
	})
	for _, tc := range []struct{ name, principal, sess string }{
		{"another principal's handle", bob, sess},
		{"the raw upstream ID", alice, "up-sess-1"},
		{"a task handle", alice, h.srv.handles.seal(kindTask, alice, "up-sess-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received(""))
			r := h.post(t, tc.principal, rpc(3, "tools/list", nil), hdr{"Mcp-Session-Id": tc.sess})
			if r.status != http.StatusNotFound || r.errCode(t) != -32001 {
				t.Fatalf("HTTP %d %s", r.status, r.body)
			}
			if n := len(h.up.received("")) - before; n != 0 {
				t.Fatalf("upstream called %d times", n)
			}
		})
	}
}

func TestOrigin(t *testing.T) {
	h := newHarness(t, Config{AllowedOrigins: []string{"https://app.example"}, AllowedHosts: []string{"127.0.0.1"}})
	port := h.front.URL[strings.LastIndex(h.front.URL, ":")+1:]
	tests := []struct {
		name   string
		origin string
		host   string // the request's Host; "" for the listener's
		status int
	}{
		{"none", "", "", http.StatusOK},
		{"an allowed host", h.front.URL, "", http.StatusOK},
		{"an allowed host, other scheme", strings.Replace(h.front.URL, "http://", "https://", 1), "", http.StatusOK},
		{"a rebound name as Origin and Host", "http://rebound.example:" + port, "rebound.example:" + port, http.StatusForbidden},
		{"configured", "https://app.example", "", http.StatusOK},
		{"foreign", "http://evil.example", "", http.StatusForbidden},
		{"configured with another port", "https://app.example:8443", "", http.StatusForbidden},
		{"null", "null", "", http.StatusForbidden},
		{"allowed host as a path", "http://evil.example/" + strings.TrimPrefix(h.front.URL, "http://"), "", http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received(""))
			hd := hdr{}
			if tc.origin != "" {
				hd["Origin"] = tc.origin
			}
			if tc.host != "" {
				hd["Host"] = tc.host
			}
			r := h.post(t, alice, rpc(1, "ping", nil), hd)
			if r.status != tc.status {
				t.Fatalf("HTTP %d %s, want %d", r.status, r.body, tc.status)
			}
			called := len(h.up.received("")) > before
			if called != (tc.status == http.StatusOK) {
				t.Fatalf("upstream called: %v", called)
			}
			if tc.status == http.StatusForbidden && r.errCode(t) != mcp.ErrInvalidRequest {
				t.Fatalf("body %s", r.body)
			}
		})
	}
	t.Run("wildcard", func(t *testing.T) {
		h := newHarness(t, Config{AllowedOrigins: []string{"*"}})
		if r := h.post(t, alice, rpc(1, "ping", nil), hdr{"Origin": "http://evil.example"}); r.status != http.StatusOK {
			t.Fatalf("HTTP %d", r.status)
		}
	})
}

func TestUnauthorized(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		path string
		want string // WWW-Authenticate; HOST is the front's host
	}{
		{"no authorization servers", Config{}, "/mcp", `Bearer`},
		{"metadata from the request", Config{AuthorizationServers: []string{"https://as.example"}}, "/mcp",
			`Bearer resource_metadata="http://HOST/.well-known/oauth-protected-resource/mcp"`},
		{"metadata from the configured resource", Config{AuthorizationServers: []string{"https://as.example"}, Resource: "https://mcp.example/api/mcp/"}, "/mcp",
			`Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/api/mcp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Listen = "127.0.0.1:3001" // its loopback names are the allowed hosts
			h := newHarness(t, tc.cfg)
			for _, auth := range []string{"", "Basic YWxpY2U6cHc=", "Bearer ", "Bearer"} {
				req, _ := http.NewRequest(http.MethodPost, h.front.URL+tc.path, strings.NewReader(rpc(1, "ping", nil)))
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := h.front.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var body map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("auth %q: HTTP %d", auth, resp.StatusCode)
				}
				want := strings.ReplaceAll(tc.want, "HOST", strings.TrimPrefix(h.front.URL, "http://"))
				if auth != "" {
					// A credential Warden cannot read (another scheme, no
					// token) is a refused one: a valid RFC 6750 challenge
					// with error="invalid_token", never "Bearer, ...".
					sep := " "
					if want != "Bearer" {
						sep = ", "
					}
					want += sep + `error="invalid_token", error_description="invalid_credentials"`
				}
				if got := resp.Header.Get("WWW-Authenticate"); got != want {
					t.Fatalf("WWW-Authenticate %q, want %q", got, want)
				}
				e, _ := body["error"].(map[string]any)
				if e["code"] != float64(-32001) || body["id"] != nil {
					t.Fatalf("body %v", body)
				}
			}
			if n := len(h.up.received("")); n != 0 {
				t.Fatalf("upstream called %d times", n)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	as := []string{"https://as.example", "https://as2.example"}
	for _, tc := range []struct {
		name, path, resource, host, want string
	}{
		{"for the MCP path", "/.well-known/oauth-protected-resource/mcp", "", "", "http://HOST/mcp"},
		{"configured resource", "/.well-known/oauth-protected-resource/mcp", "https://mcp.example/mcp", "", "https://mcp.example/mcp"},
		// A Host that is not one of mcp.allowed_hosts is the client's
		// choice: the document names the listen address instead.
		{"foreign Host", "/.well-known/oauth-protected-resource/mcp", "", "evil.example", "http://127.0.0.1:3001/mcp"},
		{"foreign Host, configured resource", "/.well-known/oauth-protected-resource/mcp", "https://mcp.example/mcp", "evil.example", "https://mcp.example/mcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{AuthorizationServers: as, Resource: tc.resource}
			cfg.Listen = "127.0.0.1:3001"
			h := newHarness(t, cfg)
			// No credentials and a foreign Origin: the document is public.
			headers := hdr{"Origin": "http://evil.example"}
			if tc.host != "" {
				headers["Host"] = tc.host
			}
			r := h.do(t, http.MethodGet, tc.path, "", "", headers)
			if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("HTTP %d %v %s", r.status, r.header, r.body)
			}
			var doc struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
				BearerMethods        []string `json:"bearer_methods_supported"`
			}
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.want, "HOST", strings.TrimPrefix(h.front.URL, "http://"))
			if doc.Resource != want || !slices.Equal(doc.AuthorizationServers, as) || !slices.Equal(doc.BearerMethods, []string{"header"}) {
				t.Fatalf("document %+v, want resource %s", doc, want)
			}
			if n := len(h.up.received("")); n != 0 {
				t.Fatalf("upstream called %d times", n)
			}
		})
	}
	// Only the endpoint's metadata exists (the challenge names no other),
	// and none without authorization servers: any other path is not the
	// endpoint (404), never a document naming what the request chose.
	for _, tc := range []struct {
		name string
		cfg  Config
		path string
	}{
		{"not served without authorization servers", Config{}, "/.well-known/oauth-protected-resource/mcp"},
		{"another resource", Config{AuthorizationServers: as}, "/.well-known/oauth-protected-resource/other"},
		{"the root", Config{AuthorizationServers: as}, "/.well-known/oauth-protected-resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			if r := h.do(t, http.MethodGet, tc.path, "", "", nil); r.status != http.StatusNotFound || r.header.Get("X-Warden-Decision") == "" {
				t.Fatalf("HTTP %d %v %s", r.status, r.header, r.body)
			}
		})
	}
}

func TestMalformedRequests(t *testing.T) {
	h := newHarness(t, Config{HTTPConfig: listener.HTTPConfig{MaxBodyBytes: 512}})
	pad := func(n int) string {
		s := rpc(1, "tools/call", map[string]any{"name": "plain", "arguments": map[string]any{"x": ""}})
		return strings.Replace(s, `"x":""`, `"x":"`+strings.Repeat("a", n-len(s))+`"`, 1)
	}
	tests := []struct {
		name   string
		body   string
		status int
		code   int
	}{
		{"at the body limit", pad(512), http.StatusOK, 0},
		{"over the body limit", pad(513), http.StatusRequestEntityTooLarge, mcp.ErrInvalidRequest},
		{"broken JSON", `{"jsonrpc":"2.0","id":1,"method":`, http.StatusBadRequest, mcp.ErrParse},
		{"empty body", ``, http.StatusBadRequest, mcp.ErrParse},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, http.StatusBadRequest, mcp.ErrInvalidRequest},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, http.StatusBadRequest, mcp.ErrInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, http.StatusBadRequest, mcp.ErrInvalidRequest},
		{"task method without taskId", rpc(9, "tasks/get", map[string]any{}), http.StatusOK, mcp.ErrInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received(""))
			r := h.post(t, alice, tc.body, nil)
			if r.status != tc.status || r.errCode(t) != tc.code {
				t.Fatalf("HTTP %d %s, want %d %d", r.status, r.body, tc.status, tc.code)
			}
			called := len(h.up.received("tools/call")) > 0 && len(h.up.received("")) > before
			if called != (tc.status == http.StatusOK && tc.code == 0) {
				t.Fatalf("upstream called: %v", called)
			}
			if tc.code != 0 && r.errMessage(t) == "" {
				t.Fatal("no message")
			}
		})
	}
}

func TestHeaderMismatch(t *testing.T) {
	h := newHarness(t, Config{})
	handle := h.createTask(t, alice)
	id := h.upstreamID(t, alice, handle)
	v26 := mcp.Era2026
	tests := []struct {
		name   string
		method string
		params map[string]any
		h      hdr
		status int
		code   int
		name2  string // Mcp-Name the upstream must see, when allowed
	}{
		{"Mcp-Name different", "tasks/get", map[string]any{"taskId": handle}, hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/get", "Mcp-Name": "other"}, 400, mcp.ErrHeaderMismatch, ""},
		{"Mcp-Name is the upstream ID", "tasks/get", map[string]any{"taskId": handle}, hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/get", "Mcp-Name": id}, 400, mcp.ErrHeaderMismatch, ""},
		{"Mcp-Name missing on 2026", "tasks/cancel", map[string]any{"taskId": handle}, hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/cancel"}, 400, mcp.ErrHeaderMismatch, ""},
		{"Mcp-Name different on 2025", "tasks/get", map[string]any{"taskId": handle}, hdr{"Mcp-Name": "other"}, 400, mcp.ErrHeaderMismatch, ""},
		{"Mcp-Method different", "tasks/get", map[string]any{"taskId": handle}, hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/cancel", "Mcp-Name": handle}, 400, mcp.ErrHeaderMismatch, ""},
		{"Mcp-Name different on tools/call", "tools/call", map[string]any{"name": "plain"}, hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": "fast"}, 400, mcp.ErrHeaderMismatch, ""},
		{"another principal's handle, agreeing headers", "tasks/get", map[string]any{"taskId": h.srv.handles.seal(kindTask, bob, id)},
			hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/get", "Mcp-Name": h.srv.handles.seal(kindTask, bob, id)}, 200, mcp.ErrInvalidParams, ""},
		{"agreeing headers", "tasks/get", map[string]any{"taskId": handle}, hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/get", "Mcp-Name": handle}, 200, 0, id},
		{"agreeing base64 Mcp-Name", "tasks/get", map[string]any{"taskId": handle}, hdr{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/get", "Mcp-Name": "=?base64?" + b64std(handle) + "?="}, 200, 0, id},
		{"Mcp-Name on tasks/result 2025", "tasks/result", map[string]any{"taskId": handle}, hdr{"Mcp-Name": handle}, 200, 0, id},
		{"no Mcp-Name on 2025", "tasks/get", map[string]any{"taskId": handle}, nil, 200, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received(tc.method))
			r := h.post(t, alice, rpc(11, tc.method, tc.params), tc.h)
			if r.status != tc.status || r.errCode(t) != tc.code {
				t.Fatalf("HTTP %d %s, want %d %d", r.status, r.body, tc.status, tc.code)
			}
			calls := h.up.received(tc.method)
			if tc.code != 0 {
				if len(calls) != before {
					t.Fatal("the upstream was called")
				}
				if r.last(t)["id"] != float64(11) {
					t.Fatalf("answer id %v", r.last(t)["id"])
				}
				return
			}
			if len(calls) != before+1 {
				t.Fatalf("upstream calls %d", len(calls)-before)
			}
			if got := calls[len(calls)-1].header.Get("Mcp-Name"); got != tc.name2 {
				t.Fatalf("upstream got Mcp-Name %q, want %q", got, tc.name2)
			}
		})
	}
}

// TestHeaderMismatchEveryMethod: SEP-2243 routing headers that disagree with
// the body are refused whatever the method, not only on the methods Warden
// decides: intermediaries behind Warden may route on them.
func TestHeaderMismatchEveryMethod(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct{ name, body, mcpMethod string }{
		{"request", rpc(1, "resources/read", map[string]any{"uri": "file:///x"}), "tools/call"},
		{"notification", rpc(nil, "notifications/initialized", nil), "tools/call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received(""))
			r := h.post(t, alice, tc.body, hdr{"Mcp-Protocol-Version": mcp.Era2026, "Mcp-Method": tc.mcpMethod})
			if r.status != http.StatusBadRequest || len(h.up.received("")) != before {
				t.Errorf("BUG: Mcp-Method %q on a %s body: HTTP %d, upstream called %v; want 400 -32020 and no upstream call (server.go post: CheckHeaders' verdict is only used when decides(call))",
					tc.mcpMethod, tc.name, r.status, len(h.up.received("")) != before)
			}
		})
	}
}

func b64std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestTaskSupport(t *testing.T) {
	h := newHarness(t, Config{})
	task := map[string]any{"ttl": 1000}
	tests := []struct {
		name string
		tool string
		task bool
		code int
	}{
		{"forbidden tool with a task", "fast", true, mcp.ErrMethodNotFound},
		{"forbidden tool without a task", "fast", false, 0},
		{"tool without execution, with a task", "plain", true, mcp.ErrMethodNotFound},
		{"required tool without a task", "must", false, mcp.ErrMethodNotFound},
		{"required tool with a task", "must", true, 0},
		{"optional tool with a task", "slow", true, 0},
		{"tool the server does not list", "ghost", true, mcp.ErrInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received("tools/call"))
			params := map[string]any{"name": tc.tool, "arguments": map[string]any{}}
			if tc.task {
				params["task"] = task
			}
			r := h.post(t, alice, rpc("x", "tools/call", params), nil)
			if r.status != http.StatusOK || r.errCode(t) != tc.code {
				t.Fatalf("HTTP %d %s, want code %d", r.status, r.body, tc.code)
			}
			called := len(h.up.received("tools/call")) > before
			if called != (tc.code == 0) {
				t.Fatalf("upstream tools/call handler invoked: %v", called)
			}
			if tc.code != 0 && (!strings.Contains(r.errMessage(t), tc.tool) || r.last(t)["id"] != "x") {
				t.Fatalf("answer %s", r.body)
			}
		})
	}
	// Warden read the first page for the first tool and both pages for the
	// first tool of the second: the list read whole, the unlisted one is
	// refused without reading it again (security.md X2); every sub-request
	// is its own.
	lists := h.up.received("tools/list")
	if len(lists) != 3 {
		t.Fatalf("upstream saw %d tools/list", len(lists))
	}
	for _, c := range lists {
		if c.id != `"warden-tools-list"` {
			t.Fatalf("sub-request id %s", c.id)
		}
	}
	if c, _ := lists[2].params["cursor"].(string); c != "2" {
		t.Fatalf("second page cursor %v", lists[2].params)
	}
}

// TestTaskSupportUnknown: a tools/call whose tool's taskSupport cannot be
// learned is refused, never forwarded; and a tool's taskSupport is the one
// listed to the caller, not to another principal.
func TestTaskSupportUnknown(t *testing.T) {
	h := newHarness(t, Config{})
	call := func(who, tool string) reply {
		return h.post(t, who, rpc("x", "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}, "task": map[string]any{}}), nil)
	}
	h.up.configure(func(u *fakeUpstream) { u.failList = true })
	r := call(alice, "slow")
	if r.status != http.StatusServiceUnavailable || r.errCode(t) != mcp.ErrInternal || !strings.Contains(r.errMessage(t), `"slow"`) {
		t.Fatalf("tools/list failing: HTTP %d %s", r.status, r.body)
	}
	// Bob's server lists "fast" as optional, alice's as forbidden.
	h.up.configure(func(u *fakeUpstream) {
		u.failList = false
		u.toolsFor = map[string][]map[string]any{
			"Bearer bob": {{"name": "fast", "execution": map[string]any{"taskSupport": "optional"}}},
		}
	})
	if r := h.post(t, bob, rpc(1, "tools/list", map[string]any{}), nil); len(r.result(t)["tools"].([]any)) != 1 {
		t.Fatalf("bob's tools/list: %s", r.body)
	}
	if r := call(bob, "fast"); r.errCode(t) != 0 {
		t.Fatalf("bob's task call of his optional tool: %s", r.body)
	}
	if r := call(alice, "fast"); r.errCode(t) != mcp.ErrMethodNotFound {
		t.Fatalf("alice's task call of her forbidden tool: %s", r.body)
	}
	if n := len(h.up.received("tools/call")); n != 1 {
		t.Fatalf("the server ran %d tools/call, want bob's only", n)
	}
}

func TestTaskSupportLearnedFromClientToolsList(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.post(t, alice, rpc(1, "tools/list", map[string]any{}), nil)
	if len(r.result(t)["tools"].([]any)) != 3 {
		t.Fatalf("%s", r.body)
	}
	r = h.post(t, alice, rpc(2, "tools/call", map[string]any{"name": "fast", "task": map[string]any{}}), nil)
	if r.errCode(t) != mcp.ErrMethodNotFound {
		t.Fatalf("%s", r.body)
	}
	if n := len(h.up.received("tools/list")); n != 1 {
		t.Fatalf("upstream saw %d tools/list, want only the client's", n)
	}
}

func TestTaskSupportOverSSE(t *testing.T) {
	h := newHarness(t, Config{})
	h.up.configure(func(u *fakeUpstream) { u.sse = true })
	r := h.post(t, alice, rpc(2, "tools/call", map[string]any{"name": "fast", "task": map[string]any{}}), nil)
	if r.errCode(t) != mcp.ErrMethodNotFound {
		t.Fatalf("%s", r.body)
	}
}

func TestSteerBoundAndSettle(t *testing.T) {
	h := newHarness(t, Config{MaxSteerQueue: 1, MaxSteerBytes: 16})
	handle := h.createTask(t, alice)
	steer := func(msg string) reply {
		return h.post(t, alice, rpc("s", "tasks/steer", map[string]any{"taskId": handle, "message": msg}), nil)
	}
	// The upstream refuses: the reservation is given back.
	h.up.configure(func(u *fakeUpstream) { u.refuse = true })
	for range 2 {
		if r := steer("left"); r.errCode(t) != mcp.ErrInvalidParams || r.errMessage(t) != "refused" {
			t.Fatalf("%s", r.body)
		}
	}
	h.up.configure(func(u *fakeUpstream) { u.refuse = false })
	if r := steer("left"); r.errCode(t) != 0 {
		t.Fatalf("%s", r.body)
	}
	before := len(h.up.received("tasks/steer"))
	r := steer("right")
	if r.errCode(t) != mcp.ErrInvalidParams || !strings.Contains(r.errMessage(t), "queued") {
		t.Fatalf("%s", r.body)
	}
	if r = steer(strings.Repeat("x", 17)); r.errCode(t) != mcp.ErrInvalidParams || !strings.Contains(r.errMessage(t), "exceeds") {
		t.Fatalf("%s", r.body)
	}
	if n := len(h.up.received("tasks/steer")) - before; n != 0 {
		t.Fatalf("upstream saw %d refused steers", n)
	}
	// A status change seen on a stream delivers the queue.
	h.up.setStatus(h.upstreamID(t, alice, handle), mcp.StatusPaused)
	h.do(t, http.MethodGet, "/mcp", alice, "", nil)
	if r := steer("again"); r.errCode(t) != 0 {
		t.Fatalf("%s", r.body)
	}
}

// TestEchoedStatusIgnored: a tool that echoes {"taskId": <the caller's
// handle>, "status": ...} neither reaches the server with the task's
// upstream ID nor passes for a status change that resets the steer bound.
func TestEchoedStatusIgnored(t *testing.T) {
	h := newHarness(t, Config{MaxSteerQueue: 2})
	handle := h.createTask(t, alice)
	steer := rpc("s", "tasks/steer", map[string]any{"taskId": handle, "message": "m"})
	for i := range 6 {
		h.post(t, alice, steer, nil)
		st := []string{mcp.StatusInputRequired, mcp.StatusWorking}[i%2]
		r := h.post(t, alice, rpc(3, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"taskId": handle, "status": st}}), nil)
		if got := r.result(t)["structuredContent"]; !reflect.DeepEqual(got, map[string]any{"taskId": handle, "status": st}) {
			t.Fatalf("echo: %s", r.body)
		}
	}
	if n := len(h.up.received("tasks/steer")); n != 2 {
		t.Fatalf("the server got %d steers, want the bound of 2", n)
	}
	for _, c := range h.up.received("tools/call") {
		if args, _ := c.params["arguments"].(map[string]any); c.params["name"] == "echo" && args["taskId"] != handle {
			t.Fatalf("the tool got %v, want the handle as sent", args)
		}
	}
}

// TestListenTaskIDs: subscriptions/listen reaches the server with the
// upstream IDs of the caller's handles, and is refused as an unknown task
// when it names anything else.
func TestListenTaskIDs(t *testing.T) {
	h := newHarness(t, Config{})
	mine, bobs := h.createTask(t, alice), h.createTask(t, bob)
	listen := func(ids ...string) reply {
		return h.post(t, alice, rpc(5, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}}), nil)
	}
	for _, ids := range [][]string{{mine, bobs}, {mine, h.upstreamID(t, alice, mine)}, {"made-up"}} {
		if r := listen(ids...); r.errCode(t) != mcp.ErrInvalidParams || r.errMessage(t) != "Task not found" {
			t.Fatalf("listen to %v: %s", ids, r.body)
		}
	}
	if n := len(h.up.received("subscriptions/listen")); n != 0 {
		t.Fatalf("the server got %d refused listens", n)
	}
	if r := listen(mine); r.errCode(t) != 0 {
		t.Fatalf("listen to own task: %s", r.body)
	}
	got := h.up.received("subscriptions/listen")
	if len(got) != 1 || fmt.Sprint(got[0].params["notifications"]) != fmt.Sprint(map[string]any{"taskIds": []any{h.upstreamID(t, alice, mine)}}) {
		t.Fatalf("the server got %v", got)
	}
}

func TestStatusReadAfterRestart(t *testing.T) {
	for _, sse := range []bool{false, true} {
		name := "json"
		if sse {
			name = "sse"
		}
		t.Run(name, func(t *testing.T) {
			first := newHarness(t, Config{})
			handle := first.createTask(t, alice)
			id := first.upstreamID(t, alice, handle)
			first.up.setStatus(id, mcp.StatusCompleted)
			first.up.configure(func(u *fakeUpstream) { u.sse = sse })

			// Another Warden with the same key: the handle still works, and
			// the status is read from the upstream with tasks/get.
			h := newHarnessFor(t, Config{}, first.up, first.upSrv)
			r := h.post(t, alice, rpc(1, "tasks/pause", map[string]any{"taskId": handle, "_meta": map[string]any{"k": "v"}}), hdr{"Mcp-Protocol-Version": "2025-11-25"})
			if r.errCode(t) != mcp.ErrInvalidParams || !strings.Contains(r.errMessage(t), "completed") {
				t.Fatalf("%s", r.body)
			}
			gets := h.up.received("tasks/get")
			if len(gets) != 1 || gets[0].params["taskId"] != id || gets[0].id != `"warden-tasks-get"` {
				t.Fatalf("tasks/get sub-requests %+v", gets)
			}
			if m, _ := gets[0].params["_meta"].(map[string]any); m["k"] != "v" {
				t.Fatalf("_meta not repeated: %v", gets[0].params)
			}
			if len(h.up.received("tasks/pause")) != 0 {
				t.Fatal("pause reached the upstream")
			}
			if owner, ok := taskOwner(h.e, id); !ok || owner != alice {
				t.Fatalf("owner %q %v", owner, ok)
			}
			// Bob still cannot use it.
			if r := h.post(t, bob, rpc(2, "tasks/get", map[string]any{"taskId": handle}), nil); r.errMessage(t) != "Task not found" {
				t.Fatalf("%s", r.body)
			}
		})
	}
	t.Run("2026 sub-request headers", func(t *testing.T) {
		first := newHarness(t, Config{})
		handle := first.createTask(t, alice)
		id := first.upstreamID(t, alice, handle)
		h := newHarnessFor(t, Config{}, first.up, first.upSrv)
		r := h.post(t, alice, rpc(1, "tasks/steer", map[string]any{"taskId": handle, "message": "m"}),
			hdr{"Mcp-Protocol-Version": mcp.Era2026, "Mcp-Method": "tasks/steer", "Mcp-Name": handle})
		if r.errCode(t) != 0 {
			t.Fatalf("%s", r.body)
		}
		gets := h.up.received("tasks/get")
		if len(gets) != 1 || gets[0].header.Get("Mcp-Method") != "tasks/get" || gets[0].header.Get("Mcp-Name") != id {
			t.Fatalf("tasks/get headers %v", gets)
		}
		steers := h.up.received("tasks/steer")
		if got := steers[len(steers)-1].header.Get("Mcp-Name"); got != id {
			t.Fatalf("steer reached the upstream with Mcp-Name %q", got)
		}
	})
	t.Run("status unreadable", func(t *testing.T) {
		first := newHarness(t, Config{})
		handle := first.createTask(t, alice)
		first.up.configure(func(u *fakeUpstream) { u.failGet = true })
		h := newHarnessFor(t, Config{}, first.up, first.upSrv)
		r := h.post(t, alice, rpc(1, "tasks/resume", map[string]any{"taskId": handle}), nil)
		if r.status != http.StatusServiceUnavailable || r.errCode(t) != mcp.ErrInternal || r.last(t)["id"] != float64(1) {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
		if len(h.up.received("tasks/resume")) != 0 {
			t.Fatal("resume reached the upstream")
		}
	})
}

func TestUpstreamFailures(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.upSrv.Close()
		r := h.post(t, alice, rpc(1, "ping", nil), nil)
		if r.status != http.StatusBadGateway || r.errCode(t) != mcp.ErrInternal || r.last(t)["id"] != float64(1) {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
	})
	t.Run("answer over the limit", func(t *testing.T) {
		h := newHarness(t, Config{HTTPConfig: listener.HTTPConfig{MaxResponseBytes: 1024}})
		h.up.configure(func(u *fakeUpstream) { u.bigAnswer = 2048 })
		r := h.post(t, alice, rpc(1, "tools/call", map[string]any{"name": "big"}), nil)
		// The answer to the request, naming the limit, for the client's SDK
		// to read as such (200, as the server answered).
		if r.status != http.StatusOK || r.errCode(t) != mcp.ErrInternal || r.last(t)["id"] != float64(1) ||
			!strings.Contains(string(r.body), "mcp.max_response_bytes (1024 bytes)") {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
	})
	t.Run("answer at the limit", func(t *testing.T) {
		h := newHarness(t, Config{HTTPConfig: listener.HTTPConfig{MaxResponseBytes: 1024}})
		h.up.configure(func(u *fakeUpstream) { u.bigAnswer = 900 })
		r := h.post(t, alice, rpc(1, "tools/call", map[string]any{"name": "big"}), nil)
		if r.status != http.StatusOK || r.errCode(t) != 0 {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
	})
}

func TestNew(t *testing.T) {
	e := newEnforcer(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		key  *handle.Ring
		ok   bool
	}{
		{"valid", Config{HTTPConfig: listener.HTTPConfig{Upstream: "http://127.0.0.1:1/mcp"}}, testKey, true},
		{"no handle keys", Config{HTTPConfig: listener.HTTPConfig{Upstream: "http://127.0.0.1:1/mcp"}}, nil, false},
		{"no upstream host", Config{HTTPConfig: listener.HTTPConfig{Upstream: "/mcp"}}, testKey, false},
		{"listening needs an http upstream", Config{HTTPConfig: listener.HTTPConfig{Listen: ":0", Upstream: "ftp://x", Plaintext: true}}, testKey, false},
		{"listening needs TLS or plaintext", Config{HTTPConfig: listener.HTTPConfig{Listen: ":0", Upstream: "http://x"}}, testKey, false},
		{"negative limits", Config{HTTPConfig: listener.HTTPConfig{Listen: ":0", Upstream: "http://x", Plaintext: true}, MaxSteerQueue: -1}, testKey, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg, e, tc.key, nil, nil)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v", err)
			}
			if tc.ok && (s.cfg.MaxBodyBytes != DefaultMaxBodyBytes || s.cfg.MaxSteerQueue != DefaultMaxSteerQueue || s.ShutdownTimeout() != DefaultShutdownTimeout) {
				t.Fatalf("defaults %+v", s.cfg)
			}
		})
	}
}

// TestIDWithHTMLCharacters: a request id is any string. The answer must be
// recognized as the answer to the request whatever the id holds, or tasks/list
// is not filtered and created tasks are not recorded.
func TestIDWithHTMLCharacters(t *testing.T) {
	h := newHarness(t, Config{})
	mine := h.createTask(t, alice)
	bobs := h.createTask(t, bob)
	bobsID := h.upstreamID(t, bob, bobs)
	// Written by hand: json.Marshal would send the id as "\u003c1\u003e".
	r := h.post(t, alice, `{"jsonrpc":"2.0","id":"<1>","method":"tasks/list","params":{}}`, nil)
	got := taskIDs(t, r.result(t))
	if !slices.Equal(got, []string{mine}) {
		t.Errorf("BUG: tasks/list with id \"<1>\" returned %v to alice (bob's upstream ID %s included): forward.go sameID compares json.Marshal (HTML-escaped \\u003c) with the raw id, so learn() never filters the list", got, bobsID)
	}
	r = h.post(t, alice, `{"jsonrpc":"2.0","id":"a&b","method":"tools/call","params":{"name":"slow","task":{}}}`, nil)
	tk, _ := r.result(t)["task"].(map[string]any)
	if id, _ := tk["taskId"].(string); !strings.HasPrefix(id, handlePrefix) {
		t.Errorf("BUG: tools/call with id \"a&b\" created a task the client sees as %q, not a handle (the task is not recorded)", id)
	}
}

// TestIDWithHTMLCharactersSteerBound: the steer bound holds whatever the
// request ids look like.
func TestIDWithHTMLCharactersSteerBound(t *testing.T) {
	h := newHarness(t, Config{MaxSteerQueue: 1})
	handle := h.createTask(t, alice)
	accepted := 0
	for i := range 3 {
		body := `{"jsonrpc":"2.0","id":"<` + string(rune('a'+i)) + `>","method":"tasks/steer","params":{"taskId":"` + handle + `","message":"m"}}`
		if r := h.post(t, alice, body, nil); r.errCode(t) == 0 {
			accepted++
		}
	}
	if accepted != 1 {
		t.Errorf("BUG: %d steers with ids like \"<a>\" were accepted with MaxSteerQueue 1: the upstream's answer is not matched (forward.go sameID), so every accepted steer's reservation is given back by forward's deferred settle(false)", accepted)
	}
}

// TestCaseVariantTaskID: a body whose params hold both "taskId" (the
// upstream's, and the one Warden rewrites) and a case variant ("TaskId",
// read by Parse's case-insensitive decoding) must not let one principal act
// on another's task.
func TestCaseVariantTaskID(t *testing.T) {
	h := newHarness(t, Config{})
	alices := h.createTask(t, alice)
	victim := h.upstreamID(t, alice, alices)
	mine := h.createTask(t, bob)
	for _, tc := range []struct{ name, params string }{
		{"own handle in TaskId", `{"taskId":"` + victim + `","TaskId":"` + mine + `"}`},
		{"any string in TaskId, a prefix elsewhere", `{"taskId":"` + victim + `","TaskId":"x","_meta":{"note":"` + handlePrefix + `"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received("tasks/cancel"))
			body := `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":` + tc.params + `}`
			r := h.post(t, bob, body, nil)
			calls := h.up.received("tasks/cancel")[before:]
			if len(calls) != 0 {
				t.Errorf("BUG: bob's %s reached the upstream as a cancel of task %v (alice's); answer %s; want -32602 Task not found and no upstream call", body, calls[0].params["taskId"], r.body)
			} else if r.errMessage(t) != "Task not found" && r.errCode(t) != mcp.ErrInvalidRequest {
				t.Errorf("answer %s", r.body)
			}
		})
	}
	if owner, _ := taskOwner(h.e, victim); owner != alice {
		t.Errorf("BUG: Warden now records %q as the owner of alice's task %s", owner, victim)
	}
}

func TestServe(t *testing.T) {
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	srv, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: upSrv.URL + "/mcp", Plaintext: true}}, newEnforcer(t), testKey, upSrv.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	req, _ := http.NewRequest(http.MethodPost, "http://"+lis.Addr().String()+"/mcp", strings.NewReader(rpc(1, "ping", nil)))
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	http.DefaultClient.CloseIdleConnections()

	t.Run("TLS files missing", func(t *testing.T) {
		s, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: upSrv.URL, CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem"}}, newEnforcer(t), testKey, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Serve(t.Context(), lis); err == nil {
			t.Fatal("Serve without a certificate succeeded")
		}
	})
}

// TestLastEventID: a stream is resumed only from an event id Warden gave
// the same principal in the same session; the upstream gets the raw id, and
// is not asked at all otherwise.
func TestLastEventID(t *testing.T) {
	h := newHarness(t, Config{})
	mine := h.srv.handles.sealIn(kindEvent, alice, "", "7")
	for _, tc := range []struct {
		name, value string
		status      int
		upstream    string // the Last-Event-ID the upstream gets; "" not asked
	}{
		{"own event id", mine, http.StatusOK, "7"},
		{"another principal's", h.srv.handles.sealIn(kindEvent, bob, "", "7"), http.StatusBadRequest, ""},
		{"another session's", h.srv.handles.sealIn(kindEvent, alice, "up-sess-9", "7"), http.StatusBadRequest, ""},
		{"a raw upstream event id", "7", http.StatusBadRequest, ""},
		{"a task handle", h.srv.handles.seal(kindTask, alice, "7"), http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.calls)
			r := h.do(t, http.MethodGet, "/mcp", alice, "", hdr{"Last-Event-ID": tc.value})
			if r.status != tc.status {
				t.Fatalf("HTTP %d %s, want %d", r.status, r.body, tc.status)
			}
			h.up.mu.Lock()
			calls := h.up.calls[before:]
			h.up.mu.Unlock()
			if tc.upstream == "" {
				if len(calls) != 0 || r.errCode(t) != mcp.ErrInvalidRequest {
					t.Fatalf("the upstream was asked (%d calls), answer %s", len(calls), r.body)
				}
				return
			}
			if len(calls) != 1 || calls[0].header.Get("Last-Event-ID") != tc.upstream {
				t.Fatalf("upstream calls %+v, want one with Last-Event-ID %s", calls, tc.upstream)
			}
			for _, v := range r.ids {
				if _, ok := h.srv.handles.openIn(kindEvent, alice, "", v); !ok {
					t.Fatalf("event id %q sent to alice is not sealed to her", v)
				}
			}
		})
	}
}

// TestRefusedBeforeTheUpstream: requests Warden would not decide, or that
// carry a routing header twice, never reach the upstream.
func TestRefusedBeforeTheUpstream(t *testing.T) {
	h := newHarness(t, Config{})
	handle := h.createTask(t, alice)
	send := func(t *testing.T, body string, headers http.Header) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, h.front.URL+"/mcp", strings.NewReader(body))
		req.Header = headers
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	get := rpc(1, "tasks/get", map[string]any{"taskId": handle})
	for _, tc := range []struct {
		name    string
		body    string
		headers http.Header
		method  string
	}{
		{"tasks/cancel as a notification", rpc(nil, "tasks/cancel", map[string]any{"taskId": handle}), http.Header{}, "tasks/cancel"},
		{"tools/call as a notification", rpc(nil, "tools/call", map[string]any{"name": "slow", "task": map[string]any{}}), http.Header{}, "tools/call"},
		{"two Mcp-Name values", get, http.Header{"Mcp-Name": {handle, "task-1"}}, "tasks/get"},
		{"two Mcp-Method values", get, http.Header{"Mcp-Method": {"tasks/get", "tasks/cancel"}}, "tasks/get"},
		{"two protocol versions", get, http.Header{"Mcp-Protocol-Version": {"2025-11-25", "2026-07-28"}}, "tasks/get"},
		{"two session ids", get, http.Header{"Mcp-Session-Id": {"a", "b"}}, "tasks/get"},
		{"id 1.0", `{"jsonrpc":"2.0","id":1.0,"method":"tasks/list"}`, http.Header{}, "tasks/list"},
		{"Method beside method", `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tasks/cancel","params":{"taskId":"` + handle + `"}}`, http.Header{}, "ping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received(tc.method))
			status, body := send(t, tc.body, tc.headers)
			if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32600`) {
				t.Fatalf("HTTP %d %s, want 400 -32600", status, body)
			}
			if n := len(h.up.received(tc.method)) - before; n != 0 {
				t.Fatalf("the upstream received %d %s", n, tc.method)
			}
		})
	}
}

// TestStreamEndsAtCredentialExpiry: an event stream is closed when the
// credential it was opened with expires.
func TestStreamEndsAtCredentialExpiry(t *testing.T) {
	closed := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // an open stream, until Warden closes it
		close(closed)
	}))
	defer up.Close()
	s, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: up.URL + "/mcp", Plaintext: true}}, newEnforcer(t), testKey, up.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	x := &exchange{s: s, principal: alice, expiry: time.Now().Add(300 * time.Millisecond)}
	req := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	rec := httptest.NewRecorder()
	start := time.Now()
	done := make(chan struct{})
	go func() { s.forward(rec, req, x, nil, ""); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived the credential by seconds")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("the stream closed after %v, before the credential expired", d)
	}
	<-closed
	if !strings.Contains(rec.Body.String(), "notifications/message") {
		t.Fatalf("the event before expiry was not delivered: %q", rec.Body.String())
	}
}

// TestAnswerContentTypes: an answer is filtered whatever type the upstream
// labels it with, as long as a client could read it as JSON.
func TestAnswerContentTypes(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body string
		status         int
		want           string // in the body Warden sends
	}{
		{"json", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-x"}}`, 200, `-32603`},
		{"json in upper case", "Application/JSON; charset=utf-8", `{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-x"}}`, 200, `-32603`},
		{"json labelled text", "text/plain", `{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-x"}}`, 200, `-32603`},
		{"a batch labelled text", "text/plain", `[{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-x"}}]`, 502, `-32603`},
		{"another id", "application/json", `{"jsonrpc":"2.0","id":2,"result":{}}`, 502, `-32603`},
		{"plain text", "text/plain", `OK`, 200, `OK`},
		{"own answer", "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`, 200, `"result":{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				fmt.Fprint(w, tc.body)
			}))
			defer up.Close()
			h := newHarnessFor(t, Config{}, newFakeUpstream(), up)
			r := h.post(t, alice, rpc(1, "ping", nil), nil)
			if r.status != tc.status || !strings.Contains(string(r.body), tc.want) || strings.Contains(string(r.body), "t-x") {
				t.Fatalf("HTTP %d %s, want %d with %s", r.status, r.body, tc.status, tc.want)
			}
		})
	}
}

// TestCredentialHeaders: the credential the MCP server sees is the one
// Warden decided on. Two Authorization headers, or Authorization and
// x-macp-token naming different tokens, are refused before the upstream;
// a client's x-warden-principal is refused too (the gate's identity rule).
func TestCredentialHeaders(t *testing.T) {
	h := newHarness(t, Config{})
	send := func(set func(http.Header)) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.front.URL+"/mcp", strings.NewReader(rpc(1, "ping", nil)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		set(req.Header)
		resp, err := h.front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, set := range map[string]func(http.Header){
		"two Authorization headers": func(hd http.Header) {
			hd.Add("Authorization", "Bearer "+alice)
			hd.Add("Authorization", "Bearer "+bob)
		},
		"a comma-joined Authorization": func(hd http.Header) { hd.Set("Authorization", "Bearer "+alice+", Bearer "+bob) },
		"Authorization and another x-macp-token": func(hd http.Header) {
			hd.Set("Authorization", "bearer "+bob)
			hd.Set("X-Macp-Token", alice)
		},
	} {
		before := len(h.up.received(""))
		if got := send(set); got != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401", name, got)
		}
		if len(h.up.received("")) != before {
			t.Errorf("%s: the upstream was called", name)
		}
	}
	before := len(h.up.received(""))
	if got := send(func(hd http.Header) {
		hd.Set("Authorization", "bearer "+alice) // the scheme is case-insensitive
		hd.Set("X-Warden-Principal", bob)
	}); got != http.StatusBadRequest {
		t.Errorf("a client's x-warden-principal: HTTP %d, want 400", got)
	}
	if got := send(func(hd http.Header) { hd.Set("Authorization", "bearer "+alice) }); got != http.StatusOK {
		t.Fatalf("lower-case bearer: HTTP %d", got)
	}
	if calls := h.up.received(""); len(calls) != before+1 {
		t.Fatalf("the upstream got %d calls, want 1", len(calls)-before)
	}
}

// TestHTTPMethods: only Streamable HTTP's methods reach the server, and GET
// and DELETE only without a body.
func TestHTTPMethods(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct {
		method, body string
		want         int
	}{
		{http.MethodPut, rpc(1, "tasks/cancel", map[string]any{"taskId": "x"}), http.StatusMethodNotAllowed},
		{http.MethodPatch, "", http.StatusMethodNotAllowed},
		{http.MethodGet, rpc(1, "tasks/cancel", map[string]any{"taskId": "x"}), http.StatusBadRequest},
		{http.MethodDelete, rpc(1, "tasks/cancel", map[string]any{"taskId": "x"}), http.StatusBadRequest},
	} {
		before := len(h.up.received(""))
		if r := h.do(t, tc.method, "/mcp", alice, tc.body, nil); r.status != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.method, r.status, tc.want)
		}
		if len(h.up.received("")) != before {
			t.Errorf("%s: the upstream was called", tc.method)
		}
	}
}

func TestDefaultHosts(t *testing.T) {
	loopback := []string{"localhost", "127.0.0.1", "[::1]"}
	for _, tc := range []struct {
		listen string
		want   []string
	}{
		{"127.0.0.1:3001", loopback},
		{"[::1]:3001", loopback},
		{"localhost:3001", loopback},
		{"0.0.0.0:3001", loopback},
		{":3001", loopback},
		{"10.0.0.5:3001", []string{"10.0.0.5"}},
		{"[2001:db8::5]:3001", []string{"[2001:db8::5]"}},
		{"mcp.example:3001", nil},
		{"", nil},
	} {
		if got := defaultHosts(tc.listen); !slices.Equal(got, tc.want) {
			t.Errorf("defaultHosts(%q) = %q, want %q", tc.listen, got, tc.want)
		}
	}
}

// TestContentEncodingRefused: a body with a Content-Encoding other than
// identity is refused 415 and never forwarded: the server may inflate other
// bytes than Warden decided on (Node's body-parser inflates gzip, deflate
// and br), as A2A's sidecar and ext_authz refuse it.
func TestContentEncodingRefused(t *testing.T) {
	h := newHarness(t, Config{})
	call := rpc(1, "tools/call", map[string]any{"name": "plain", "arguments": map[string]any{}})
	for _, tc := range []struct {
		coding string
		status int
	}{
		{"gzip", http.StatusUnsupportedMediaType},
		{"br", http.StatusUnsupportedMediaType},
		{"deflate", http.StatusUnsupportedMediaType},
		{"identity, gzip", http.StatusUnsupportedMediaType},
		{"identity", http.StatusOK},
	} {
		t.Run(tc.coding, func(t *testing.T) {
			before := len(h.up.received("tools/call"))
			r := h.post(t, alice, call, hdr{"Content-Encoding": tc.coding})
			if r.status != tc.status {
				t.Fatalf("HTTP %d %s, want %d", r.status, r.body, tc.status)
			}
			forwarded := len(h.up.received("tools/call")) - before
			if tc.status != http.StatusOK && (r.errCode(t) != mcp.ErrInvalidRequest || !strings.Contains(r.errMessage(t), "Content-Encoding") || forwarded != 0) {
				t.Fatalf("refusal %s, forwarded %d, want -32600 naming Content-Encoding, none forwarded", r.body, forwarded)
			}
			if tc.status == http.StatusOK && forwarded != 1 {
				t.Fatalf("identity: forwarded %d, want 1", forwarded)
			}
		})
	}
}

// TestChallengeFromConfiguration (issue 24 item 12): the 401 challenge is
// built from configuration, never from the request's path: a path that
// decodes to `",scope="admin` was written into WWW-Authenticate unescaped,
// and a client then asked for the scope the attacker chose. Any path but
// the endpoint is now 404, and the endpoint's challenge names the
// configured resource's metadata.
func TestChallengeFromConfiguration(t *testing.T) {
	cfg := Config{AuthorizationServers: []string{"https://as.example"}}
	cfg.Listen = "127.0.0.1:3001"
	h := newHarness(t, cfg)
	for _, path := range []string{`/mcp%22,scope=%22admin`, `/x%22,%20scope=%22admin%22,%20x=%22`, "/mcp/%0d%0aX-Evil:%201"} {
		r := h.do(t, http.MethodPost, path, "", rpc(1, "ping", nil), nil)
		if ch := r.header.Get("WWW-Authenticate"); r.status != http.StatusNotFound || ch != "" || r.header.Get("X-Evil") != "" {
			t.Errorf("POST %s: HTTP %d, WWW-Authenticate %q; want 404 without a challenge", path, r.status, ch)
		}
	}
	r := h.do(t, http.MethodPost, "/mcp", "", rpc(1, "ping", nil), nil)
	want := `Bearer resource_metadata="` + h.front.URL + `/.well-known/oauth-protected-resource/mcp"`
	if got := r.header.Get("WWW-Authenticate"); r.status != http.StatusUnauthorized || got != want {
		t.Errorf("POST /mcp: HTTP %d %q, want 401 %q", r.status, got, want)
	}
}

package mcp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/mcp"
)

// TestResume: an answer a server replays on a resumed stream (GET +
// Last-Event-ID after the POST's stream dropped, or SSE polling) reaches the
// request's owner, filtered as on the POST's stream (issue 24 item 13: the
// old code dropped it as an answer to no request, and the client waited
// until its timeout); nobody else can resume that stream, and answers on a
// stream that resumes no request are still dropped.
func TestResume(t *testing.T) {
	h := newHarness(t, Config{})
	h.createTask(t, alice) // her standalone stream has an event
	// Alice's tools/call stream: her event ids seal the request (id 5).
	r := h.post(t, alice, rpc(5, "tools/call", map[string]any{"name": "stream"}), nil)
	if len(r.ids) == 0 {
		t.Fatalf("no event id: %s", r.body)
	}
	mine := r.ids[0]
	standalone := h.do(t, http.MethodGet, "/mcp", alice, "", nil).ids
	legacy := h.srv.handles.sealIn(kindEvent, alice, "", "1") // an event handle of the old format

	bobsTask := h.upstreamID(t, bob, h.createTask(t, bob))
	answer := func(id any, result map[string]any) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": id, "result": result}
	}
	text := map[string]any{"content": []any{map[string]any{"type": "text", "text": "sum=3"}}}
	for _, tc := range []struct {
		name      string
		principal string
		lastID    string
		replay    []any
		status    int
		answered  bool // alice gets the answer to 5
		others    int  // messages besides the answer
	}{
		{name: "her answer, resumed", principal: alice, lastID: mine, status: http.StatusOK, answered: true,
			replay: []any{notification(bobsTask, mcp.StatusWorking), answer(6, text), answer(5, text)}},
		{name: "her answer naming a new task", principal: alice, lastID: mine, status: http.StatusOK, answered: true,
			replay: []any{answer(5, map[string]any{"task": task("task-new", mcp.StatusWorking)})}},
		{name: "another's answer to the same id", principal: alice, lastID: mine, status: http.StatusOK, answered: true,
			replay: []any{answer(5, map[string]any{"content": []any{}, "structuredContent": map[string]any{"taskId": bobsTask}})}},
		{name: "bob with her event id", principal: bob, lastID: mine, status: http.StatusBadRequest},
		{name: "the standalone stream resumes no request", principal: alice, lastID: firstOr(standalone), status: http.StatusOK,
			replay: []any{answer(5, text)}},
		{name: "an old event handle resumes no request", principal: alice, lastID: legacy, status: http.StatusOK,
			replay: []any{answer(5, text)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lastID == "" {
				t.Fatal("no event id to resume from")
			}
			h.up.configure(func(u *fakeUpstream) { u.replay = tc.replay })
			got := h.do(t, http.MethodGet, "/mcp", tc.principal, "", hdr{"Last-Event-ID": tc.lastID})
			if got.status != tc.status {
				t.Fatalf("HTTP %d %s, want %d", got.status, got.body, tc.status)
			}
			if tc.status != http.StatusOK {
				if strings.Contains(string(got.body), "sum=3") {
					t.Fatalf("bob got alice's answer: %s", got.body)
				}
				return
			}
			var answers, others int
			for _, m := range got.msgs {
				switch {
				case m["id"] == float64(5):
					answers++
				default:
					others++
				}
			}
			if want := map[bool]int{true: 1}[tc.answered]; answers != want || others != tc.others {
				t.Fatalf("%d answers to 5 and %d other messages, want %d and %d: %s", answers, others, want, tc.others, got.body)
			}
			if strings.Contains(string(got.body), bobsTask) || strings.Contains(string(got.body), "task-new") {
				t.Fatalf("an upstream task id reached alice: %s", got.body)
			}
			// Resumed again from what the resumed stream gave: the same
			// request.
			for _, v := range got.ids {
				id, ok := h.srv.handles.openIn(kindEvent, alice, "", v)
				if p := decodeResume(id); !ok || tc.lastID == mine && string(p.id) != "5" {
					t.Fatalf("event id %q opens to %+v", v, p)
				}
			}
		})
	}
	// The task the resumed answer created is hers, as from the POST's.
	if owner, known := taskOwner(h.e, "task-new"); !known || owner != alice {
		t.Fatalf("task-new: owner %q, known %v", owner, known)
	}
}

// TestEventIDLength: the length of an event handle does not follow the
// upstream id's, so a server's counter does not show through it.
func TestEventIDLength(t *testing.T) {
	s := unitServer(t)
	x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)
	lengths := map[int]bool{}
	for _, id := range []string{"1", "9", "10", "99", "100", "1000", "10000", "stream_1795789093461_64uydlyx"} {
		h, ok := x.eventID([]byte(id))
		if !ok {
			t.Fatalf("%q left out", id)
		}
		lengths[len(h)] = true
	}
	if len(lengths) != 1 {
		t.Fatalf("event handle lengths %v follow the upstream ids'", lengths)
	}
}

func firstOr(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func TestResumePoint(t *testing.T) {
	for _, p := range []resumePoint{
		{event: "e1"},
		{event: "stream_1_abc", id: []byte(`"req-1"`), method: "tools/call", taskID: "t"},
		{event: "", id: []byte("7"), method: "tasks/get"},
		{event: strings.Repeat("x", 300), id: []byte(strings.Repeat("9", 200)), method: "m"},
	} {
		plain := p.encode()
		if len(plain)%resumePad != 0 {
			t.Errorf("%+v: %d bytes, not padded", p, len(plain))
		}
		got := decodeResume(plain)
		if got.event != p.event || string(got.id) != string(p.id) || got.method != p.method || got.taskID != p.taskID {
			t.Errorf("%+v read back as %+v", p, got)
		}
	}
	for _, plain := range []string{"7", "", "\x00", "\x00\x05ab", "\x00\x01a\x01"} {
		if p := decodeResume(plain); p.id != nil || (plain != "" && plain[0] != 0 && p.event != plain) {
			t.Errorf("%q read as %+v", plain, p)
		}
	}
}

package audit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestAnswerOf: the response to the request's id is found in a JSON body
// and in an event stream behind notifications; an error answer with a null
// id (an HTTP refusal) counts; anything else is no answer.
func TestAnswerOf(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body string
		result         string // a member of the result, "" for none
		code           int
	}{
		{"json result", "application/json", `{"jsonrpc":"2.0","id":3,"result":{"status":"working"}}`, "status", 0},
		{"json error, null id", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`, "", -32001},
		{"sse after a notification", "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\",\"params\":{\"status\":\"x\"}}\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tasks\":[]}}\n\n", "tasks", 0},
		{"sse with CRLF", "text/event-stream; charset=utf-8", "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602,\"message\":\"Task not found\"}}\r\n\r\n", "", -32602},
		{"another id's result", "application/json", `{"jsonrpc":"2.0","id":4,"result":{"status":"working"}}`, "", 0},
		{"not JSON", "text/plain", "Forbidden", "", 0},
		{"empty stream", "text/event-stream", "event: ping\ndata:\n\n", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, rerr := answerOf(tc.ct, []byte(tc.body), 3)
			code := 0
			if rerr != nil {
				code = rerr.Code
			}
			if _, ok := res[tc.result]; (tc.result != "") != ok || code != tc.code {
				t.Errorf("result %v, error %+v; want member %q, code %d", res, rerr, tc.result, tc.code)
			}
		})
	}
}

// TestEvidence: one line, no SDK prefix, no id of the run, clipped.
func TestEvidence(t *testing.T) {
	long := make([]rune, 150)
	for i := range long {
		long[i] = 'é'
	}
	for _, tc := range []struct {
		name string
		r    rpcReply
		ids  []string
		want string
	}{
		{"result", rpcReply{HTTP: 200, Result: map[string]any{}}, nil, "HTTP 200"},
		{"refusal without JSON-RPC", rpcReply{HTTP: 403}, nil, "HTTP 403"},
		{"SDK prefix and newline", rpcReply{HTTP: 200, Err: &rpcError{-32602, "MCP error -32602: Invalid task creation result: [\n {"}}, nil, "HTTP 200, -32602 Invalid task creation result"},
		{"id scrubbed", rpcReply{HTTP: 400, Err: &rpcError{-32020, `Mcp-Name "x" does not match "abc123"`}}, []string{"abc123", ""}, `HTTP 400, -32020 Mcp-Name "x" does not match "[id]"`},
		{"clipped by runes", rpcReply{HTTP: 200, Err: &rpcError{1, string(long)}}, nil, "HTTP 200, 1 " + string(long[:100]) + "…"},
	} {
		if got := tc.r.evidence(tc.ids...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDurationName(t *testing.T) {
	for name, want := range map[string]bool{"delay_ms": true, "step_ms": true, "Duration": true, "sleep": true, "a": false, "text": false, "steps": false} {
		if durationName(name) != want {
			t.Errorf("durationName(%q) = %v", name, !want)
		}
	}
}

// TestPostRPCOpenStream: an event stream that stays open after the answer
// (A2A's SubscribeToTask on a working task) is read up to the answer, not
// until the server ends it.
func TestPostRPCOpenStream(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"id\":\"t1\"}}\n\n")
		w.(http.Flusher).Flush()
		select { // the stream stays open
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	r, _, err := postRPC(ctx, srv.Client(), Endpoint{Name: "direct", URL: srv.URL, Budget: NewBudget(1)}, "tok", "SubscribeToTask", map[string]any{"id": "t1"}, 1, nil)
	if err != nil || !r.ok() || r.Result["id"] != "t1" {
		t.Fatalf("reply %+v, err %v", r, err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("postRPC returned after %v: it read the open stream past the answer", took)
	}
}

package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxAnswer bounds the bytes read of one answer.
const maxAnswer = 4 << 20

// rpcReply is one answer: its HTTP status and the JSON-RPC result or error
// (neither for an HTTP refusal without a JSON-RPC body).
type rpcReply struct {
	HTTP   int
	Result map[string]any
	Err    *rpcError
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ok reports a JSON-RPC result.
func (r rpcReply) ok() bool { return r.Result != nil && r.Err == nil }

// code is the JSON-RPC error code, 0 for a result or none.
func (r rpcReply) code() int {
	if r.Err == nil {
		return 0
	}
	return r.Err.Code
}

// evidence is the answer on one line, what it says about ids replaced by
// what they are, so that the same target gives the same line.
func (r rpcReply) evidence(scrub ...string) string {
	s := fmt.Sprintf("HTTP %d", r.HTTP)
	if r.Err != nil {
		msg, _, _ := strings.Cut(r.Err.Message, "\n")
		for strings.HasPrefix(msg, "MCP error ") { // the TypeScript SDK prefixes its codes
			if _, rest, ok := strings.Cut(msg, ": "); ok {
				msg = rest
			} else {
				break
			}
		}
		for _, id := range scrub {
			if id != "" {
				msg = strings.ReplaceAll(msg, id, "[id]")
			}
		}
		msg = clip(strings.TrimRight(msg, " :[{"), 100)
		s += fmt.Sprintf(", %d %s", r.Err.Code, msg)
	}
	return s
}

// postRPC sends one JSON-RPC message over HTTP to e's URL as the principal
// of token: a request with id when id > 0, else a notification; params nil
// is none. Headers: Content-Type, Accept (JSON or an event stream) and the
// bearer credential, then hdr ("" deletes one; "Host" sets the request's
// Host). It takes one request from e's budget first, and reads the answer
// (bounded): a JSON body whole, an event stream up to the response to id.
func postRPC(ctx context.Context, hc *http.Client, e Endpoint, token, method string, params any, id int, hdr map[string]string) (rpcReply, http.Header, error) {
	if err := e.Budget.Take(); err != nil {
		return rpcReply{}, nil, err
	}
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if id > 0 {
		msg["id"] = id
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return rpcReply{}, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return rpcReply{}, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		switch {
		case http.CanonicalHeaderKey(k) == "Host":
			req.Host = v // the request's Host, not a header Go would drop
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return rpcReply{}, nil, fmt.Errorf("%s %s: %w", method, e.Name, err)
	}
	defer resp.Body.Close()
	r := rpcReply{HTTP: resp.StatusCode}
	answer := io.LimitReader(resp.Body, maxAnswer)
	if ct := resp.Header.Get("Content-Type"); id > 0 && strings.HasPrefix(ct, "text/event-stream") {
		// An event stream may stay open after the answer (A2A's
		// SubscribeToTask, a task's updates): read up to the answer only.
		sc := bufio.NewScanner(answer)
		sc.Buffer(make([]byte, 0, 64<<10), maxAnswer)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(bytes.TrimRight(sc.Bytes(), "\r"), []byte("data:")); ok {
				if r.Result, r.Err = answerOf("application/json", d, id); r.Result != nil || r.Err != nil {
					return r, resp.Header, nil
				}
			}
		}
		if err := sc.Err(); err != nil {
			return rpcReply{}, nil, fmt.Errorf("%s %s: reading the answer: %w", method, e.Name, err)
		}
		return r, resp.Header, nil
	}
	b, err := io.ReadAll(answer)
	if err != nil {
		return rpcReply{}, nil, fmt.Errorf("%s %s: reading the answer: %w", method, e.Name, err)
	}
	if id > 0 {
		r.Result, r.Err = answerOf(resp.Header.Get("Content-Type"), b, id)
	}
	return r, resp.Header, nil
}

// answerOf finds the response to id in a body: the body itself, or the data
// of the event holding it in an event stream (notifications and server
// requests before it are passed over).
func answerOf(contentType string, b []byte, id int) (map[string]any, *rpcError) {
	msgs := [][]byte{b}
	if strings.HasPrefix(contentType, "text/event-stream") {
		msgs = nil
		for _, l := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimRight(l, "\r"), []byte("data:")); ok && len(bytes.TrimSpace(d)) > 0 {
				msgs = append(msgs, d)
			}
		}
	}
	for _, m := range msgs {
		var v struct {
			ID     json.RawMessage `json:"id"`
			Result map[string]any  `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if json.Unmarshal(m, &v) != nil || (v.Result == nil && v.Error == nil) {
			continue
		}
		if string(v.ID) == fmt.Sprint(id) || v.Error != nil {
			return v.Result, v.Error
		}
	}
	return nil, nil
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

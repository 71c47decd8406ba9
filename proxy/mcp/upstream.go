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

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// call sends Warden's own request (tasks/get for a status, tools/list for
// taskSupport) upstream with the caller's credentials (none with strip, as
// forward sends none), session and protocol version, and returns the result,
// read for its members (nil for an error answer): the names the caller
// reads from it are held as every answer's are (its Err). The answer's
// bytes are charged to held, the share of the answer budget they are held
// in (security.md X1).
func (s *Server) call(ctx context.Context, r *http.Request, strip bool, held *listener.Hold, sid string, callerParams json.RawMessage, method string, params map[string]any) (*jsonrpc.Object, error) {
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
	relay.Behalf(out, r.Header, strip, []string{"Authorization", "X-Macp-Token", "Mcp-Protocol-Version"}, credentialHeaders...)
	out.Header.Set("Content-Type", "application/json")
	out.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		out.Header.Set("Mcp-Session-Id", sid)
	}
	if r.Header.Get("Mcp-Protocol-Version") >= mcp.Era2026 {
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
	own := relay.Own{Server: "MCP server", Request: method, Types: ownTypes, Limit: "mcp.max_response_bytes", Max: s.cfg.MaxResponseBytes, Held: held}
	if err := own.Check(resp); err != nil {
		return nil, err
	}
	var found *jsonrpc.Object
	pick := func(data []byte) ([]byte, bool) {
		// The answer to Warden's request: the message whose id is id, read
		// one way only.
		if m := read(data); m != nil && m.Err() == nil {
			if v, _ := m.Str("id"); v == id {
				found = read(bytes.Clone(data)) // data may be the reader's buffer
			}
		}
		return data, true
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		err = relay.CopyEvents(io.Discard, func() {}, own.Body(resp), relay.Events{Data: pick, Max: relay.EventMax(s.cfg.MaxResponseBytes), Readers: &s.sse})
	} else {
		var b []byte
		if b, err = relay.ReadBody(own.Body(resp), s.cfg.MaxResponseBytes); err == nil {
			pick(b)
		}
	}
	var over *relay.Unusable
	if err = own.Over(err); errors.As(err, &over) {
		return nil, err // an answer may precede an event over the bound: none is read
	}
	if found == nil {
		if err == nil {
			err = errors.New("no answer")
		}
		return nil, fmt.Errorf("%s upstream (HTTP %d): %w", method, resp.StatusCode, err)
	}
	res, _ := found.Obj("result")
	return res, nil // a JSON-RPC error gives a nil result
}

// ownTypes are the media types of an answer to Warden's own request: one
// JSON-RPC message or an event stream (Streamable HTTP).
var ownTypes = []string{"application/json", "text/event-stream"}

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
// (tasks/get), taking a place among the principal's requests while it is
// read (listener.Streams.Own, security.md X3).
func (s *Server) readStatus(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, id string) (tasks.View, error) {
	held, busy := s.streams.Own(principal)
	if busy != nil {
		return tasks.View{}, busy
	}
	defer held.Release()
	res, err := s.call(ctx, r, strip, held, sid, callerParams, mcp.MethodGet, map[string]any{"taskId": id})
	if err != nil {
		return tasks.View{}, err
	}
	var v tasks.View
	v.Status, _ = str(res, "status")
	v.Updated, _ = str(res, "lastUpdatedAt")
	if res != nil && res.Err() != nil {
		return tasks.View{}, fmt.Errorf("tasks/get upstream: %w", errAmbiguous)
	}
	return v, nil
}

package audit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The MCP protocol versions the client speaks: 2025-11-25 with sessions
// (initialize, Mcp-Session-Id) and 2026-07-28, stateless, every request
// carrying its version and capabilities in _meta and its routing headers.
const (
	mcpSessions  = "2025-11-25"
	mcpStateless = "2026-07-28"
	mcpTasksExt  = "io.modelcontextprotocol/tasks"
)

// mcpConn is one principal's connection to an MCP endpoint: a session
// (2025-11-25) or the stateless protocol (2026-07-28). Every request is
// taken from the endpoint's budget first.
type mcpConn struct {
	e       Endpoint
	p       Principal
	hc      *http.Client
	version string
	session string
	caps    map[string]any // the server's capabilities
	nextID  int
}

// dialMCP opens a connection as p: a 2025-11-25 session when the server
// answers initialize, else the stateless 2026-07-28 protocol when it
// answers server/discover.
func dialMCP(ctx context.Context, e Endpoint, p Principal) (*mcpConn, error) {
	c := &mcpConn{e: e, p: p, hc: &http.Client{Timeout: 15 * time.Second}, version: mcpSessions}
	r, hdr, err := c.post(ctx, "initialize", map[string]any{
		"protocolVersion": mcpSessions,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "warden-audit", "version": "1"},
	}, nil, true)
	if err != nil {
		return nil, err
	}
	if r.ok() {
		c.caps, _ = r.Result["capabilities"].(map[string]any)
		c.session = hdr.Get("Mcp-Session-Id")
		if v, _ := r.Result["protocolVersion"].(string); v != "" {
			c.version = v
		}
		if _, _, err := c.post(ctx, "notifications/initialized", nil, nil, false); err != nil {
			return nil, err
		}
		return c, nil
	}
	c.version = mcpStateless
	d, _, err := c.post(ctx, "server/discover", map[string]any{}, nil, true)
	if err != nil {
		return nil, err
	}
	if !d.ok() {
		return nil, fmt.Errorf("%s as %s: initialize answered %s and server/discover %s", e.Name, p.Name, r.evidence(), d.evidence())
	}
	c.caps, _ = d.Result["capabilities"].(map[string]any)
	return c, nil
}

// stateless reports the 2026-07-28 protocol.
func (c *mcpConn) stateless() bool { return c.version == mcpStateless }

// offers reports a SEP-2669/SEP-2663 interaction method ("steer", "pause",
// "update") the server announces in its tasks extension.
func (c *mcpConn) offers(feature string) bool {
	ext, _ := c.caps["extensions"].(map[string]any)
	tasks, ok := ext[mcpTasksExt].(map[string]any)
	if !ok {
		return false
	}
	if feature == "update" {
		return true // tasks/update is the extension's own method
	}
	v, _ := tasks[feature].(bool)
	return v
}

// call sends a request and returns its answer.
func (c *mcpConn) call(ctx context.Context, method string, params map[string]any, hdr map[string]string) (rpcReply, error) {
	r, _, err := c.post(ctx, method, params, hdr, true)
	return r, err
}

// post sends one message (a request when request, else a notification)
// with the protocol's headers, then hdr ("" deletes a header).
func (c *mcpConn) post(ctx context.Context, method string, params map[string]any, hdr map[string]string, request bool) (rpcReply, http.Header, error) {
	if c.stateless() {
		if params == nil {
			params = map[string]any{}
		}
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    mcpStateless,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcpTasksExt: map[string]any{}}},
		}
	}
	h := map[string]string{}
	if method != "initialize" {
		h["MCP-Protocol-Version"] = c.version
	}
	if c.session != "" {
		h["Mcp-Session-Id"] = c.session
	}
	if c.stateless() {
		h["Mcp-Method"] = method
		if id, ok := params["taskId"].(string); ok {
			h["Mcp-Name"] = id
		} else if name, ok := params["name"].(string); ok {
			h["Mcp-Name"] = name
		}
	}
	for k, v := range hdr {
		h[k] = v
	}
	id := 0
	if request {
		c.nextID++
		id = c.nextID
	}
	var p any
	if params != nil {
		p = params
	}
	return postRPC(ctx, c.hc, c.e, c.p.Token, method, p, id, h)
}

// errNoTaskTool is dialMCP's answer for a server with no tool to create a
// task with.
var errNoTaskTool = errors.New("the server lists no tool that runs as a task")

// taskTool is how a principal creates tasks on a server: a tool that runs
// as a task and the arguments for a short or a long run.
type taskTool struct {
	name        string
	short, long map[string]any
}

// findTaskTool picks the first tool listed as task-capable (taskSupport
// optional or required; under 2026-07-28, where the server decides, the
// first with a duration argument) and fills its arguments from its input
// schema: a duration (a number named like delay_ms, step_ms, duration,
// sleep) short or long, other required members their default, minimum, 1,
// "warden-audit" or false.
func (c *mcpConn) findTaskTool(ctx context.Context) (taskTool, error) {
	tools, err := c.tools(ctx)
	if err != nil {
		return taskTool{}, err
	}
	for _, t := range tools {
		support := taskSupport(t)
		if !c.stateless() && support != "optional" && support != "required" {
			continue
		}
		schema, _ := t["inputSchema"].(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		short, long := map[string]any{}, map[string]any{}
		timed := false
		required := map[string]bool{}
		if rs, ok := schema["required"].([]any); ok {
			for _, r := range rs {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
		for name, raw := range props {
			p, _ := raw.(map[string]any)
			typ, _ := p["type"].(string)
			if (typ == "number" || typ == "integer") && durationName(name) {
				short[name], long[name] = 200, 10000
				timed = true
				continue
			}
			if !required[name] {
				continue
			}
			v := p["default"]
			switch {
			case v != nil:
			case typ == "number" || typ == "integer":
				v = 1
				if m, ok := p["minimum"]; ok {
					v = m
				}
			case typ == "boolean":
				v = false
			default:
				v = "warden-audit"
			}
			short[name], long[name] = v, v
		}
		if c.stateless() && !timed {
			continue
		}
		name, _ := t["name"].(string)
		return taskTool{name: name, short: short, long: long}, nil
	}
	return taskTool{}, errNoTaskTool
}

func durationName(s string) bool {
	s = strings.ToLower(s)
	for _, w := range []string{"delay", "_ms", "duration", "sleep", "wait"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// tools lists the server's tools (the first page).
func (c *mcpConn) tools(ctx context.Context) ([]map[string]any, error) {
	r, err := c.call(ctx, "tools/list", map[string]any{}, nil)
	if err != nil {
		return nil, err
	}
	if !r.ok() {
		return nil, fmt.Errorf("tools/list: %s", r.evidence())
	}
	raw, _ := r.Result["tools"].([]any)
	var out []map[string]any
	for _, t := range raw {
		if m, ok := t.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// taskSupport is a tool's execution.taskSupport ("" when it declares none).
func taskSupport(tool map[string]any) string {
	ex, _ := tool["execution"].(map[string]any)
	s, _ := ex["taskSupport"].(string)
	return s
}

// createTask runs tool as a task, long or short, and returns the task's ID.
func (c *mcpConn) createTask(ctx context.Context, tool taskTool, long bool) (string, error) {
	args := tool.short
	if long {
		args = tool.long
	}
	params := map[string]any{"name": tool.name, "arguments": args}
	if !c.stateless() {
		params["task"] = map[string]any{"ttl": 60000}
	}
	r, err := c.call(ctx, "tools/call", params, nil)
	if err != nil {
		return "", err
	}
	id := taskID(r.Result)
	if !r.ok() || id == "" {
		return "", fmt.Errorf("creating a task with %s: %s", tool.name, r.evidence())
	}
	return id, nil
}

// taskID is the task of a result: result.task.taskId (2025-11-25) or
// result.taskId (2026-07-28).
func taskID(res map[string]any) string {
	if t, ok := res["task"].(map[string]any); ok {
		id, _ := t["taskId"].(string)
		return id
	}
	id, _ := res["taskId"].(string)
	return id
}

// status is a task's status as its owner sees it ("" when tasks/get fails).
func (c *mcpConn) status(ctx context.Context, id string) (string, error) {
	r, err := c.call(ctx, "tasks/get", map[string]any{"taskId": id}, nil)
	if err != nil {
		return "", err
	}
	s, _ := r.Result["status"].(string)
	return s, nil
}

// errStatusTimeout is waitStatus's error when the task never reached the
// status.
var errStatusTimeout = errors.New("task status not reached")

// waitStatus polls tasks/get until the task has one of want (at most polls
// times, 150 ms apart) and returns the last status seen.
func (c *mcpConn) waitStatus(ctx context.Context, id string, polls int, want ...string) (string, error) {
	var last string
	for range polls {
		s, err := c.status(ctx, id)
		if err != nil {
			return "", err
		}
		last = s
		if slices.Contains(want, s) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
	}
	return last, fmt.Errorf("%w: the task never became %s (last %q)", errStatusTimeout, strings.Join(want, " or "), last)
}

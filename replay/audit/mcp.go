package audit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// mcpSteerFlood is how many steer messages the flood attack sends to one
// working task: more than Warden's default mcp.max_steer_queue (32).
const mcpSteerFlood = 40

// mcpAttacks is the MCP tasks attack set (Streamable HTTP, 2025-11-25
// sessions or the 2026-07-28 tasks extension). The victim creates its own
// tasks with a task-capable tool of the server; the attacker reaches for
// them from a session of its own.
func mcpAttacks() []Attack {
	foreign := func(method, feature string, prep mcpPrep, params func(id string) map[string]any) Attack {
		return Attack{
			ID:       "mcp-foreign-" + strings.ReplaceAll(method, "/", "-"),
			Protocol: "mcp",
			Title:    "another principal's `" + method + "`",
			Run: func(ctx context.Context, e Endpoint) Outcome {
				return mcpForeign(ctx, e, method, feature, prep, params)
			},
		}
	}
	id := func(id string) map[string]any { return map[string]any{"taskId": id} }
	return []Attack{
		foreign("tasks/get", "", mcpWorking, id),
		foreign("tasks/result", "", mcpCompleted, id),
		foreign("tasks/cancel", "", mcpWorking, id),
		foreign("tasks/update", "update", mcpWorking, func(id string) map[string]any {
			return map[string]any{"taskId": id, "inputResponses": map[string]any{"confirm": map[string]any{"action": "accept"}}}
		}),
		foreign("tasks/steer", "steer", mcpWorking, func(id string) map[string]any {
			return map[string]any{"taskId": id, "message": "warden-audit: steered by another principal"}
		}),
		foreign("tasks/pause", "pause", mcpWorking, id),
		foreign("tasks/resume", "pause", mcpPaused, id),
		{ID: "mcp-tasks-list-foreign", Protocol: "mcp", Title: "`tasks/list` shows another principal's tasks", Run: mcpListForeign},
		{ID: "mcp-task-to-forbidden-tool", Protocol: "mcp", Title: "task request (`params.task`) to a `taskSupport: forbidden` tool", Run: mcpForbiddenTool},
		{ID: "mcp-plain-call-required-tool", Protocol: "mcp", Title: "plain call of a `taskSupport: required` tool", Run: mcpRequiredTool},
		{ID: "mcp-steer-completed", Protocol: "mcp", Title: "`tasks/steer` on a completed task", Run: mcpOwn("steer", mcpCompleted, "tasks/steer",
			map[string]any{"message": "warden-audit: too late"})},
		{ID: "mcp-resume-working", Protocol: "mcp", Title: "`tasks/resume` of a working task", Run: mcpOwn("pause", mcpWorking, "tasks/resume", nil)},
		{ID: "mcp-steer-flood", Protocol: "mcp", Title: fmt.Sprintf("steer flood: %d `tasks/steer` before the task reaches a safe point", mcpSteerFlood), Run: mcpSteerFlooding},
		{ID: "mcp-foreign-session", Protocol: "mcp", Title: "another principal's `Mcp-Session-Id`", Run: mcpForeignSession},
		{ID: "mcp-probe-task-ids", Protocol: "mcp", Title: "probing task IDs: another principal's task answered unlike a made-up ID", Run: mcpProbeIDs},
		{ID: "mcp-foreign-origin", Protocol: "mcp", Title: "foreign `Origin`", Run: mcpForeignOrigin(false)},
		{ID: "mcp-dns-rebinding", Protocol: "mcp", Title: "DNS rebinding: `Host` and `Origin` a name the server was not given", Run: mcpForeignOrigin(true)},
		{ID: "mcp-name-mismatch", Protocol: "mcp", Title: "`Mcp-Name` not equal to `params.taskId`", Run: mcpNameMismatch},
	}
}

// mcpPrep is the state the victim's new task is brought to before an
// attack: working (a long run), completed, or paused.
type mcpPrep int

const (
	mcpWorking mcpPrep = iota
	mcpCompleted
	mcpPaused
)

// long reports a task that must stay working for the attack.
func (p mcpPrep) long() bool { return p != mcpCompleted }

// reach brings the victim's task id to the state.
func (p mcpPrep) reach(ctx context.Context, c *mcpConn, id string) error {
	switch p {
	case mcpCompleted:
		_, err := c.waitStatus(ctx, id, 20, "completed")
		return err
	case mcpPaused:
		r, err := c.call(ctx, "tasks/pause", map[string]any{"taskId": id}, nil)
		if err != nil {
			return err
		}
		if !r.ok() {
			return fmt.Errorf("the victim could not pause its own task: %s", r.evidence(id))
		}
		// A pause takes effect at the task's next safe point, which may
		// be far: wait a little, then go on with the pause requested.
		_, err = c.waitStatus(ctx, id, 5, "paused")
		if errors.Is(err, errStatusTimeout) {
			err = nil
		}
		return err
	}
	return nil
}

// mcpVictimTask connects as the victim and creates its task, brought to
// prep's state. A missing feature or tool is a skip (why != "").
func mcpVictimTask(ctx context.Context, e Endpoint, feature string, prep mcpPrep) (c *mcpConn, id, why string, err error) {
	c, err = dialMCP(ctx, e, e.Victim())
	if err != nil {
		return nil, "", "", err
	}
	if feature != "" && !c.offers(feature) {
		return nil, "", featureWhy(feature), nil
	}
	tool, err := c.findTaskTool(ctx)
	if errors.Is(err, errNoTaskTool) {
		return nil, "", err.Error(), nil
	}
	if err != nil {
		return nil, "", "", err
	}
	if id, err = c.createTask(ctx, tool, prep.long()); err != nil {
		return nil, "", "", err
	}
	if err := prep.reach(ctx, c, id); err != nil {
		c.release(ctx, id, prep)
		return nil, "", "", err
	}
	return c, id, "", nil
}

// featureWhy is the skip of an interaction the server's capabilities do
// not announce.
func featureWhy(feature string) string {
	switch feature {
	case "update":
		return "the server does not offer tasks/update (its capabilities announce no " + mcpTasksExt + " extension)"
	case "pause":
		return "the server does not offer tasks/pause and tasks/resume (no \"pause\" in its " + mcpTasksExt + " capabilities)"
	}
	return fmt.Sprintf("the server does not offer tasks/%s (no %q in its %s capabilities)", feature, feature, mcpTasksExt)
}

// release cancels the victim's task when it was made to run long, so
// that the audit leaves no work behind (errors ignored: the task may have
// ended, the budget may be spent).
func (c *mcpConn) release(ctx context.Context, id string, prep mcpPrep) {
	if prep.long() {
		_, _ = c.call(ctx, "tasks/cancel", map[string]any{"taskId": id}, nil)
	}
}

// notOffered is the skip of a method the server answers -32601 to.
func notOffered(method string) Outcome {
	return Skip(fmt.Sprintf("the server does not offer %s (-32601 Method not found)", method))
}

// onVictimTask makes the victim's task (mcpVictimTask), plays attack on it
// and releases it; a setup that fails or cannot come about is the outcome.
func onVictimTask(ctx context.Context, e Endpoint, feature string, prep mcpPrep, attack func(victim *mcpConn, id string) Outcome) Outcome {
	victim, id, why, err := mcpVictimTask(ctx, e, feature, prep)
	if err != nil {
		return Failed(err)
	}
	if why != "" {
		return Skip(why)
	}
	defer victim.release(ctx, id, prep)
	return attack(victim, id)
}

// asAttacker is onVictimTask with the attacker's session open.
func asAttacker(ctx context.Context, e Endpoint, feature string, prep mcpPrep, attack func(victim, attacker *mcpConn, id string) Outcome) Outcome {
	return onVictimTask(ctx, e, feature, prep, func(victim *mcpConn, id string) Outcome {
		attacker, err := dialMCP(ctx, e, e.Attacker())
		if err != nil {
			return Failed(err)
		}
		return attack(victim, attacker, id)
	})
}

// mcpForeign: the attacker sends method on the victim's task. It worked
// when the server answered with a result, or (tasks/cancel) when the
// victim's task ends up cancelled.
func mcpForeign(ctx context.Context, e Endpoint, method, feature string, prep mcpPrep, params func(string) map[string]any) Outcome {
	return asAttacker(ctx, e, feature, prep, func(victim, attacker *mcpConn, id string) Outcome {
		r, err := attacker.call(ctx, method, params(id), nil)
		if err != nil {
			return Failed(err)
		}
		if r.ok() {
			return Succeed(r.evidence() + ", " + describe(r.Result))
		}
		if method == "tasks/cancel" {
			if s, err := victim.status(ctx, id); err == nil && s == "cancelled" {
				return Succeed(r.evidence(id) + ", yet the task is cancelled")
			}
		}
		// A refusal proves something only when the server offers the method:
		// the victim's own call tells.
		own, err := victim.call(ctx, method, params(id), nil)
		if err != nil {
			return Failed(err)
		}
		if own.code() == -32601 {
			return notOffered(method)
		}
		return Block(r.evidence(id))
	})
}

// describe sums up a result in a few words: a task's status, a tool's text.
func describe(res map[string]any) string {
	if s, ok := res["status"].(string); ok {
		return "task " + s
	}
	if t, ok := res["task"].(map[string]any); ok {
		if s, ok := t["status"].(string); ok {
			return "task " + s
		}
	}
	if content, ok := res["content"].([]any); ok {
		for _, c := range content {
			if m, ok := c.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					return fmt.Sprintf("the tool's result %q", clip(s, 40))
				}
			}
		}
	}
	if ts, ok := res["tasks"].([]any); ok {
		return fmt.Sprintf("%d tasks", len(ts))
	}
	return "acked"
}

// mcpListForeign: the attacker lists tasks; it worked when the victim's
// task is among them.
func mcpListForeign(ctx context.Context, e Endpoint) Outcome {
	return asAttacker(ctx, e, "", mcpWorking, func(victim, attacker *mcpConn, id string) Outcome {
		cursor := ""
		var first rpcReply
		for page := 0; page < 5; page++ {
			params := map[string]any{}
			if cursor != "" {
				params["cursor"] = cursor
			}
			r, err := attacker.call(ctx, "tasks/list", params, nil)
			if err != nil {
				return Failed(err)
			}
			if page == 0 {
				first = r
			}
			if !r.ok() {
				break
			}
			ts, _ := r.Result["tasks"].([]any)
			for _, t := range ts {
				if m, ok := t.(map[string]any); ok && m["taskId"] == id {
					return Succeed(r.evidence() + ", lists the other principal's task")
				}
			}
			if cursor, _ = r.Result["nextCursor"].(string); cursor == "" {
				return Block(r.evidence() + ", none of the other principal's tasks")
			}
		}
		if first.ok() {
			return Block(first.evidence() + ", none of the other principal's tasks in 5 pages")
		}
		own, err := victim.call(ctx, "tasks/list", map[string]any{}, nil)
		if err != nil {
			return Failed(err)
		}
		if own.code() == -32601 {
			return notOffered("tasks/list")
		}
		return Block(first.evidence())
	})
}

// mcpToolOf connects as the victim and finds a tool whose taskSupport is
// support.
func mcpToolOf(ctx context.Context, e Endpoint, support string) (*mcpConn, string, Outcome, bool) {
	c, err := dialMCP(ctx, e, e.Victim())
	if err != nil {
		return nil, "", Failed(err), false
	}
	if c.stateless() {
		return nil, "", Skip("tools declare no taskSupport under " + mcpStateless + " (the server decides)"), false
	}
	tools, err := c.tools(ctx)
	if err != nil {
		return nil, "", Failed(err), false
	}
	for _, t := range tools {
		if taskSupport(t) == support {
			name, _ := t["name"].(string)
			return c, name, Outcome{}, true
		}
	}
	return nil, "", Skip("the server lists no tool with taskSupport " + support), false
}

// mcpForbiddenTool: a task request to a tool that forbids tasks must get
// -32601 (MCP 2025-11-25); any other answer means the server took it.
func mcpForbiddenTool(ctx context.Context, e Endpoint) Outcome {
	c, name, o, ok := mcpToolOf(ctx, e, "forbidden")
	if !ok {
		return o
	}
	r, err := c.call(ctx, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}}, nil)
	if err != nil {
		return Failed(err)
	}
	if r.code() == -32601 {
		return Block(r.evidence())
	}
	if r.ok() {
		return Succeed(r.evidence() + ", " + describe(r.Result))
	}
	return Succeed(r.evidence() + "; not -32601: the server took the task request")
}

// mcpRequiredTool: a plain call of a tool that requires a task; it worked
// when the tool answered without an error.
func mcpRequiredTool(ctx context.Context, e Endpoint) Outcome {
	c, name, o, ok := mcpToolOf(ctx, e, "required")
	if !ok {
		return o
	}
	r, err := c.call(ctx, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}}, nil)
	if err != nil {
		return Failed(err)
	}
	if r.ok() {
		if isErr, _ := r.Result["isError"].(bool); isErr {
			return Block(r.evidence() + ", an isError result")
		}
		return Succeed(r.evidence() + ", " + describe(r.Result))
	}
	return Block(r.evidence())
}

// mcpOwn: the victim sends method (with extra params) on its own task in a
// state where SEP-2669 forbids it; it worked when the server acked.
func mcpOwn(feature string, prep mcpPrep, method string, extra map[string]any) func(context.Context, Endpoint) Outcome {
	return func(ctx context.Context, e Endpoint) Outcome {
		return onVictimTask(ctx, e, feature, prep, func(c *mcpConn, id string) Outcome {
			params := map[string]any{"taskId": id}
			for k, v := range extra {
				params[k] = v
			}
			r, err := c.call(ctx, method, params, nil)
			if err != nil {
				return Failed(err)
			}
			if r.code() == -32601 {
				return notOffered(method)
			}
			if r.ok() {
				return Succeed(r.evidence() + ", acked")
			}
			return Block(r.evidence(id))
		})
	}
}

// mcpSteerFlooding: the victim steers its own working task mcpSteerFlood
// times; it worked when every message was acked.
func mcpSteerFlooding(ctx context.Context, e Endpoint) Outcome {
	return onVictimTask(ctx, e, "steer", mcpWorking, func(c *mcpConn, id string) Outcome {
		for i := 1; i <= mcpSteerFlood; i++ {
			r, err := c.call(ctx, "tasks/steer", map[string]any{"taskId": id, "message": fmt.Sprintf("warden-audit steer %d", i)}, nil)
			if err != nil {
				return Failed(err)
			}
			if r.code() == -32601 {
				return notOffered("tasks/steer")
			}
			if !r.ok() {
				return Block(fmt.Sprintf("message %d: %s", i, r.evidence(id)))
			}
		}
		return Succeed(fmt.Sprintf("HTTP 200, all %d acked", mcpSteerFlood))
	})
}

// mcpForeignSession: the attacker sends a request in the victim's session
// with its own credential.
func mcpForeignSession(ctx context.Context, e Endpoint) Outcome {
	victim, err := dialMCP(ctx, e, e.Victim())
	if err != nil {
		return Failed(err)
	}
	if victim.stateless() || victim.session == "" {
		return Skip("the server keeps no sessions (no Mcp-Session-Id)")
	}
	intruder := *victim
	intruder.p = e.Attacker()
	r, err := intruder.call(ctx, "tools/list", map[string]any{}, nil)
	if err != nil {
		return Failed(err)
	}
	if r.ok() {
		return Succeed(r.evidence() + ", answered in the other principal's session")
	}
	return Block(r.evidence())
}

// mcpForeignOrigin: a request from a page of another origin (a browser's
// cross-origin POST); rebound, the page's name also resolves to the server
// (DNS rebinding), so Host is that name too.
func mcpForeignOrigin(rebound bool) func(context.Context, Endpoint) Outcome {
	return func(ctx context.Context, e Endpoint) Outcome {
		c, err := dialMCP(ctx, e, e.Victim())
		if err != nil {
			return Failed(err)
		}
		p := port(e.URL)
		hdr := map[string]string{"Origin": "http://warden-audit.invalid"}
		if rebound {
			hdr = map[string]string{"Origin": "http://rebound.warden-audit.invalid" + p, "Host": "rebound.warden-audit.invalid" + p}
		}
		r, err := c.call(ctx, "tools/list", map[string]any{}, hdr)
		if err != nil {
			return Failed(err)
		}
		if r.ok() {
			return Succeed(r.evidence() + ", answered")
		}
		return Block(strings.ReplaceAll(r.evidence(), p, ":PORT"))
	}
}

// port is the ":port" of a URL ("" when it names none).
func port(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Port() != "" {
		return ":" + u.Port()
	}
	return ""
}

// mcpProbeIDs: the attacker asks for the victim's task and for a made-up
// one; answers that differ tell him which task IDs exist.
func mcpProbeIDs(ctx context.Context, e Endpoint) Outcome {
	return asAttacker(ctx, e, "", mcpWorking, func(victim, attacker *mcpConn, id string) Outcome {
		real, err := attacker.call(ctx, "tasks/get", map[string]any{"taskId": id}, nil)
		if err != nil {
			return Failed(err)
		}
		const madeUp = "0123456789abcdef0123456789abcdef"
		fake, err := attacker.call(ctx, "tasks/get", map[string]any{"taskId": madeUp}, nil)
		if err != nil {
			return Failed(err)
		}
		r, f := real.evidence(id), fake.evidence(madeUp)
		if real.ok() != fake.ok() || r != f {
			return Succeed(fmt.Sprintf("the task: %s; a made-up ID: %s", describeReply(real, id), describeReply(fake, madeUp)))
		}
		return Block("both: " + r)
	})
}

// describeReply is an answer's evidence, a result summed up.
func describeReply(r rpcReply, id string) string {
	if r.ok() {
		return r.evidence() + ", " + describe(r.Result)
	}
	return r.evidence(id)
}

// mcpNameMismatch: the victim's tasks/get of its own task with an Mcp-Name
// header naming something else, as a router reading the header would be
// misled by.
func mcpNameMismatch(ctx context.Context, e Endpoint) Outcome {
	return onVictimTask(ctx, e, "", mcpWorking, func(c *mcpConn, id string) Outcome {
		r, err := c.call(ctx, "tasks/get", map[string]any{"taskId": id}, map[string]string{"Mcp-Name": "warden-audit-other-task"})
		if err != nil {
			return Failed(err)
		}
		if r.ok() {
			return Succeed(r.evidence() + ", answered")
		}
		return Block(r.evidence(id))
	})
}

package pushrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// notification is one push being rewritten for its target's principal.
type notification struct {
	r     *Relay
	ctx   context.Context
	t     Target
	owner map[string]string // kind+id: its owner as Warden knows it
}

// rewrite reads a notification (a Task, or a StreamResponse: task, message,
// status or artifact update, at any nesting 0.3 or 1.0 use) and names every
// task and context in it by the principal's handle. Every task id (a Task's
// id, any taskId) and every context id must be the principal's, or nothing
// is delivered; a referenced task that is not is left out of its list.
//
// A name the rewrite reads, read two ways (jsonrpc.Object's rule), is
// refused first: given twice or folding like another anywhere, or spelled
// in another case ("TaskId") in a protocol object of it (hold); a webhook
// matching names without case (Go's encoding/json, a2a-go) would read the
// one Warden did not rewrite.
func (r *Relay) rewrite(ctx context.Context, body []byte, t Target) ([]byte, error) {
	if o, err := jsonrpc.ReadObject(body); o != nil {
		hold(o, 0)
		o.Walk(func(w *jsonrpc.Object) { w.Hold(notificationNames...) }) // the rest (metadata, a part's data): loose
		if err := o.Err(); err != nil {
			return nil, fmt.Errorf("the notification is ambiguous: %w", err)
		}
	} else if err != nil {
		return nil, errors.New("the notification is not one JSON object")
	}
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&v); err != nil || v == nil || len(bytes.TrimSpace(body[d.InputOffset():])) > 0 {
		return nil, errors.New("the notification is not one JSON object")
	}
	n := &notification{r: r, ctx: ctx, t: t, owner: map[string]string{}}
	if err := n.object(v, isTask(v), 0); err != nil {
		return nil, err
	}
	return jsonrpc.Encode(v)
}

// isTask reports whether an object is a Task (its "id" is a task id): one
// with an id and a status or context, as 0.3 and 1.0 Tasks have.
func isTask(m map[string]any) bool {
	_, id := m["id"].(string)
	_, st := m["status"]
	_, c := m["contextId"]
	return id && (st || c)
}

// notificationNames are the members the rewrite reads.
var notificationNames = []string{"taskId", "id", "contextId", "referenceTaskIds", "status", "task"}

// hold reads a notification's protocol objects by name (the Task or
// StreamResponse, its task, message and updates, a task's status, history
// and artifacts, a status's message, an update's artifact, their parts),
// each held to the spelling of the names the rewrite reads.
func hold(o *jsonrpc.Object, depth int) {
	if depth > maxDepth {
		return
	}
	o.Hold(notificationNames...)
	for _, k := range []string{"task", "message", "statusUpdate", "artifactUpdate", "status", "artifact"} {
		if c, ok := o.Obj(k); ok {
			hold(c, depth+1)
		}
	}
	for _, k := range []string{"history", "artifacts", "parts"} {
		if a, ok := o.Arr(k); ok {
			for i := range a.Len() {
				if c, ok := a.Obj(i); ok {
					hold(c, depth+1)
				}
			}
		}
	}
}

func (n *notification) object(m map[string]any, task bool, depth int) error {
	if depth > maxDepth {
		return errors.New("the notification is nested too deep")
	}
	ctxID, _ := m["contextId"].(string)
	// The object's task first: a context nobody owns is the principal's in
	// an object about the principal's task (a server may give a task's
	// message or event a context of its own; the sidecar's answers adopt
	// it the same way).
	ofTask := false
	for _, k := range []string{"taskId", "id"} {
		s, isStr := m[k].(string)
		if !isStr || k == "id" && !task {
			continue
		}
		h, err := n.task(s, ctxID)
		if err != nil {
			return err
		}
		m[k], ofTask = h, s != ""
	}
	for k, v := range m {
		switch s, isStr := v.(string); {
		case k == "taskId" && isStr, k == "id" && task && isStr:
		case k == "contextId" && isStr:
			h, err := n.context(s, ofTask)
			if err != nil {
				return err
			}
			m[k] = h
		case k == "referenceTaskIds":
			refs, _ := v.([]any)
			kept := []any{}
			for _, r := range refs {
				if r, ok := r.(string); ok {
					if h, err := n.task(r, ""); err == nil {
						kept = append(kept, h)
					}
				}
			}
			m[k] = kept
		default:
			if err := n.value(v, k == "task", depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *notification) value(v any, task bool, depth int) error {
	switch x := v.(type) {
	case map[string]any:
		return n.object(x, task && isTask(x), depth)
	case []any:
		for _, e := range x {
			if err := n.value(e, false, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// task returns the principal's handle of a task the notification names: the
// config's task, one Warden knows to be the principal's, or (for a config a
// message set before its task existed) a task nobody owns yet in the
// message's context, the principal's.
func (n *notification) task(id, contextID string) (string, error) {
	if id == "" {
		return id, nil
	}
	mine, err := n.mine(a2a.KindTask, id, func() bool {
		return n.t.Task == "" && n.t.Context != "" && contextID == n.t.Context
	})
	if err != nil {
		return "", err
	}
	if !mine {
		return "", fmt.Errorf("the notification names task %s, which is not the config's owner's", id)
	}
	return n.r.handles(a2a.KindTask, n.t.Principal, id), nil
}

// context returns the principal's handle of a context the notification
// names: the message's, one Warden knows to be the principal's, or one
// nobody owns in an object about the principal's task (ofTask).
func (n *notification) context(id string, ofTask bool) (string, error) {
	if id == "" {
		return id, nil
	}
	mine, err := n.mine(a2a.KindContext, id, func() bool { return ofTask })
	if err != nil {
		return "", err
	}
	if !mine {
		return "", fmt.Errorf("the notification names context %s, which is not the config's owner's", id)
	}
	return n.r.handles(a2a.KindContext, n.t.Principal, id), nil
}

// mine reports whether a task or context is the principal's: the config's
// own, else as Warden knows it; unowned says whether an id nobody owns is.
func (n *notification) mine(kind a2a.Kind, id string, unowned func() bool) (bool, error) {
	if kind == a2a.KindTask && id == n.t.Task || kind == a2a.KindContext && id == n.t.Context {
		return true, nil
	}
	key := string(kind) + id
	o, ok := n.owner[key]
	if !ok {
		if kind == a2a.KindContext {
			c, err := n.r.owners.A2AContextOwner(n.ctx, id)
			if err != nil {
				return false, err
			}
			o = c
		} else {
			os, err := n.r.owners.A2AOwners(n.ctx, []string{id})
			if err != nil {
				return false, err
			}
			o = os[0]
		}
		n.owner[key] = o
	}
	return o == n.t.Principal || o == "" && unowned(), nil
}

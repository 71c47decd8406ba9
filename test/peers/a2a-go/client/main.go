// Command client drives the a2a-go v2.3.1 client (a2aclient) through the
// valid A2A flows, in the same order and with the same JSON answer as
// ../../a2a-py/client.py and ../../a2a-js/client.mjs: card, extended card,
// send, plain message reply, stream, get, a message referencing the sent
// task, list, multi-turn input-required, push-config CRUD (with -hook as the
// webhook), cancel and subscribe. It resolves the card at -url, picks the
// card's first binding (or -binding JSONRPC|HTTP+JSON) and sends -token as a
// bearer token on every call. Any SDK error prints {"error": ...} and exits 1.
// Every call is bounded.
//
// usage: client -url http://127.0.0.1:PORT -token T -hook URL [-binding B]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
)

func main() {
	url := flag.String("url", "", "the agent's base URL (its card is at /.well-known/agent-card.json)")
	token := flag.String("token", "", "bearer token")
	hook := flag.String("hook", "", "push-notification webhook URL")
	binding := flag.String("binding", "", "JSONRPC or HTTP+JSON (default: the card's first)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := run(ctx, *url, *token, *hook, *binding)
	if err != nil {
		out = map[string]any{"error": err.Error()}
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	if err != nil {
		os.Exit(1)
	}
}

type flows map[string]any

func run(ctx context.Context, url, token, hook, binding string) (flows, error) {
	ctx = a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"Authorization": {"Bearer " + token}})
	card, err := agentcard.DefaultResolver.Resolve(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	cfg := a2aclient.Config{}
	used := string(card.SupportedInterfaces[0].ProtocolBinding)
	if binding != "" {
		cfg.PreferredTransports = []a2a.TransportProtocol{a2a.TransportProtocol(binding)}
		used = binding
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	out := flows{"sdk": "a2a-go v2.3.1", "binding": used}

	ext, err := client.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
	if err != nil {
		return nil, fmt.Errorf("extended card: %w", err)
	}
	out["card"] = ext.Name
	var skills []string
	for _, s := range ext.Skills {
		skills = append(skills, s.ID)
	}
	slices.Sort(skills)
	out["extendedSkills"] = skills

	sent, err := sendTask(ctx, client, message("hello", nil), false)
	if err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	out["send"] = result(sent)

	reply, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: message("message: hi", nil)})
	if err != nil {
		return nil, fmt.Errorf("message: %w", err)
	}
	m, ok := reply.(*a2a.Message)
	if !ok {
		return nil, fmt.Errorf("message: got %T", reply)
	}
	out["message"] = map[string]any{"text": texts(m.Parts)}

	events, chunks, last := map[string]bool{}, []string{}, ""
	for ev, err := range client.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: message("stream 3", nil)}) {
		if err != nil {
			return nil, fmt.Errorf("stream: %w", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			events["task"], last = true, string(e.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			events["status_update"], last = true, string(e.Status.State)
		case *a2a.TaskArtifactUpdateEvent:
			events["artifact_update"] = true
			chunks = append(chunks, texts(e.Artifact.Parts))
		}
	}
	kinds := make([]string, 0, len(events))
	for k := range events {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	out["stream"] = map[string]any{"events": kinds, "state": last, "chunks": chunks}

	got, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID})
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	out["get"] = result(got)

	ref, err := sendTask(ctx, client, message("summarise", func(m *a2a.Message) { m.ReferenceTasks = []a2a.TaskID{sent.ID} }), false)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	r := result(ref)
	r["text"] = strings.ReplaceAll(r["text"], string(sent.ID), "<id>")
	out["reference"] = r

	listed, err := client.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	out["list"] = map[string]any{"hasSend": slices.ContainsFunc(listed.Tasks, func(t *a2a.Task) bool { return t.ID == sent.ID })}

	asked, err := sendTask(ctx, client, message("input name", nil), false)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	question := ""
	if asked.Status.Message != nil {
		question = texts(asked.Status.Message.Parts)
	}
	out["input"] = map[string]any{"state": string(asked.Status.State), "question": question}

	cfg1, err := client.CreateTaskPushConfig(ctx, &a2a.PushConfig{
		TaskID: asked.ID, ID: "cfg-1", URL: hook, Token: "tok-123",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-xyz"},
	})
	if err != nil {
		return nil, fmt.Errorf("push create: %w", err)
	}
	fetched, err := client.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: asked.ID, ID: cfg1.ID})
	if err != nil {
		return nil, fmt.Errorf("push get: %w", err)
	}
	listedCfg, err := client.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: asked.ID})
	if err != nil {
		return nil, fmt.Errorf("push list: %w", err)
	}

	answered, err := sendTask(ctx, client, message("alice", func(m *a2a.Message) { m.TaskID = asked.ID }), false)
	if err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	out["answer"] = result(answered)

	deleted := "ok"
	if err := client.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: asked.ID, ID: cfg1.ID}); err != nil {
		deleted = err.Error()
	}
	after, err := client.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: asked.ID})
	if err != nil {
		return nil, fmt.Errorf("push list after delete: %w", err)
	}
	out["push"] = map[string]any{
		"created": cfg1.URL, "get": fetched.URL, "list": len(listedCfg),
		"delete": deleted, "afterDelete": len(after), "taskId": string(asked.ID),
	}

	waiting, err := sendTask(ctx, client, message("wait", nil), true)
	if err != nil {
		return nil, fmt.Errorf("wait: %w", err)
	}
	cancelled, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: waiting.ID})
	if err != nil {
		return nil, fmt.Errorf("cancel: %w", err)
	}
	again, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: waiting.ID})
	if err != nil {
		return nil, fmt.Errorf("get after cancel: %w", err)
	}
	out["cancel"] = map[string]any{"state": string(cancelled.Status.State), "get": string(again.Status.State)}

	waiting, err = sendTask(ctx, client, message("wait", nil), true)
	if err != nil {
		return nil, fmt.Errorf("wait: %w", err)
	}
	var seen []string
	for ev, err := range client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: waiting.ID}) {
		if err != nil {
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			seen = append(seen, string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			seen = append(seen, string(e.Status.State))
		}
		if len(seen) == 1 {
			if _, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: waiting.ID}); err != nil {
				return nil, fmt.Errorf("cancel while subscribed: %w", err)
			}
		}
	}
	var lastSeen any
	if len(seen) > 0 {
		lastSeen = seen[len(seen)-1]
	}
	out["subscribe"] = map[string]any{"last": lastSeen}
	return out, nil
}

func message(text string, edit func(*a2a.Message)) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	if edit != nil {
		edit(m)
	}
	return m
}

// sendTask sends m and wants a task back.
func sendTask(ctx context.Context, c *a2aclient.Client, m *a2a.Message, immediately bool) (*a2a.Task, error) {
	req := &a2a.SendMessageRequest{Message: m}
	if immediately {
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	}
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		return nil, err
	}
	t, ok := res.(*a2a.Task)
	if !ok {
		return nil, fmt.Errorf("got %T, not a task", res)
	}
	return t, nil
}

func result(t *a2a.Task) map[string]string {
	var parts []string
	for _, a := range t.Artifacts {
		parts = append(parts, texts(a.Parts))
	}
	return map[string]string{"state": string(t.Status.State), "text": strings.Join(parts, " ")}
}

func texts(parts a2a.ContentParts) string {
	var s []string
	for _, p := range parts {
		if t := p.Text(); t != "" {
			s = append(s, t)
		}
	}
	return strings.Join(s, " ")
}

// Package a2a holds the pure rules of A2A 1.0 requests over the JSON-RPC
// binding: the methods Warden serves, how one request is read (every member
// Warden reads read as any peer reads it), the places where a task, context
// or page-token handle belongs, the task states, webhook URLs a push config
// may name, and how a refusal reads on the wire.
//
// Who may call a method in which task state is the policy's matrix
// (policies/rego/a2a_matrix.json); nothing here does I/O.
package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// The JSON-RPC methods of A2A 1.0 (§9.4), the allow-list of the adapter.
const (
	MethodSend            = "SendMessage"
	MethodSendStreaming   = "SendStreamingMessage"
	MethodGetTask         = "GetTask"
	MethodListTasks       = "ListTasks"
	MethodCancelTask      = "CancelTask"
	MethodSubscribe       = "SubscribeToTask"
	MethodCreatePush      = "CreateTaskPushNotificationConfig"
	MethodGetPush         = "GetTaskPushNotificationConfig"
	MethodListPush        = "ListTaskPushNotificationConfigs"
	MethodDeletePush      = "DeleteTaskPushNotificationConfig"
	MethodExtendedCard    = "GetExtendedAgentCard"
	MethodMessageContinue = "SendMessage:continue" // the matrix's name for a message naming a task or context
)

// methods are the method names Parse gives as constants, not copies of the
// request's bytes (jsonrpc.Object.StrOf).
var methods = []string{MethodGetTask, MethodSend, MethodSendStreaming, MethodListTasks, MethodCancelTask, MethodSubscribe,
	MethodCreatePush, MethodGetPush, MethodListPush, MethodDeletePush, MethodExtendedCard}

// escaped reports whether env's member name is the string want once
// decoded (spelled with escapes).
func escaped(env *jsonrpc.Object, name, want string) bool {
	v, ok := env.Str(name)
	return ok && v == want
}

// RoleOwnershipUnknown is the role an adapter that cannot know a task's
// owner (ext_authz) gives the caller: the default policy does not refuse for
// ownership, operator rules still run.
const RoleOwnershipUnknown = "ownership_unknown"

// Methods are the message types A2A decisions carry: the methods and
// MethodMessageContinue (the closed set of the metric label).
func Methods() []string {
	return []string{MethodSend, MethodSendStreaming, MethodMessageContinue, MethodGetTask, MethodListTasks, MethodCancelTask, MethodSubscribe,
		MethodCreatePush, MethodGetPush, MethodListPush, MethodDeletePush, MethodExtendedCard}
}

// Known reports whether method is an A2A 1.0 JSON-RPC method.
func Known(method string) bool {
	switch method {
	case MethodSend, MethodSendStreaming, MethodGetTask, MethodListTasks, MethodCancelTask, MethodSubscribe,
		MethodCreatePush, MethodGetPush, MethodListPush, MethodDeletePush, MethodExtendedCard:
		return true
	}
	return false
}

// Streams reports whether method answers with an SSE stream.
func Streams(method string) bool { return method == MethodSendStreaming || method == MethodSubscribe }

// Sends reports whether method sends a message.
func Sends(method string) bool { return method == MethodSend || method == MethodSendStreaming }

// PushMethod reports whether method is one of the four push-config methods.
func PushMethod(method string) bool {
	switch method {
	case MethodCreatePush, MethodGetPush, MethodListPush, MethodDeletePush:
		return true
	}
	return false
}

// Task states (ProtoJSON enum names, §5.5).
const (
	StateSubmitted     = "TASK_STATE_SUBMITTED"
	StateWorking       = "TASK_STATE_WORKING"
	StateCompleted     = "TASK_STATE_COMPLETED"
	StateFailed        = "TASK_STATE_FAILED"
	StateCanceled      = "TASK_STATE_CANCELED"
	StateInputRequired = "TASK_STATE_INPUT_REQUIRED"
	StateRejected      = "TASK_STATE_REJECTED"
	StateAuthRequired  = "TASK_STATE_AUTH_REQUIRED"
)

// State returns the enum name of a task state as servers spell it: the 1.0
// enum name, or a 0.3 lower-case name; "" for anything else.
func State(s string) string {
	switch s {
	case StateSubmitted, "submitted":
		return StateSubmitted
	case StateWorking, "working":
		return StateWorking
	case StateCompleted, "completed":
		return StateCompleted
	case StateFailed, "failed":
		return StateFailed
	case StateCanceled, "canceled", "cancelled":
		return StateCanceled
	case StateInputRequired, "input-required":
		return StateInputRequired
	case StateRejected, "rejected":
		return StateRejected
	case StateAuthRequired, "auth-required":
		return StateAuthRequired
	}
	return ""
}

// states are the task states as servers spell them (State), read as
// constants, not copies of the answer's bytes (StateOf).
var states = []string{StateSubmitted, StateWorking, StateCompleted, StateFailed, StateCanceled, StateInputRequired, StateRejected, StateAuthRequired,
	"submitted", "working", "completed", "failed", "canceled", "cancelled", "input-required", "rejected", "auth-required"}

// StateOf is the state a TaskStatus object holds ("" none) as it is
// written: one State knows without a copy of the answer's bytes, any other
// string as jsonrpc.Object.Str reads it.
func StateOf(status *jsonrpc.Object) string {
	s, _ := status.StrOf("state", states)
	return s
}

// Terminal reports whether a task in state s accepts nothing more (§4.1.3).
func Terminal(s string) bool {
	switch State(s) {
	case StateCompleted, StateFailed, StateCanceled, StateRejected:
		return true
	}
	return false
}

// Kind is the kind of identifier a handle stands for.
type Kind byte

// The identifiers the adapter hands out as handles.
const (
	KindTask    Kind = 't'
	KindContext Kind = 'x'
	KindCursor  Kind = 'c'
	// KindChosen is a context id the client chose: the sidecar gives the
	// server an id derived from it and the principal, so that two clients
	// choosing the same id never share a context.
	KindChosen Kind = 'k'
)

// Call is one A2A JSON-RPC request as Warden reads it.
type Call struct {
	ID     json.RawMessage
	Method string
	// Request is the request read for splicing (jsonrpc.Object), and
	// Params its params (nil when absent or null): what the sidecar
	// forwards is Request with the ids it opened spliced in. An empty task
	// or context id of a message or of ListTasks is left out of it (both
	// SDK servers read it as absent: what is forwarded is what was
	// decided).
	Request *jsonrpc.Object
	Params  *jsonrpc.Object
	// MessageID is params.message.messageId of a message ("" when absent
	// or not a string); PageToken is params.pageToken of ListTasks.
	MessageID string
	PageToken string
	// Task is the task the method acts on: params.id of GetTask,
	// CancelTask and SubscribeToTask, params.taskId of the push-config
	// methods, params.message.taskId of a message.
	Task    string
	HasTask bool
	// Context is params.message.contextId of a message, params.contextId of
	// ListTasks.
	Context    string
	HasContext bool
	// References are params.message.referenceTaskIds.
	References []string
	// Webhooks are the push-notification URLs the request registers.
	Webhooks []string
	// Tenant is params.tenant, the routing identifier a gateway may send
	// the request on by (multi-tenancy.md §3); "" when absent.
	Tenant string
	// Content is what a message carries for an operator policy (messages
	// only).
	Content Content
}

// SkillKey is the member of params.message.metadata that names the skill a
// message asks for: A2A 1.0's Message has no skill field, so Warden reads
// this convention (the id of one of the Agent Card's AgentSkills).
const SkillKey = "skill"

// Content is what a message carries that an operator policy rules on
// (input.a2a).
type Content struct {
	// Skill is params.message.metadata.skill ("" when absent).
	Skill string
	// Parts are the kinds of params.message.parts, in order: "text",
	// "file" (raw or url) or "data".
	Parts []string
	// Metadata is params.message.metadata as written (nil when absent);
	// bounded when the policy reads it (jsonrpc.PolicyValue).
	Metadata json.RawMessage
}

// TenantRefused refuses a request that names a tenant (zero Verdict, OK,
// when it names none): a gateway may route on the tenant to another agent,
// whose ids Warden's handles and state (bound to a principal, not a tenant)
// do not tell from this one's. The sidecar and ext_authz both ask it.
func TenantRefused(c Call) rules.Verdict {
	if c.Tenant == "" {
		return rules.Verdict{}
	}
	return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
		Detail: "Invalid parameters: Warden does not enforce tenant routing; send no tenant (run one Warden per tenant's endpoint)"}
}

// WebhookRefused refuses the first webhook URL of a request that allow does
// not let through (zero Verdict, OK, when every one passes).
func WebhookRefused(c Call, allow Allow) rules.Verdict {
	for _, u := range c.Webhooks {
		if err := CheckWebhook(u, allow); err != nil {
			return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonWebhookRefused, Detail: "Invalid parameters: " + err.Error()}
		}
	}
	return rules.Verdict{}
}

// Continues reports whether a message names a task or a context: it
// continues something that must be the caller's.
func (c Call) Continues() bool { return Sends(c.Method) && (c.HasTask || c.HasContext) }

// Member names Warden reads, per object: a name that folds to one of them
// without being it is refused (check).
var (
	envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramNames    = []string{"id", "taskId", "contextId", "message", "configuration", "url", "pageToken", "tenant"}
	messageNames  = []string{"taskId", "contextId", "referenceTaskIds", "messageId", "metadata", "parts"}
	partNames     = []string{"text", "raw", "url", "data", "kind", "metadata", "filename", "mediaType"}
	metadataNames = []string{SkillKey}
	configNames   = []string{"taskPushNotificationConfig", "pushNotificationConfig"}
	// webhookNames are the names of the places a push config's URL sits
	// in, at any depth.
	webhookNames = []string{"url", "taskId", "id", "token", "authentication", "taskPushNotificationConfig", "pushNotificationConfig", "config"}
)

// errNotObject is what a place that must hold an object is refused with.
var errNotObject = jsonrpc.ErrNotObject

// Parse reads one A2A JSON-RPC request. Batches, notifications and answers
// are refused (A2A clients send one request per HTTP request and every A2A
// method answers), as are ids other than strings and canonical integers
// within ±2^53, member names Warden reads spelled in another case, and
// places holding a task, context or URL that are not strings. The request
// is read for splicing (jsonrpc.Object), never decoded whole.
func Parse(body []byte) (Call, error) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 {
		return Call{}, &jsonrpc.Error{Code: jsonrpc.ErrParse, Message: "Invalid JSON payload"}
	}
	env, err := jsonrpc.ReadObject(b)
	switch {
	case errors.Is(err, jsonrpc.ErrNotJSON):
		return Call{}, &jsonrpc.Error{Code: jsonrpc.ErrParse, Message: "Invalid JSON payload"}
	case b[0] == '[':
		return Call{}, invalid("JSON-RPC batches are not supported")
	case env == nil:
		return Call{}, invalid(err.Error())
	}
	if err := env.Check(envelopeNames); err != nil {
		return Call{}, invalid(err.Error())
	}
	// the plain spelling compared as it came (no copy), any other decoded
	if v, _ := env.Raw("jsonrpc"); string(v) != `"2.0"` && !escaped(env, "jsonrpc", "2.0") {
		return Call{}, invalid(`"jsonrpc" must be "2.0"`)
	}
	if env.Has("result") || env.Has("error") {
		return Call{}, invalid("a request, not an answer, is expected")
	}
	c := Call{Request: env}
	c.ID, _ = env.Raw("id")
	if !jsonrpc.ValidID(c.ID) {
		return Call{}, invalid("the id must be a string or an integer (notifications are not A2A requests)")
	}
	m, ok := env.StrOf("method", methods)
	if !ok || m == "" {
		return Call{}, invalid("method must be a non-empty string")
	}
	c.Method = m
	if raw, ok := env.Raw("params"); ok && string(raw) != "null" {
		p, isObj := env.Obj("params")
		if !isObj {
			return c, invalid("params: " + errNotObject.Error())
		}
		if err := p.Check(paramNames); err != nil {
			return c, invalid("params: " + err.Error())
		}
		c.Params = p
	}
	if err := c.read(); err != nil {
		return c, &jsonrpc.Error{Code: jsonrpc.ErrInvalidParams, Message: "Invalid parameters: " + err.Error()}
	}
	return c, nil
}

func invalid(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.ErrInvalidRequest, Message: "Request payload validation error: " + msg}
}

// read fills the places of the method's params.
func (c *Call) read() error {
	p := c.Params
	var err error
	if c.Tenant, _, err = member(p, "tenant"); err != nil {
		return err
	}
	switch c.Method {
	case MethodGetTask, MethodCancelTask, MethodSubscribe:
		c.Task, c.HasTask, err = member(p, "id")
	case MethodGetPush, MethodListPush, MethodDeletePush:
		c.Task, c.HasTask, err = member(p, "taskId")
	case MethodCreatePush:
		if c.Task, c.HasTask, err = member(p, "taskId"); err == nil && p != nil {
			err = c.webhooks(p, 0)
		}
	case MethodListTasks:
		if c.Context, c.HasContext, err = absentIfEmpty(p, "contextId"); err == nil {
			c.PageToken, _, err = member(p, "pageToken")
		}
	case MethodSend, MethodSendStreaming:
		err = c.readMessage(p)
	}
	if err != nil {
		return err
	}
	if (c.Method == MethodGetTask || c.Method == MethodCancelTask || c.Method == MethodSubscribe || PushMethod(c.Method)) && !c.HasTask {
		return fmt.Errorf("%s needs a task id", c.Method)
	}
	return nil
}

func (c *Call) readMessage(p *jsonrpc.Object) error {
	if p == nil || !p.Has("message") {
		return errors.New("message is required")
	}
	msg, ok := p.Obj("message")
	if !ok {
		return fmt.Errorf("message: %w", errNotObject)
	}
	if err := msg.Check(messageNames); err != nil {
		return fmt.Errorf("message: %w", err)
	}
	if err := c.readContent(msg); err != nil {
		return fmt.Errorf("message: %w", err)
	}
	c.MessageID, _ = msg.Str("messageId")
	var err error
	if c.Task, c.HasTask, err = absentIfEmpty(msg, "taskId"); err != nil {
		return err
	}
	if c.Context, c.HasContext, err = absentIfEmpty(msg, "contextId"); err != nil {
		return err
	}
	if raw, ok := msg.Raw("referenceTaskIds"); ok && string(raw) != "null" {
		refs, ok := msg.Arr("referenceTaskIds")
		if !ok {
			return errors.New("referenceTaskIds must be a list of strings")
		}
		for i := range refs.Len() {
			s, ok := refs.Str(i)
			if !ok {
				return errors.New("referenceTaskIds must be a list of strings")
			}
			c.References = append(c.References, s)
		}
	}
	if raw, ok := p.Raw("configuration"); !ok || string(raw) == "null" {
		return nil
	}
	conf, ok := p.Obj("configuration")
	if !ok {
		return fmt.Errorf("configuration: %w", errNotObject)
	}
	if err := conf.Check(configNames); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if err := c.webhooks(conf, 0); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// readContent reads a message's skill and part kinds, every name checked
// as check checks them: a metadata name folding to "skill" without being
// it, a skill that is not a string, a part holding two contents (text and
// data) or none Warden knows are refused, since a server could read them
// otherwise than the policy did.
func (c *Call) readContent(msg *jsonrpc.Object) error {
	if raw, ok := msg.Raw("metadata"); ok && string(raw) != "null" {
		md, ok := msg.Obj("metadata")
		if !ok {
			return fmt.Errorf("metadata: %w", errNotObject)
		}
		if err := md.Check(metadataNames); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		if v, ok := md.Raw(SkillKey); ok && string(v) != "null" {
			s, ok := md.Str(SkillKey)
			if !ok {
				return fmt.Errorf("metadata.%s must be a string", SkillKey)
			}
			c.Content.Skill = s
		}
		c.Content.Metadata = raw
	}
	if raw, ok := msg.Raw("parts"); !ok || string(raw) == "null" {
		return nil
	}
	parts, ok := msg.Arr("parts")
	if !ok {
		return errors.New("parts must be a list of objects")
	}
	c.Content.Parts = make([]string, 0, parts.Len())
	for i := range parts.Len() {
		k, err := partKind(parts, i)
		if err != nil {
			return fmt.Errorf("parts[%d]: %w", i, err)
		}
		c.Content.Parts = append(c.Content.Parts, k)
	}
	return nil
}

// partKind is the kind of part i: its one content member of A2A 1.0
// (text; raw or url: file; data), or, holding none, its 0.3 kind.
func partKind(parts *jsonrpc.Array, i int) (string, error) {
	m, ok := parts.Obj(i)
	if !ok {
		return "", errors.New("a part must be an object")
	}
	if err := m.Check(partNames); err != nil {
		return "", err
	}
	kind := ""
	for _, k := range []string{"text", "raw", "url", "data"} {
		if !m.Has(k) {
			continue
		}
		if kind != "" {
			return "", errors.New("a part holds one of text, raw, url and data")
		}
		kind = k
	}
	if kind == "raw" || kind == "url" {
		kind = "file"
	}
	if !m.Has("kind") {
		if kind == "" {
			return "", errors.New("a part holds one of text, raw, url and data")
		}
		return kind, nil
	}
	switch k, _ := m.Str("kind"); {
	case kind != "" && k != kind:
		return "", fmt.Errorf("a part's kind %q must name what it holds (%s)", k, kind)
	case k == "text" || k == "file" || k == "data":
		return k, nil
	}
	return "", errors.New("a part holds one of text, raw, url and data")
}

// maxWebhookDepth bounds how deep webhooks looks for URLs; a push config is
// two or three objects deep.
const maxWebhookDepth = 8

// webhooks reads every URL a push config can carry: a "url" member at any
// depth of obj, so a 1.0 config's own (params.url,
// configuration.taskPushNotificationConfig.url), 0.3's nesting
// (pushNotificationConfig.url), a draft's (config.url) and any other a
// server might read. Names that differ from those Warden reads only in case
// or spelling (URL, push_notification_config) are refused at every depth,
// and so is a url that is not a string: a server could read either. Members
// are read in the order of their names.
func (c *Call) webhooks(obj *jsonrpc.Object, depth int) error {
	if depth >= maxWebhookDepth {
		return errors.New("a push config is nested too deep")
	}
	if err := obj.Check(webhookNames); err != nil {
		return err
	}
	names := obj.Names()
	slices.Sort(names)
	for _, k := range names {
		if k != "url" {
			if err := c.webhooksAt(obj, k, depth+1); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			continue
		}
		if v, _ := obj.Raw(k); string(v) == "null" {
			continue
		}
		u, ok := obj.Str(k)
		if !ok {
			return errors.New("url must be a string")
		}
		c.Webhooks = append(c.Webhooks, u)
	}
	return nil
}

// webhooksAt reads the URLs of obj's member name, at depth: an object or an
// array is looked into, any other value holds none.
func (c *Call) webhooksAt(obj *jsonrpc.Object, name string, depth int) error {
	if o, ok := obj.Obj(name); ok {
		return c.webhooks(o, depth)
	}
	if a, ok := obj.Arr(name); ok {
		return c.webhooksIn(a, depth)
	}
	return nil
}

// webhooksIn reads the URLs of an array's elements, at depth.
func (c *Call) webhooksIn(a *jsonrpc.Array, depth int) error {
	if depth >= maxWebhookDepth {
		return errors.New("a push config is nested too deep")
	}
	for i := range a.Len() {
		var err error
		if o, ok := a.Obj(i); ok {
			err = c.webhooks(o, depth+1)
		} else if sub, ok := a.Arr(i); ok {
			err = c.webhooksIn(sub, depth+1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// member returns a string member of an object (nil: none): absent (or
// null) is not an error, any other type is.
func member(obj *jsonrpc.Object, name string) (string, bool, error) {
	if obj == nil {
		return "", false, nil
	}
	v, ok := obj.Raw(name)
	if !ok || string(v) == "null" {
		return "", false, nil
	}
	s, ok := obj.Str(name)
	if !ok {
		return "", false, fmt.Errorf("%s must be a string", name)
	}
	return s, true, nil
}

// absentIfEmpty is member for the ids both SDK servers read as absent when
// they are "" (a message's taskId and contextId, ListTasks' contextId): an
// empty string is left out of obj, so what is forwarded is what was
// decided.
func absentIfEmpty(obj *jsonrpc.Object, name string) (string, bool, error) {
	s, ok, err := member(obj, name)
	if ok && s == "" {
		obj.Del(name)
		return "", false, nil
	}
	return s, ok, err
}

// Answer is how a refusal reads on the wire: HTTP status, JSON-RPC code and
// message. Every id that is not the caller's reads exactly as a made-up one:
// TaskNotFoundError (-32001, §5.4), the error A2A servers give for an
// unknown task, with Warden's one message.
func Answer(code rules.Code, detail string) (httpStatus, rpcCode int, message string) {
	switch code {
	case rules.CodeTaskNotFound:
		return 200, ErrTaskNotFound, TaskNotFound
	case rules.CodeInvalidTaskState:
		return 200, ErrUnsupportedOperation, detail
	case rules.CodeInvalidParams:
		return 200, jsonrpc.ErrInvalidParams, detail
	case rules.CodeMethodNotFound:
		return 200, jsonrpc.ErrMethodNotFound, detail
	case rules.CodeInvalidRequest:
		return 400, jsonrpc.ErrInvalidRequest, detail
	case rules.CodeUnauthenticated:
		return 401, jsonrpc.ErrInvalidRequest, "Unauthorized: " + detail
	case rules.CodeInternal:
		return 503, jsonrpc.ErrInternal, detail
	}
	return 403, jsonrpc.ErrInvalidRequest, "Forbidden: " + detail
}

// A2A error codes (§5.4) and Warden's one answer for an id that is not the
// caller's.
const (
	ErrTaskNotFound         = -32001
	ErrUnsupportedOperation = -32004
	TaskNotFound            = "Task not found"
)

// Package mcp holds the pure rules of MCP task requests, for all three
// generations Warden speaks (2025-11-25 tasks, the 2026-07-28 tasks extension
// of SEP-2663, and the SEP-2669 interaction methods): how one JSON-RPC message
// is read, which methods name a task, the task statuses, the routing headers a
// request must agree with, tool-level taskSupport and the steer bounds.
//
// Who may call a task method in which status is the policy's matrix
// (policies/rego/mcp_matrix.json); nothing here does I/O.
package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Methods Warden reads.
const (
	MethodInitialize = "initialize"
	MethodToolsList  = "tools/list"
	MethodToolsCall  = "tools/call"
	// MethodResourcesRead and MethodPromptsGet are decided so that an
	// operator policy can rule on the resource URI and the prompt name.
	MethodResourcesRead = "resources/read"
	MethodPromptsGet    = "prompts/get"
	// MethodSubscribe, MethodUnsubscribe and MethodComplete name a resource
	// (params.uri; completion/complete's params.ref.uri) or a prompt
	// (params.ref.name) too, and are decided so that a rule on the resource
	// or prompt holds across every method naming it.
	MethodSubscribe   = "resources/subscribe"
	MethodUnsubscribe = "resources/unsubscribe"
	MethodComplete    = "completion/complete"
	// RefResource and RefPrompt are completion/complete's params.ref.type.
	RefResource  = "ref/resource"
	RefPrompt    = "ref/prompt"
	MethodGet    = "tasks/get"
	MethodResult = "tasks/result"
	MethodList   = "tasks/list"
	MethodCancel = "tasks/cancel"
	MethodUpdate = "tasks/update"
	MethodSteer  = "tasks/steer"
	MethodPause  = "tasks/pause"
	MethodResume = "tasks/resume"

	NotifyStatus = "notifications/tasks/status" // 2025-11-25 (and the SEP-2669 draft)
	NotifyTasks  = "notifications/tasks"        // 2026-07-28 extension
	// NotifyToolsChanged says the server's tool list changed.
	NotifyToolsChanged = "notifications/tools/list_changed"

	// MethodListen subscribes to notifications, tasks' among them
	// (params.notifications.taskIds, 2026-07-28 tasks extension); the
	// server's acknowledgement names the task IDs it agreed to.
	MethodListen       = "subscriptions/listen"
	NotifyAcknowledged = "notifications/subscriptions/acknowledged"
)

// methods are the method names Parse gives as constants, not copies of the
// request's bytes (jsonrpc.Object.StrOf): the requests and notifications of
// every hot path.
var methods = []string{MethodGet, MethodToolsCall, MethodResult, MethodList, MethodCancel, MethodUpdate, MethodSteer,
	MethodPause, MethodResume, MethodToolsList, MethodInitialize, MethodResourcesRead, MethodPromptsGet, MethodListen,
	"notifications/initialized", "ping"}

// Task statuses; paused is SEP-2669's.
const (
	StatusWorking       = "working"
	StatusInputRequired = "input_required"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
	StatusPaused        = "paused"
)

// Tool-level execution.taskSupport values (2025-11-25); absent means forbidden.
const (
	SupportForbidden = "forbidden"
	SupportOptional  = "optional"
	SupportRequired  = "required"
)

// Extension is the SEP-2663 tasks extension identifier.
const Extension = "io.modelcontextprotocol/tasks"

// RelatedTask is the _meta key naming the task a message belongs to.
const RelatedTask = "io.modelcontextprotocol/related-task"

// Era2026 is the first protocol version with the tasks extension and the
// standard routing headers (SEP-2243).
const Era2026 = "2026-07-28"

// Terminal reports whether a status is final.
func Terminal(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusCancelled
}

// KnownStatus reports whether s is a task status.
func KnownStatus(s string) bool {
	switch s {
	case StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled, StatusPaused:
		return true
	}
	return false
}

// TaskMethod reports whether method acts on the task named by params.taskId.
func TaskMethod(method string) bool {
	switch method {
	case MethodGet, MethodResult, MethodCancel, MethodUpdate, MethodSteer, MethodPause, MethodResume:
		return true
	}
	return false
}

// NameRequired reports whether, from protocol 2026-07-28 on, the Mcp-Name
// header must carry params.taskId (SEP-2663 and SEP-2669).
func NameRequired(method string) bool {
	switch method {
	case MethodGet, MethodCancel, MethodUpdate, MethodSteer, MethodPause, MethodResume:
		return true
	}
	return false
}

// NeedsStatus reports whether the decision on method depends on the task's
// status (the SEP-2669 rules).
func NeedsStatus(method string) bool {
	switch method {
	case MethodUpdate, MethodSteer, MethodPause, MethodResume:
		return true
	}
	return false
}

// Call is one JSON-RPC message as Warden reads it. Params are kept raw; only
// the fields the rules need are decoded.
type Call struct {
	Kind   Kind
	ID     json.RawMessage // raw, echoed in Warden's own answers
	Method string
	Params json.RawMessage
	// Request is the message as read (jsonrpc.Object), for the sidecar to
	// splice the upstream IDs of its handles into.
	Request *jsonrpc.Object
	// TaskID is params.taskId; HasTaskID is false when absent or not a string.
	TaskID    string
	HasTaskID bool
	// Tool is params.name of tools/call (and of prompts/get: the prompt).
	Tool string
	// Arguments is params.arguments, raw (tools/call, prompts/get); URI is
	// params.uri (resources/read).
	Arguments json.RawMessage
	URI       string
	// Ref is completion/complete's params.ref.type (RefResource: its uri,
	// a URI template, is in URI; RefPrompt: its name in Tool).
	Ref string
	// Argument is completion/complete's params.argument (HasArgument when
	// present): the name of the prompt's or template's argument and the
	// value typed so far.
	Argument    Argument
	HasArgument bool
	// ContextArguments is completion/complete's params.context.arguments:
	// the arguments of the prompt or template already resolved (nil when
	// absent).
	ContextArguments map[string]string
	// TaskRequested is set when a 2025-11-25 request asks for task execution
	// (params.task is an object).
	TaskRequested bool
	// SteerBytes is the length of tasks/steer's params.message.
	SteerBytes int
	// RelatedTaskID is the taskId of the io.modelcontextprotocol/related-task
	// object in params._meta (result._meta for a client's answer).
	RelatedTaskID  string
	HasRelatedTask bool
	// Cursor is params.cursor (tasks/list pages through it).
	Cursor    string
	HasCursor bool
	// TaskIDs is params.notifications.taskIds (subscriptions/listen), each
	// a string; HasTaskIDs is false when absent.
	TaskIDs    []string
	HasTaskIDs bool
	// InputResponses is params.inputResponses (a multi round-trip retry,
	// tasks/update): the client's answers to the server's input requests,
	// by key, raw (nil when absent or null). RequestState is
	// params.requestState (HasRequestState when present): the server's
	// opaque state, echoed.
	InputResponses  json.RawMessage
	RequestState    string
	HasRequestState bool
}

// The JSON-RPC envelope is rules/jsonrpc's; MCP reads it under these names.
type (
	Kind  = jsonrpc.Kind
	Error = jsonrpc.Error
)

// The kinds of message.
const (
	KindRequest      = jsonrpc.KindRequest
	KindNotification = jsonrpc.KindNotification
	KindResponse     = jsonrpc.KindResponse
)

// The JSON-RPC error codes Warden answers with.
const (
	ErrParse          = jsonrpc.ErrParse
	ErrInvalidRequest = jsonrpc.ErrInvalidRequest
	ErrMethodNotFound = jsonrpc.ErrMethodNotFound
	ErrInvalidParams  = jsonrpc.ErrInvalidParams
	ErrInternal       = jsonrpc.ErrInternal
	ErrHeaderMismatch = -32020
)

// ValidID is jsonrpc.ValidID.
func ValidID(raw json.RawMessage) bool { return jsonrpc.ValidID(raw) }

// ErrorBody is jsonrpc.ErrorBody: a JSON-RPC error response.
func ErrorBody(id json.RawMessage, code int, message string) []byte {
	return jsonrpc.ErrorBody(id, code, message)
}

// Member names Warden reads, per object. A name that differs from one of
// these only in case is refused: encoding/json (and other case-insensitive
// decoders) would read it as the member Warden did not see.
var (
	envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramNames    = []string{"taskId", "name", "task", "message", "cursor", "_meta", "notifications", "arguments", "uri", "ref", "argument", "context", "inputResponses", "requestState"}
	refNames      = []string{"type", "uri", "name"}
	argumentNames = []string{"name", "value"}
	contextNames  = []string{"arguments"}
	notifyNames   = []string{"taskIds"}
	metaNames     = []string{RelatedTask}
	relatedNames  = []string{"taskId"}
	resultNames   = []string{"_meta"}
)

// Parse reads one JSON-RPC message. Batches are refused: they were removed
// from the protocol in 2025-06-18, and a batch would let one POST carry
// messages decided differently. Every member Warden reads is read the way
// any peer reads it, or the message is refused (-32600): member names that
// differ only in case, at the envelope, in params, params._meta, its
// related-task object and params.task; ids other than strings and integers
// in canonical form within ±2^53 (a server answers 1.0 with 1, and Warden
// could not match the answer); a null id on a request; a message that is
// both a request and an answer.
func Parse(body []byte) (Call, error) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 {
		return Call{}, &Error{Code: ErrParse, Message: "empty body: expected one JSON-RPC message"}
	}
	env, err := jsonrpc.ReadObject(b)
	switch {
	case errors.Is(err, jsonrpc.ErrNotJSON):
		return Call{}, &Error{Code: ErrParse, Message: "parse error: the body is not valid JSON"}
	case b[0] == '[':
		return Call{}, &Error{Code: ErrInvalidRequest, Message: "JSON-RPC batches are not supported (removed in protocol 2025-06-18)"}
	case env == nil:
		return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: " + err.Error()}
	}
	if err := env.Check(envelopeNames); err != nil {
		return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: " + err.Error()}
	}
	if v, _ := env.Raw("jsonrpc"); string(v) != `"2.0"` && !isVersion(env) {
		return Call{}, &Error{Code: ErrInvalidRequest, Message: `invalid request: "jsonrpc" must be "2.0"`}
	}
	c := Call{Request: env}
	c.ID, _ = env.Raw("id")
	method, hasMethod := env.Raw("method")
	hasResult, hasError := env.Has("result"), env.Has("error")
	switch {
	case hasMethod:
		if hasResult || hasError {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: both a method and a result or error"}
		}
		// The value env.StrOf("method", methods) would find again: env was
		// just read (no member replaced), so its Raw is that member's value.
		m, ok := jsonrpc.StrOf(method, methods)
		if !ok || m == "" {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: method must be a non-empty string"}
		}
		c.Method = m
		c.Kind = KindNotification
		if len(c.ID) > 0 {
			if !ValidID(c.ID) {
				return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: id must be a string or an integer (canonical, within ±2^53)"}
			}
			c.Kind = KindRequest
		}
	case hasResult || hasError:
		c.Kind = KindResponse
		// An answer's id is held to the same spellings as a request's (null
		// only for an error about an unreadable request), so that the
		// server matches it to the request Warden saw answered.
		if len(c.ID) > 0 && string(c.ID) != "null" && !ValidID(c.ID) {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: id must be a string or an integer (canonical, within ±2^53)"}
		}
		c.Params, _ = env.Raw("params")
		if res, ok := env.Obj("result"); ok {
			// A client's answer to a server request may name a task in
			// result._meta; that is a handle too.
			err := res.Check(resultNames)
			if err == nil {
				err = c.readMeta(res)
			}
			if err != nil {
				return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: result: " + err.Error()}
			}
		}
		return c, nil
	default:
		return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: neither a method nor a result"}
	}
	p, ok := env.Obj("params")
	if !ok {
		c.Params, _ = env.Raw("params")
		return c, nil // absent, null or not an object: the upstream answers invalid params
	}
	// params' bytes as env.Raw("params") gives them, without finding the
	// member again: the object read from a member's value spans that value
	// (ReadObject checked the message whole), and nothing is replaced yet.
	c.Params = p.Source()
	if err := c.readParams(p); err != nil {
		return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params: " + err.Error()}
	}
	c.TaskID, c.HasTaskID = p.Str("taskId")
	c.Tool, _ = p.Str("name")
	c.URI, _ = p.Str("uri")
	c.Arguments, _ = p.Raw("arguments")
	c.Cursor, c.HasCursor = p.Str("cursor")
	if c.Method == MethodComplete {
		if err := c.readRef(p); err != nil {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params.ref: " + err.Error()}
		}
		if err := c.readArgument(p); err != nil {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params.argument: " + err.Error()}
		}
		if err := c.readContext(p); err != nil {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params.context: " + err.Error()}
		}
	}
	if task, ok := p.Obj("task"); ok {
		c.TaskRequested = true
		if err := task.Check(nil); err != nil {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params.task: " + err.Error()}
		}
	}
	if s, ok := p.Str("message"); ok {
		c.SteerBytes = len(s)
	} else {
		raw, _ := p.Raw("message")
		c.SteerBytes = len(raw)
	}
	if err := c.readTaskIDs(p); err != nil {
		return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params.notifications: " + err.Error()}
	}
	if err := c.readInputResponses(p); err != nil {
		return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params.inputResponses: " + err.Error()}
	}
	if p.Has("requestState") {
		if c.RequestState, c.HasRequestState = p.Str("requestState"); !c.HasRequestState {
			return Call{}, &Error{Code: ErrInvalidRequest, Message: "invalid request: params.requestState must be a string"}
		}
	}
	return c, nil
}

// readInputResponses reads params.inputResponses (MRTR, SEP-2322: a
// retry of tools/call, prompts/get or resources/read; tasks/update): an
// object of objects, each key once in one spelling (a server takes the
// answer it reads under a key; the policy judges the same one). An answer
// names no task of its own: a related-task in its _meta, in any spelling,
// is refused. The task a response is for is the request's (the sealed
// params.taskId of tasks/update, or the request's own params._meta); one
// inside a response would be a task id Warden never sealed or checked,
// which a server correlating answers by it would take.
func (c *Call) readInputResponses(p *jsonrpc.Object) error {
	if raw, _ := p.Raw("inputResponses"); string(raw) == "null" {
		return nil
	}
	rs, err := member(p, "inputResponses", nil)
	if rs == nil {
		return err
	}
	for _, n := range rs.Names() {
		r, ok := rs.Obj(n)
		if !ok {
			return fmt.Errorf("%q must be an object", n)
		}
		if err := r.Check(resultNames); err != nil {
			return fmt.Errorf("%q: %w", n, err)
		}
		if meta, ok := r.Obj("_meta"); ok {
			if err := meta.Check(metaNames); err != nil {
				return fmt.Errorf("%q: _meta: %w", n, err)
			}
			if meta.Has(RelatedTask) {
				return fmt.Errorf("%q: _meta names a task (%s): a response is for the request's own task", n, RelatedTask)
			}
		} else if r.Has("_meta") {
			return fmt.Errorf("%q: _meta must be an object", n)
		}
	}
	c.InputResponses, _ = p.Raw("inputResponses")
	return nil
}

// isVersion reports whether the envelope's "jsonrpc" is "2.0" spelled with
// escapes (the plain spelling is compared as it came, with no copy).
func isVersion(env *jsonrpc.Object) bool {
	v, _ := env.Str("jsonrpc")
	return v == "2.0"
}

// readTaskIDs reads params.notifications.taskIds: an array of strings.
func (c *Call) readTaskIDs(p *jsonrpc.Object) error {
	n, ok := p.Obj("notifications")
	if !ok {
		return nil
	}
	if err := n.Check(notifyNames); err != nil {
		return err
	}
	if !n.Has("taskIds") {
		return nil
	}
	ids, ok := n.Arr("taskIds")
	if !ok {
		return errors.New("taskIds must be an array of strings")
	}
	c.TaskIDs, c.HasTaskIDs = make([]string, ids.Len()), true
	for i := range ids.Len() {
		if c.TaskIDs[i], ok = ids.Str(i); !ok {
			return errors.New("taskIds must be an array of strings")
		}
	}
	return nil
}

// readParams checks params' names and reads its _meta.
func (c *Call) readParams(p *jsonrpc.Object) error {
	if err := p.Check(paramNames); err != nil {
		return err
	}
	return c.readMeta(p)
}

// readRef reads completion/complete's params.ref: what it names replaces
// params.name and params.uri (which the server does not read there), so
// that a policy rules on the prompt or resource the server completes.
func (c *Call) readRef(p *jsonrpc.Object) error {
	c.Tool, c.URI = "", ""
	ref, ok := p.Obj("ref")
	if !ok {
		return nil // absent or not an object: the server answers invalid params
	}
	if err := ref.Check(refNames); err != nil {
		return err
	}
	c.Ref, _ = ref.Str("type")
	switch c.Ref {
	case RefResource:
		c.URI, _ = ref.Str("uri")
	case RefPrompt:
		c.Tool, _ = ref.Str("name")
	}
	return nil
}

// Argument is completion/complete's params.argument.
type Argument struct {
	Name, Value string
}

// readArgument reads completion/complete's params.argument: an object of
// two strings, name and value, each read once in one spelling (a server
// completes the value it reads; the policy judges the same one).
func (c *Call) readArgument(p *jsonrpc.Object) error {
	a, err := member(p, "argument", argumentNames)
	if a == nil {
		return err
	}
	var okName, okValue bool
	c.Argument.Name, okName = a.Str("name")
	c.Argument.Value, okValue = a.Str("value")
	if !okName || !okValue {
		return errors.New("name and value must be strings")
	}
	c.HasArgument = true
	return nil
}

// readContext reads completion/complete's params.context: an object whose
// arguments, when given, is an object of string values, each name read once
// in one spelling (a server fills the template with the values it reads;
// the policy judges the same ones).
func (c *Call) readContext(p *jsonrpc.Object) error {
	ctx, err := member(p, "context", contextNames)
	if ctx == nil {
		return err
	}
	if !ctx.Has("arguments") {
		return nil
	}
	args, ok := ctx.Obj("arguments")
	if !ok {
		return errors.New("arguments must be an object")
	}
	if err := args.Check(nil); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	names := args.Names()
	c.ContextArguments = make(map[string]string, len(names))
	for _, n := range names {
		v, ok := args.Str(n)
		if !ok {
			return fmt.Errorf("arguments: %q must be a string", n)
		}
		c.ContextArguments[n] = v
	}
	return nil
}

// member reads p's member name, an object whose names are checked against
// known (jsonrpc.Object.Check): nil and no error when absent.
func member(p *jsonrpc.Object, name string, known []string) (*jsonrpc.Object, error) {
	if !p.Has(name) {
		return nil, nil
	}
	o, ok := p.Obj(name)
	if !ok {
		return nil, errors.New("must be an object")
	}
	if err := o.Check(known); err != nil {
		return nil, err
	}
	return o, nil
}

// readMeta reads an object's (params', a result's) _meta: its related-task,
// whose taskId must be a string.
func (c *Call) readMeta(obj *jsonrpc.Object) error {
	meta, ok := obj.Obj("_meta")
	if !ok {
		return nil
	}
	if err := meta.Check(metaNames); err != nil {
		return fmt.Errorf("_meta: %w", err)
	}
	if !meta.Has(RelatedTask) {
		return nil
	}
	related, ok := meta.Obj(RelatedTask)
	if !ok {
		return fmt.Errorf("_meta %s must be an object", RelatedTask)
	}
	if err := related.Check(relatedNames); err != nil {
		return fmt.Errorf("_meta %s: %w", RelatedTask, err)
	}
	c.RelatedTaskID, c.HasRelatedTask = related.Str("taskId")
	if !c.HasRelatedTask {
		return fmt.Errorf("_meta %s needs a string taskId", RelatedTask)
	}
	return nil
}

// Headers are the routing headers of one HTTP request.
type Headers struct {
	ProtocolVersion string // MCP-Protocol-Version
	Method          string // Mcp-Method
	Name            string // Mcp-Name
	HasName         bool
	Params          []Param // Mcp-Param-* (Params)
	// Joined reports that the door sees repeated field lines as one value
	// joined with commas (Envoy's CheckRequest), so that a comma in a value
	// cannot be told from a second line (CheckParamValues).
	Joined bool
}

// CheckHeaders checks that the routing headers agree with the body
// (SEP-2243): Mcp-Param-* values read as one value each, as the door sees
// lines (CheckParamValues; against the arguments: CheckParams), Mcp-Method
// equals the method, Mcp-Name, when given, the params.name of tools/call and
// prompts/get and the params.uri of resources/read (nameSource), and on task
// methods Mcp-Name equals params.taskId, required from protocol 2026-07-28
// on. A task method without a string taskId is invalid params.
func CheckHeaders(c Call, h Headers) rules.Verdict {
	if c.Kind != KindRequest && c.Kind != KindNotification {
		return rules.Verdict{}
	}
	if v := CheckParamValues(h.Params, h.Joined); !v.OK() {
		return v
	}
	// Mcp-Method and Mcp-Name are read as Mcp-Param-* values are: Warden
	// compares UTF-8, the SDK servers (Node, Starlette) read Latin-1 and
	// refuse a base64 form that does not decode, so a value they read
	// otherwise is refused, not compared.
	if v := readable("Mcp-Method", h.Method); !v.OK() {
		return v
	}
	if h.HasName {
		if v := readable("Mcp-Name", h.Name); !v.OK() {
			return v
		}
	}
	if h.Method != "" && h.Method != c.Method {
		return mismatch(fmt.Sprintf("Mcp-Method header %q does not match the body's method %q", h.Method, c.Method))
	}
	if !TaskMethod(c.Method) {
		if member, value, named := nameSource(c); named && h.HasName && decodeHeader(h.Name) != value {
			return mismatch(fmt.Sprintf("Mcp-Name header %q does not match %s %q", h.Name, member, value))
		}
		return rules.Verdict{}
	}
	if !c.HasTaskID {
		return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest, Detail: c.Method + " needs a string params.taskId"}
	}
	if h.HasName {
		if decodeHeader(h.Name) != c.TaskID {
			return mismatch("Mcp-Name header does not match params.taskId")
		}
	} else if NameRequired(c.Method) && h.ProtocolVersion >= Era2026 {
		return mismatch("Mcp-Name header is required on " + c.Method + " and must equal params.taskId")
	}
	return rules.Verdict{}
}

// nameSource is the member of c's params an Mcp-Name header carries
// (SEP-2243: params.name of tools/call and prompts/get, params.uri of
// resources/read) and its value as Warden decided on it ("" when absent or
// not a string: a header naming something then names what Warden did not
// decide); named is false for the other methods. Intermediaries and
// servers may route or look up by the header in place of the body, so the
// header must name what was decided.
func nameSource(c Call) (member, value string, named bool) {
	switch c.Method {
	case MethodToolsCall, MethodPromptsGet:
		return "params.name", c.Tool, true
	case MethodResourcesRead:
		return "params.uri", c.URI, true
	}
	return "", "", false
}

func mismatch(detail string) rules.Verdict {
	return rules.Verdict{Code: rules.CodeHeaderMismatch, Reason: rules.ReasonHeaderMismatch, Detail: detail}
}

// decodeHeader decodes SEP-2243's =?base64?...?= form of non-ASCII values
// (paramValue), a value that does not decode read as written.
func decodeHeader(v string) string {
	if d, ok := paramValue(v); ok {
		return d
	}
	return v
}

// Limits bound SEP-2669 steering per task.
type Limits struct {
	MaxSteerBytes int // longest params.message accepted
	MaxSteerQueue int // steer messages accepted since the task's last status change
}

// Request is what the rules see of one task request.
type Request struct {
	Call Call
	// Support is the tool's execution.taskSupport for tools/call ("" when the
	// tool is unknown).
	Support string
	// Steers counts the steer messages accepted since the task's status last
	// changed (the task has not passed a safe point Warden saw since).
	Steers int
	Limits Limits
}

// Check applies the rules that need no policy: tool-level taskSupport
// (2025-11-25) and the steer bounds. Ownership and status are the policy's.
func Check(r Request) rules.Verdict {
	c := r.Call
	switch c.Method {
	case MethodToolsCall:
		support := r.Support
		if support == "" {
			return rules.Verdict{}
		}
		if c.TaskRequested && support == SupportForbidden {
			return rules.Verdict{Code: rules.CodeMethodNotFound, Reason: rules.ReasonTaskSupport, Detail: "tool " + strconv.Quote(c.Tool) + " does not support task execution"}
		}
		if !c.TaskRequested && support == SupportRequired {
			return rules.Verdict{Code: rules.CodeMethodNotFound, Reason: rules.ReasonTaskSupport, Detail: "tool " + strconv.Quote(c.Tool) + " requires task execution (params.task)"}
		}
	case MethodSteer:
		if r.Limits.MaxSteerBytes > 0 && c.SteerBytes > r.Limits.MaxSteerBytes {
			return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonSteerTooLarge,
				Detail: fmt.Sprintf("steer message of %d bytes exceeds the limit of %d", c.SteerBytes, r.Limits.MaxSteerBytes)}
		}
		if r.Limits.MaxSteerQueue > 0 && r.Steers >= r.Limits.MaxSteerQueue {
			return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonSteerQueueFull,
				Detail: fmt.Sprintf("%d steer messages are already queued for this task; wait until it reaches a safe point", r.Steers)}
		}
	}
	return rules.Verdict{}
}

// UnknownSupport is the verdict on a tools/call whose tool's taskSupport
// an adapter that checks it could not learn: refused, as Warden cannot tell
// whether the call may run as it asks. unlisted says the server's complete
// tools/list does not name the tool (the server would not run it either);
// otherwise the list could not be read (an error, too many pages), for
// cause when Warden can tell the client why (the answer compressed, not
// JSON, an HTTP error, over the bound; "" otherwise).
func UnknownSupport(tool string, unlisted bool, cause string) rules.Verdict {
	if unlisted {
		return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonTaskSupport, Detail: "Unknown tool: " + strconv.Quote(tool) + " is not in the MCP server's tools/list"}
	}
	detail := "Warden could not read the taskSupport of tool " + strconv.Quote(tool) + " from the MCP server's tools/list"
	if cause == "" {
		detail += "; retry later"
	} else {
		detail += ": " + cause
	}
	return rules.Verdict{Code: rules.CodeInternal, Reason: rules.ReasonTaskSupport, Detail: detail}
}

// Answer is how a refusal reads on the wire: the HTTP status, the JSON-RPC
// error code and the message. A task that is not the caller's reads exactly
// as an unknown one.
func Answer(code rules.Code, detail string) (httpStatus, rpcCode int, message string) {
	switch code {
	case rules.CodeTaskNotFound:
		return 200, ErrInvalidParams, "Task not found"
	case rules.CodeInvalidTaskState, rules.CodeInvalidParams:
		return 200, ErrInvalidParams, detail
	case rules.CodeMethodNotFound:
		return 200, ErrMethodNotFound, detail
	case rules.CodeHeaderMismatch:
		return 400, ErrHeaderMismatch, detail
	case rules.CodeInvalidRequest:
		return 400, ErrInvalidRequest, detail
	case rules.CodeUnauthenticated:
		return 401, ErrUnauthorized, "Unauthorized: " + detail
	case rules.CodeInternal:
		return 503, ErrInternal, detail
	}
	return 403, ErrInvalidRequest, "Forbidden: " + detail
}

// ErrUnauthorized is the JSON-RPC code of a 401 answer's body, and
// ErrSessionNotFound of a 404 for a session that is not the caller's (the
// code the SDKs use).
const (
	ErrUnauthorized    = -32001
	ErrSessionNotFound = -32001
)

// Methods are the MCP methods a client sends (the 2025-11-25 specification
// and the tasks extension): the closed set of the request metric's method
// label, any other method counted as "other".
func Methods() []string {
	return []string{MethodInitialize, "ping", MethodToolsList, MethodToolsCall, "resources/list", "resources/templates/list", MethodResourcesRead,
		MethodSubscribe, MethodUnsubscribe, "prompts/list", MethodPromptsGet, MethodComplete, "logging/setLevel",
		MethodGet, MethodResult, MethodList, MethodCancel, MethodUpdate, MethodSteer, MethodPause, MethodResume, MethodListen,
		"notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed"}
}

// Decided reports whether requests of method go through the Enforcer (task
// methods, tools/call, tasks/list, and every method naming a resource or a
// prompt: resources/read, resources/subscribe, resources/unsubscribe,
// prompts/get, completion/complete): the one list both MCP adapters use.
func Decided(method string) bool {
	switch method {
	case MethodToolsCall, MethodList, MethodResourcesRead, MethodSubscribe, MethodUnsubscribe, MethodPromptsGet, MethodComplete:
		return true
	}
	return TaskMethod(method)
}

// CheckKind refuses a decided method (Decided) sent without an id: as a
// notification it would not be decided, while the server may still act on
// it. The one check both MCP adapters make before deciding.
func CheckKind(c Call) rules.Verdict {
	if c.Kind == KindNotification && Decided(c.Method) {
		return rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: "invalid request: " + c.Method + " is a request and needs an id"}
	}
	return rules.Verdict{}
}

// RoleOwnershipUnknown is the role an adapter that cannot know a task's
// owner (ext_authz, which never sees the create response) gives the caller
// of a task method: the default policy does not refuse for ownership, and
// operator rules still run.
const RoleOwnershipUnknown = "ownership_unknown"

// OriginAllowed is Streamable HTTP's Origin check (against DNS rebinding),
// one for both MCP adapters: no Origin (not a browser), one of origins ("*"
// allows any), or an origin whose host is one of hosts: the names (host or
// host:port; without a port, any port) this endpoint is served under that
// no other site can take. The request's own Host is never trusted for this:
// a page on a name its attacker rebound to this address sends that name as
// both Origin and Host.
func OriginAllowed(origin string, hosts, origins []string) bool {
	if origin == "" {
		return true
	}
	for _, a := range origins {
		if origin == a || a == "*" {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || u.User != nil {
		return false
	}
	name, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, h := range hosts {
		a := url.URL{Host: h}
		if strings.EqualFold(a.Hostname(), name) && (a.Port() == "" || a.Port() == port) {
			return true
		}
	}
	return false
}

// ValidHosts checks a list of allowed hosts (OriginAllowed): each a host
// name or address, with an optional port, nothing else.
func ValidHosts(hosts []string) error {
	for _, h := range hosts {
		u, err := url.Parse("http://" + h)
		if h == "" || err != nil || u.Host != h || u.Hostname() == "" || u.User != nil {
			return fmt.Errorf("%q is not host or host:port", h)
		}
	}
	return nil
}

package policies

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

// Input is what a policy sees of one message. Field names are the policy's
// vocabulary: input.message.type, input.roles, input.facts, ...
type Input struct {
	Protocol   string
	Principal  Principal
	Message    Message
	Session    Session
	Roles      []string
	Facts      map[string]any
	Governance *macp.Governance // set for Commitments only
	Verdict    rules.Verdict    // the rules' verdict, for operator policies
	// MCP is what an MCP request names (input.mcp); nil for the other
	// protocols.
	MCP *MCP
	// A2A is what an A2A message carries (input.a2a); nil for the other
	// protocols.
	A2A *A2A
	// MACP is what a MACP envelope carries beyond its header (input.macp);
	// not Present for the other protocols. A value, not a pointer: the
	// input is built on its decider's stack, and a MACP it pointed to would
	// be allocated for every call (the input's strings reach the policy's
	// document, so whatever it points to escapes).
	MACP MACP
	// Now is Warden's clock when it decides, what a policy reads as
	// input.time.now_ns truncated to the minute (see timeNs); the zero
	// time reads as null.
	Now time.Time
}

// timeNs is the decision time as a policy reads it: Unix nanoseconds,
// truncated to the minute, so that a time-of-day rule ("votes only during
// business hours") is a pure function of its input, decided again the same
// by what-if on a recorded log, and memoized for a minute, where
// time.now_ns() turns the memo off altogether.
func (in *Input) timeNs() any {
	if in.Now.IsZero() {
		return nil
	}
	return json.Number(strconv.FormatInt(in.Now.Truncate(time.Minute).UnixNano(), 10))
}

// A2A is what an A2A message carries, for an operator policy:
// input.a2a.skill (params.message.metadata.skill, "" when absent),
// input.a2a.parts (the kinds of its parts, in order: "text", "file",
// "data") and input.a2a.metadata (params.message.metadata, null when
// absent). For the other methods every member is empty.
type A2A struct {
	Skill string
	Parts []string
	// Metadata is parsed JSON (numbers as json.Number), bounded before it
	// gets here (rules/jsonrpc.PolicyValue).
	Metadata any
}

func (a *A2A) value() any {
	if a == nil {
		return nil
	}
	parts := make([]any, len(a.Parts))
	for i, p := range a.Parts {
		parts[i] = p
	}
	return map[string]any{"skill": a.Skill, "parts": parts, "metadata": a.Metadata}
}

// MCP is the subject of one MCP request, for an operator policy:
// input.mcp.tool and input.mcp.arguments (tools/call), input.mcp.uri
// (resources/read), input.mcp.prompt and input.mcp.arguments (prompts/get).
// Absent members are "" (arguments null).
type MCP struct {
	Tool   string
	Prompt string
	URI    string
	// Arguments is params.arguments as parsed JSON (numbers as
	// json.Number), bounded before it gets here (rules/mcp.PolicyArguments).
	Arguments any
	// Argument is completion/complete's params.argument, {name, value}
	// (nil for other methods).
	Argument *CompletionArgument
	// ContextArguments is completion/complete's params.context.arguments,
	// the arguments of the prompt or template already resolved (nil when
	// absent).
	ContextArguments map[string]string
	// InputResponses is params.inputResponses (a multi round-trip retry of
	// tools/call, prompts/get or resources/read; tasks/update) as parsed
	// JSON, bounded as Arguments: the client's answers to the server's
	// input requests, by key (nil when absent).
	InputResponses any
}

// CompletionArgument is the argument a completion/complete completes: its
// name and the value typed so far.
type CompletionArgument struct {
	Name, Value string
}

func (m *MCP) value() any {
	if m == nil {
		return nil
	}
	return map[string]any{"tool": m.Tool, "prompt": m.Prompt, "uri": m.URI, "arguments": m.Arguments, "argument": m.Argument.value(), "context_arguments": contextValue(m.ContextArguments), "input_responses": m.InputResponses}
}

func (a *CompletionArgument) value() any {
	if a == nil {
		return nil
	}
	return map[string]any{"name": a.Name, "value": a.Value}
}

// contextValue is the document's context_arguments: null when absent.
func contextValue(args map[string]string) any {
	if args == nil {
		return nil
	}
	v := make(map[string]any, len(args))
	for k, a := range args {
		v[k] = a
	}
	return v
}

// appendArgument appends a's memo key: '-' when absent, else its name
// and value.
func appendArgument(key []byte, a *CompletionArgument) []byte {
	if a == nil {
		return append(key, '-')
	}
	return appendStr(appendStr(append(key, '+'), a.Name), a.Value)
}

// Principal is the authenticated caller.
type Principal struct {
	ID     string
	Method string
	// Scopes are the credential's MACP scopes (JWT macp_scopes or the static
	// token's attributes): can_start_sessions, allowed_modes, ...
	Scopes map[string]any
}

// Message identifies the message being decided.
type Message struct {
	Mode      string
	Type      string
	Sender    string
	ID        string
	SessionID string
}

// Session is what a policy sees of the session's state.
type Session struct {
	State  string
	Policy string
}

// value converts the input into the JSON-shaped document OPA evaluates;
// input.macp.payload is converted only when payload is set (a policy reads
// it), null otherwise.
func (in *Input) value(payload bool) map[string]any {
	var gov any
	if in.Governance != nil {
		gov = map[string]any{"id": in.Governance.ID, "schema_version": in.Governance.SchemaVersion, "rules": in.Governance.Rules}
	}
	roles := make([]any, len(in.Roles))
	for i, r := range in.Roles {
		roles[i] = r
	}
	var facts any
	if in.Facts != nil {
		facts = in.Facts
	}
	var scopes any = map[string]any{}
	if in.Principal.Scopes != nil {
		scopes = in.Principal.Scopes
	}
	return map[string]any{
		"protocol":   in.Protocol,
		"principal":  map[string]any{"id": in.Principal.ID, "method": in.Principal.Method, "scopes": scopes},
		"message":    map[string]any{"mode": in.Message.Mode, "type": in.Message.Type, "sender": in.Message.Sender, "id": in.Message.ID, "session_id": in.Message.SessionID},
		"session":    map[string]any{"state": in.Session.State, "policy": in.Session.Policy},
		"roles":      roles,
		"facts":      facts,
		"governance": gov,
		"verdict":    map[string]any{"code": string(in.Verdict.Code), "reason": string(in.Verdict.Reason), "rank": int(in.Verdict.Rank)},
		"mcp":        in.MCP.value(),
		"a2a":        in.A2A.value(),
		"macp":       in.MACP.doc(payload),
		"time":       map[string]any{"now_ns": in.timeNs()},
	}
}

// appendKey appends the encoding of the input's value at path (at most two
// segments deep; see readSet) to key. Two inputs give the same bytes exactly
// when their values at path are equal.
func (in *Input) appendKey(key []byte, path []string) []byte {
	top := path[0]
	sub := ""
	if len(path) > 1 {
		sub = path[1]
	}
	key = append(key, top...)
	key = append(key, 0)
	switch top {
	case "protocol":
		return appendStr(key, in.Protocol)
	case "principal":
		switch sub {
		case "id":
			return appendStr(key, in.Principal.ID)
		case "method":
			return appendStr(key, in.Principal.Method)
		case "scopes":
			return appendValue(key, in.Principal.Scopes)
		}
		key = appendStr(key, in.Principal.ID)
		key = appendStr(key, in.Principal.Method)
		return appendValue(key, in.Principal.Scopes)
	case "message":
		m := &in.Message
		switch sub {
		case "mode":
			return appendStr(key, m.Mode)
		case "type":
			return appendStr(key, m.Type)
		case "sender":
			return appendStr(key, m.Sender)
		case "id":
			return appendStr(key, m.ID)
		case "session_id":
			return appendStr(key, m.SessionID)
		}
		for _, s := range []string{m.Mode, m.Type, m.Sender, m.ID, m.SessionID} {
			key = appendStr(key, s)
		}
		return key
	case "session":
		switch sub {
		case "state":
			return appendStr(key, in.Session.State)
		case "policy":
			return appendStr(key, in.Session.Policy)
		}
		return appendStr(appendStr(key, in.Session.State), in.Session.Policy)
	case "roles":
		return appendStrs(key, in.Roles)
	case "facts":
		if in.Facts == nil {
			return append(key, '-')
		}
		if sub != "" {
			v, ok := in.Facts[sub]
			if !ok {
				return append(key, '-')
			}
			return appendValue(key, v)
		}
		return appendValue(key, in.Facts)
	case "governance":
		if in.Governance == nil {
			return append(key, '-')
		}
		return appendStr(key, in.Governance.Canonical)
	case "mcp":
		m := in.MCP
		if m == nil {
			return append(key, '-')
		}
		switch sub {
		case "tool":
			return appendStr(key, m.Tool)
		case "prompt":
			return appendStr(key, m.Prompt)
		case "uri":
			return appendStr(key, m.URI)
		case "arguments":
			return appendValue(key, m.Arguments)
		case "argument":
			return appendArgument(key, m.Argument)
		case "context_arguments":
			return appendValue(key, contextValue(m.ContextArguments))
		case "input_responses":
			return appendValue(key, m.InputResponses)
		}
		key = appendStr(appendStr(appendStr(key, m.Tool), m.Prompt), m.URI)
		key = appendArgument(appendValue(key, m.Arguments), m.Argument)
		return appendValue(appendValue(key, contextValue(m.ContextArguments)), m.InputResponses)
	case "a2a":
		a := in.A2A
		if a == nil {
			return append(key, '-')
		}
		switch sub {
		case "skill":
			return appendStr(key, a.Skill)
		case "parts":
			return appendStrs(key, a.Parts)
		case "metadata":
			return appendValue(key, a.Metadata)
		}
		key = appendStrs(appendStr(key, a.Skill), a.Parts)
		return appendValue(key, a.Metadata)
	case "macp":
		m := &in.MACP
		if !m.Present {
			return append(key, '-')
		}
		switch sub {
		case "payload":
			return appendValue(key, m.payload())
		case "timestamp_unix_ms":
			return appendStr(key, strconv.FormatInt(m.TimestampUnixMs, 10))
		}
		key = appendStr(key, strconv.FormatInt(m.TimestampUnixMs, 10))
		return appendValue(key, m.payload())
	case "time":
		b, _ := in.timeNs().(json.Number)
		return appendStr(key, string(b))
	case "verdict":
		key = appendStr(key, string(in.Verdict.Code))
		key = appendStr(key, string(in.Verdict.Reason))
		return strconv.AppendInt(key, int64(in.Verdict.Rank), 10)
	}
	return append(key, '?')
}

// appendStrs appends a list of strings: its length, then each.
func appendStrs(key []byte, list []string) []byte {
	key = strconv.AppendInt(key, int64(len(list)), 10)
	for _, s := range list {
		key = appendStr(key, s)
	}
	return key
}

func appendStr(key []byte, s string) []byte {
	key = strconv.AppendInt(key, int64(len(s)), 10)
	key = append(key, ':')
	return append(key, s...)
}

// appendValue appends an encoding of v, a value of the policy's document
// (parsed JSON, the scopes of a credential, the facts and payload the
// rules read), that two values share only when the policy sees them alike:
// each kind has its own tag, strings and lists their length, maps their
// entries sorted by key, so no two values of different kinds, lengths or
// contents give the same bytes. The kinds JSON holds are encoded without
// encoding/json (which allocated on every decision) and strings as their
// bytes (encoding/json writes every invalid UTF-8 sequence as U+FFFD, so
// two strings the policy tells apart shared a key); any other type is
// encoded with encoding/json, under a tag of its own. A nil map or list is
// null, as in the document.
func appendValue(key []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(key, 'n')
	case bool:
		if v {
			return append(key, 't')
		}
		return append(key, 'f')
	case string:
		return appendStr(append(key, 's'), v)
	case json.Number:
		return appendStr(append(key, 'N'), string(v))
	case float64:
		return strconv.AppendFloat(append(key, 'F'), v, 'g', -1, 64)
	case int:
		return strconv.AppendInt(append(key, 'I'), int64(v), 10)
	case int64:
		return strconv.AppendInt(append(key, 'I'), v, 10)
	case []string:
		if v == nil {
			return append(key, 'n')
		}
		return appendStrs(append(key, 'L'), v)
	case []any:
		if v == nil {
			return append(key, 'n')
		}
		key = strconv.AppendInt(append(key, 'l'), int64(len(v)), 10)
		for _, e := range v {
			key = appendValue(append(key, ','), e)
		}
		return key
	case map[string]any:
		if v == nil {
			return append(key, 'n')
		}
		var arr [16]string
		names := arr[:0]
		for k := range v {
			names = append(names, k)
		}
		slices.Sort(names)
		key = strconv.AppendInt(append(key, 'm'), int64(len(v)), 10)
		for _, k := range names {
			key = appendValue(appendStr(append(key, ','), k), v[k])
		}
		return key
	}
	return appendJSON(append(key, 'j'), v)
}

// appendJSON appends a canonical encoding: encoding/json sorts map keys.
func appendJSON(key []byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Unencodable values never share a key with anything.
		return append(key, "!unencodable"...)
	}
	return appendStr(key, string(b))
}

// topLevel lists the input's fields, for a policy that reads input as a whole.
var topLevel = []string{"protocol", "principal", "message", "session", "roles", "facts", "governance", "verdict", "mcp", "a2a", "macp", "time"}

// normalizePaths truncates paths to two segments and drops any path that a
// shorter one already covers, so every value is keyed once.
func normalizePaths(paths [][]string) [][]string {
	var out [][]string
	for _, p := range paths {
		if len(p) == 0 {
			out = out[:0]
			for _, t := range topLevel {
				out = append(out, []string{t})
			}
			return out
		}
		if len(p) > 2 {
			p = p[:2]
		}
		if p[0] == "governance" || p[0] == "roles" { // keyed whole, whatever is read
			p = p[:1]
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b []string) int {
		return slices.Compare(a, b)
	})
	var kept [][]string
	for _, p := range out {
		if n := len(kept); n > 0 && isPrefix(kept[n-1], p) {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

func isPrefix(prefix, p []string) bool {
	return len(prefix) <= len(p) && slices.Equal(prefix, p[:len(prefix)])
}

// MaxPayloadBytes bounds the MACP payload an operator policy reads
// (input.macp.payload), as the MCP arguments are bounded: a larger payload
// is refused when a policy reads it, never left out (a rule on it would
// pass the very message it was written to stop), and costs nothing when
// none does. Depth needs no bound: no payload schema nests deeper than
// three levels (SessionStart's roots).
const MaxPayloadBytes = 64 << 10

// MACP is what a MACP envelope carries beyond its header, for an operator
// policy: input.macp.payload and input.macp.timestamp_unix_ms. Not
// Present (input.macp is null) for the other protocols and the control
// operations.
type MACP struct {
	// Present is set when the call carries an envelope.
	Present bool
	// Payload is the payload as the rules read it (macp.Outcome.Payload).
	// A policy sees it as protojson with the proto field names, every field
	// present, 64-bit integers as numbers (macp.Payload.Value); null when
	// the rules did not read it.
	Payload macp.Payload
	// Size is the payload's length on the wire, what MaxPayloadBytes bounds.
	Size int
	// TimestampUnixMs is the envelope's timestamp_unix_ms: the sender's
	// clock, which Warden bounds only from above (macp.MaxClockSkewMs).
	TimestampUnixMs int64

	value any // Payload.Value(), once converted
	done  bool
}

// payload returns the payload as a policy reads it, converted once.
func (m *MACP) payload() any {
	if !m.Present || !m.Payload.Read() {
		return nil
	}
	if !m.done {
		m.value, m.done = m.Payload.Value(), true
	}
	return m.value
}

func (m *MACP) doc(payload bool) any {
	if !m.Present {
		return nil
	}
	doc := map[string]any{"payload": nil, "timestamp_unix_ms": json.Number(strconv.FormatInt(m.TimestampUnixMs, 10))}
	if payload {
		doc["payload"] = m.payload()
	}
	return doc
}

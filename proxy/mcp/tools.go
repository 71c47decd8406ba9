package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// toolKey names a tool as one principal sees it in one upstream session: a
// server may list other tools, or the same tool with another taskSupport,
// to another session or caller.
type toolKey struct{ principal, sid, name string }

// newTools is the table of tools learned, of size entries, each principal
// holding at most an eighth (shareOf) of it.
func newTools(size int, w *owners.Watch) *owners.Cache[toolKey, tool] {
	return owners.NewCache[toolKey, tool](size, size/shareOf, w, owners.TableTools)
}

// tool is what Warden learned of one tool from a tools/list answer: its
// execution.taskSupport, the arguments its inputSchema mirrors in
// Mcp-Param-* headers (SEP-2243) and the JSON types it declares for them.
type tool struct {
	support  string
	mirrored mcp.Mirrored
	types    mcp.Types
}

// errUnlisted says the server's complete tools/list does not name a tool.
var errUnlisted = errors.New("the tool is not in the server's tools/list")

// maxToolPages bounds the tools/list pages Warden reads for one tool.
const maxToolPages = 10

// taskSupport returns what Warden knows of a tool in the caller's session
// (its execution.taskSupport, its mirrored arguments), learned from
// tools/list answers or, for a tool not seen yet, read with tools/list. An
// error means it could not be learned: errUnlisted, or the list could not
// be read whole.
func (s *Server) taskSupport(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, name string) (tool, error) {
	if name == "" {
		return tool{}, nil // no tool: the server answers invalid params
	}
	if v, ok := s.tools.Get(toolKey{principal, sid, name}); ok {
		return v, nil
	}
	cursor := ""
	for range maxToolPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		v, found, next, err := s.toolsPage(ctx, r, strip, principal, sid, callerParams, params, name)
		if err != nil {
			return tool{}, fmt.Errorf("tools/list for taskSupport: %w", err)
		}
		cursor = next
		if found {
			return v, nil
		}
		if cursor == "" {
			return tool{}, errUnlisted
		}
	}
	return tool{}, fmt.Errorf("tools/list for taskSupport: more than %d pages", maxToolPages)
}

// toolsPage reads one page of tools/list (params) for taskSupport and
// learns it: what it knows of the tool name when the page lists it, and the
// page's nextCursor. The page is charged to the answer budget while it is
// read and learned (security.md X1).
func (s *Server) toolsPage(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, params map[string]any, name string) (v tool, found bool, next string, err error) {
	held := s.streams.Hold()
	defer held.Release()
	res, err := s.call(ctx, r, strip, held, sid, callerParams, mcp.MethodToolsList, params)
	if err == nil && res == nil {
		err = errors.New("an error answer")
	}
	if err != nil {
		return tool{}, false, "", err
	}
	v, found = s.learnTools(principal, sid, res, name)
	next, _ = str(res, "nextCursor")
	if res.Err() != nil {
		return tool{}, false, "", errAmbiguous
	}
	return v, found, next, nil
}

// forgetTools forgets the taskSupport learned for a principal's session,
// whose server said its tool list changed: it is read again when needed.
func (s *Server) forgetTools(principal, sid string) {
	s.tools.RemoveIf(func(k toolKey) bool { return k.principal == principal && k.sid == sid })
}

// learnTools records execution.taskSupport (absent means forbidden) and
// the mirrored arguments of every listed tool for the principal's session,
// and returns want's. A list read two ways (result's Err: a tool's name or
// taskSupport given twice, or spelled otherwise) teaches nothing.
func (s *Server) learnTools(principal, sid string, result *jsonrpc.Object, want string) (t tool, found bool) {
	if result == nil {
		return tool{}, false
	}
	tools, _ := result.Arr("tools")
	if tools == nil {
		return tool{}, false
	}
	type learned struct {
		name string
		tool
	}
	seen := make([]learned, 0, tools.Len())
	for i := range tools.Len() {
		m, _ := tools.Obj(i)
		name, _ := str(m, "name")
		if name == "" {
			continue
		}
		v := mcp.SupportForbidden
		if ex, ok := sub(m, "execution"); ok {
			if ts, ok := ex.Str("taskSupport"); ok && ts != "" {
				v = ts
			}
		}
		schema, _ := m.Raw("inputSchema")
		seen = append(seen, learned{name, tool{v, mcp.MirroredArguments(schema), mcp.ArgumentTypes(schema)}})
	}
	if result.Err() != nil {
		return tool{}, false
	}
	for _, l := range seen {
		s.tools.Add(principal, toolKey{principal, sid, l.name}, l.tool)
		if l.name == want {
			t, found = l.tool, true
		}
	}
	return t, found
}

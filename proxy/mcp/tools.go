package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// toolKey names a tool as one principal sees it in one upstream session: a
// server may list other tools, or the same tool with another taskSupport,
// to another session or caller.
type toolKey struct{ principal, sid, name string }

// errUnlisted says the server's complete tools/list does not name a tool.
var errUnlisted = errors.New("the tool is not in the server's tools/list")

// maxToolPages bounds the tools/list pages Warden reads for one tool.
const maxToolPages = 10

// taskSupport returns a tool's execution.taskSupport in the caller's
// session, learned from tools/list answers or, for a tool not seen yet, read
// with tools/list. An error means it could not be learned: errUnlisted, or
// the list could not be read whole.
func (s *Server) taskSupport(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, tool string) (string, error) {
	if tool == "" {
		return "", nil // no tool: the server answers invalid params
	}
	if v, ok := s.tools.Get(toolKey{principal, sid, tool}); ok {
		return v, nil
	}
	cursor := ""
	for range maxToolPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := s.call(ctx, r, strip, sid, callerParams, mcp.MethodToolsList, params)
		if err == nil && res == nil {
			err = errors.New("an error answer")
		}
		if err != nil {
			return "", fmt.Errorf("tools/list for taskSupport: %w", err)
		}
		v, found := s.learnTools(principal, sid, res, tool)
		cursor, _ = str(res, "nextCursor")
		if res != nil && res.Err() != nil {
			return "", fmt.Errorf("tools/list for taskSupport: %w", errAmbiguous)
		}
		if found {
			return v, nil
		}
		if cursor == "" {
			return "", errUnlisted
		}
	}
	return "", fmt.Errorf("tools/list for taskSupport: more than %d pages", maxToolPages)
}

// forgetTools forgets the taskSupport learned for a principal's session,
// whose server said its tool list changed: it is read again when needed.
func (s *Server) forgetTools(principal, sid string) {
	for _, k := range s.tools.Keys() {
		if k.principal == principal && k.sid == sid {
			s.tools.Remove(k)
		}
	}
}

// learnTools records execution.taskSupport of every listed tool (absent
// means forbidden) for the principal's session, and returns want's. A list
// read two ways (result's Err: a tool's name or taskSupport given twice, or
// spelled otherwise) teaches nothing.
func (s *Server) learnTools(principal, sid string, result *jsonrpc.Object, want string) (support string, found bool) {
	if result == nil {
		return "", false
	}
	tools, _ := result.Arr("tools")
	if tools == nil {
		return "", false
	}
	type learned struct{ name, support string }
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
		seen = append(seen, learned{name, v})
	}
	if result.Err() != nil {
		return "", false
	}
	for _, t := range seen {
		s.tools.Add(toolKey{principal, sid, t.name}, t.support)
		if t.name == want {
			support, found = t.support, true
		}
	}
	return support, found
}

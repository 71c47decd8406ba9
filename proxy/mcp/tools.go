package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

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
		if v, found := s.learnTools(principal, sid, res, tool); found {
			return v, nil
		}
		if cursor, _ = res["nextCursor"].(string); cursor == "" {
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
// means forbidden) for the principal's session, and returns want's.
func (s *Server) learnTools(principal, sid string, result map[string]any, want string) (support string, found bool) {
	tools, _ := result["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" {
			continue
		}
		v := mcp.SupportForbidden
		if ex, ok := m["execution"].(map[string]any); ok {
			if ts, ok := ex["taskSupport"].(string); ok && ts != "" {
				v = ts
			}
		}
		s.tools.Add(toolKey{principal, sid, name}, v)
		if name == want {
			support, found = v, true
		}
	}
	return support, found
}

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// toolKey names a tool as one principal sees it in one upstream session: a
// server may list other tools, or the same tool with another taskSupport,
// to another session or caller.
type toolKey struct{ principal, sid, name string }

// newToolTables is the table of tools learned, of size entries, each
// principal holding at most an eighth (shareOf) of it, and the table of
// the sessions whose tools/list Warden read whole (one per sixteen tools),
// told of the tools the first drops; now is the clock.
func newToolTables(size int, w *owners.Watch, now func() time.Time) (*owners.Cache[toolKey, tool], *lists) {
	known := owners.NewCache[toolKey, tool](size, size/shareOf, w, owners.TableTools)
	l := &lists{read: owners.NewCache[sessionKey, time.Time](size/16, size/16/shareOf, nil, owners.TableTools), now: now, flying: map[sessionKey]chan struct{}{}}
	known.OnEvict(func(k toolKey, _ tool) { l.spoil(k.principal, k.sid) })
	return known, l
}

// sessionKey names one principal's upstream session.
type sessionKey struct{ principal, sid string }

// listedFor is how long a whole read of a session's tools/list answers
// the calls naming a tool it did not list (errUnlisted, without reading
// the list again), unless the server says the list changed first
// (security.md X2). A tool the server adds unannounced is callable after
// it, or at once when the client lists it through Warden.
const listedFor = 5 * time.Second

// lists remembers when Warden last read each principal's session's
// tools/list whole, learning every tool on it: until listedFor has passed,
// the server says the list changed or one of the tools learned is dropped
// from the table, a tool the table does not hold is not on the list. It
// also lets one read at a time run per session (fly): the calls that miss
// meanwhile wait for its answer instead of reading the list too.
type lists struct {
	now  func() time.Time
	read *owners.Cache[sessionKey, time.Time] // when read whole

	mu      sync.Mutex
	spoiled uint64                       // tools dropped or forgotten, ever (begin, mark)
	flying  map[sessionKey]chan struct{} // the reads running, closed when done
}

// whole reports whether the session's list was read whole less than
// listedFor ago, nothing of it dropped or changed since.
func (l *lists) whole(principal, sid string) bool {
	at, ok := l.read.Get(sessionKey{principal, sid})
	return ok && l.now().Sub(at) < listedFor
}

// begin is called before a read of a session's list from its first page:
// mark remembers it only if no tool was dropped or forgotten meanwhile.
func (l *lists) begin() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spoiled
}

// mark remembers that the session's list was read whole, from begin's
// (since) on.
func (l *lists) mark(principal, sid string, since uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spoiled == since {
		l.read.Add(principal, sessionKey{principal, sid}, l.now())
	}
}

// spoil forgets a session's whole read: a tool learned from it was dropped
// or the server changed the list. It may run under the tools table's lock.
func (l *lists) spoil(principal, sid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spoiled++
	l.read.Remove(sessionKey{principal, sid})
}

// fly lets the caller read the session's list (lead: it calls land when
// done) or returns the channel closed when the read running ends.
func (l *lists) fly(k sessionKey) (wait <-chan struct{}, lead bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.flying[k]; ok {
		return c, false
	}
	l.flying[k] = make(chan struct{})
	return nil, true
}

// land ends the caller's read of the session's list.
func (l *lists) land(k sessionKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.flying[k])
	delete(l.flying, k)
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
// tools/list answers or, for a tool not seen yet, read with tools/list:
// one read at a time per session, and none while the last whole read
// answers (lists). An error means it could not be learned: errUnlisted,
// or the list could not be read whole.
func (s *Server) taskSupport(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, name string) (tool, error) {
	if name == "" {
		return tool{}, nil // no tool: the server answers invalid params
	}
	k := sessionKey{principal, sid}
	for {
		if v, ok := s.tools.Get(toolKey{principal, sid, name}); ok {
			return v, nil
		}
		if s.lists.whole(principal, sid) {
			return tool{}, errUnlisted
		}
		wait, lead := s.lists.fly(k)
		if lead {
			defer s.lists.land(k)
			return s.readTools(ctx, r, strip, principal, sid, callerParams, name)
		}
		select {
		case <-wait: // learned from, or failed: look again
		case <-ctx.Done():
			return tool{}, fmt.Errorf("tools/list for taskSupport: %w", context.Cause(ctx))
		}
	}
}

// readTools reads the session's tools/list from its first page until a
// page lists name or the list ends, learning each page; a read to the end
// is remembered (lists.mark).
func (s *Server) readTools(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, name string) (tool, error) {
	since := s.lists.begin()
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
		if cursor == "" {
			s.lists.mark(principal, sid, since)
		}
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
// read and learned (security.md X1), and takes a place among the
// principal's requests while it is read (listener.Streams.Own, X3).
func (s *Server) toolsPage(ctx context.Context, r *http.Request, strip bool, principal, sid string, callerParams json.RawMessage, params map[string]any, name string) (v tool, found bool, next string, err error) {
	held, busy := s.streams.Own(principal)
	if busy != nil {
		return tool{}, false, "", busy
	}
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
// whose server said its tool list changed, and its whole read: it is read
// again when needed.
func (s *Server) forgetTools(principal, sid string) {
	s.tools.RemoveIf(func(k toolKey) bool { return k.principal == principal && k.sid == sid })
	s.lists.spoil(principal, sid)
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

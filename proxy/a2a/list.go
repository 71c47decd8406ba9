package a2a

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// ListTasks pages. A server that lists every tenant's tasks (one that
// tells no tenants apart behind Warden) pages over all of them; a page
// passed on with the others' tasks cut out showed where they were: an
// empty or short page with a nextPageToken, one per task of another's with
// pageSize 1, and a first page that emptied whenever another tenant's task
// changed (tasks are listed most recently updated first), or, with a status
// filter, whether another tenant had a task in that state (security.md V1,
// C10b's class on A2A). Warden therefore fills the caller's page from the
// server's next pages, with the server's own tokens, so that a page holds as
// many of the caller's tasks as the server's page holds tasks while the
// server has more of them, and it gives a nextPageToken only when another of
// the caller's tasks follows (looking ahead), each within relay.MaxListPages
// upstream pages a call.

// maxPageSize is the largest pageSize A2A lets a request ask (§3.1.4; the
// SDK servers refuse more).
const maxPageSize = 100

// list makes the caller's page of a ListTasks answer (res, the server's
// first page): the tasks Warden knows to be the caller's (this replica,
// else the shared store; an unknown owner is nobody's), then, while the
// page holds fewer than the server's page did and the server has more, the
// caller's tasks of the server's next pages; its nextPageToken is the
// server's token after the last task read into it, sealed, given only when
// another of the caller's tasks follows within the bound. An error means
// the owners or a page could not be read: nothing of the page may pass.
func (x *exchange) list(res *jsonrpc.Object) error {
	res.Hold(listNames...)
	ts, listed := res.Arr("tasks")
	n, kept, err := x.keepPage(ts, -1, nil)
	if err != nil {
		return err
	}
	next, _ := res.Str("nextPageToken")
	var more [][]byte
	if next != "" && x.req != nil && !x.dry {
		// What the pages read add to the answer is bounded as the server's
		// answer is (a2a.max_response_bytes), this page included.
		p := &pager{x: x, pages: 1, room: math.MaxInt, base: max(n, 1), size: max(n, 1)}
		if m := x.s.cfg.MaxResponseBytes; m >= 0 { // -1: no bound
			p.room = int(m) - res.Size()
		}
		if more, next, err = p.fill(n-kept, next); err != nil {
			return fmt.Errorf("ListTasks page: %w", err)
		}
		if next, err = p.ahead(next); err != nil {
			return fmt.Errorf("ListTasks page: %w", err)
		}
	}
	switch {
	case listed:
		for _, b := range more {
			ts.AppendRaw(b)
		}
	case len(more) > 0:
		res.SetRaw("tasks", append(append([]byte{'['}, bytes.Join(more, []byte{','})...), ']'))
	}
	if res.Has("totalSize") {
		// The server's total counts every tenant's tasks (also when none
		// of this page was left out, or the page is empty): never passed.
		// The caller's own total is known when this page is the whole
		// list (no page asked for, none to come); otherwise it is not,
		// and the page's count would be a wrong total: left out.
		if x.call.PageToken == "" && next == "" {
			res.SetRaw("totalSize", strconv.AppendInt(nil, int64(kept+len(more)), 10))
		} else {
			res.Del("totalSize")
		}
	}
	switch v, _ := res.Str("nextPageToken"); {
	case next != "":
		res.SetStr("nextPageToken", x.seal(a2a.KindCursor, next))
	case v != "":
		res.SetStr("nextPageToken", "") // the server has more, none of them the caller's
	}
	return nil
}

// keepPage keeps, in ts (a page's tasks; nil: none), the caller's tasks,
// at most limit of them (negative: all), each sealed with its context and
// messages, and cuts the others; with out, it appends each task kept to
// *out as the bytes it now is. n is how many tasks the page held, kept how
// many it keeps.
func (x *exchange) keepPage(ts *jsonrpc.Array, limit int, out *[][]byte) (n, kept int, err error) {
	mine, err := x.whose(ts)
	if err != nil {
		return 0, 0, err
	}
	var states []owners.Fact
	for i := range mine {
		t, ok := ts.Obj(i)
		if !ok || !mine[i] || kept == limit {
			ts.Drop(i)
			continue
		}
		id, _ := t.Str("id")
		x.prove(a2a.KindTask, id)
		t.SetStr("id", x.seal(a2a.KindTask, id))
		if c, _ := t.Str("contextId"); c != "" {
			if !x.adopt(a2a.KindContext, c, "", ofOwnTask) {
				ts.Drop(i) // the caller's task in another's context: not listed
				continue
			}
			t.SetStr("contextId", x.seal(a2a.KindContext, c))
		}
		states = append(states, owners.Fact{Key: ownerKey(a2a.KindTask, id), Status: taskState(t)})
		x.taskMessages(t)
		kept++
		if out != nil {
			*out = append(*out, t.AppendTo(nil))
		}
	}
	if _, err := x.apply(states...); err != nil { // one write to the shared store for the page
		return 0, 0, err
	}
	return len(mine), kept, nil
}

// whose reads which tasks of a page (ts; nil: none) are the caller's.
func (x *exchange) whose(ts *jsonrpc.Array) ([]bool, error) {
	n := 0
	if ts != nil {
		n = ts.Len()
	}
	keys := make([]owners.Key, n)
	for i := range n {
		id := ""
		if t, ok := ts.Obj(i); ok {
			t.Hold(taskNames...)
			id, _ = t.Str("id")
		}
		keys[i] = ownerKey(a2a.KindTask, id)
	}
	who, err := x.s.enforcer.Owners(x.ctx(), x.principal, keys...)
	if err != nil {
		return nil, err
	}
	mine := make([]bool, n)
	for i := range n {
		mine[i] = keys[i].ID != "" && who[i] == x.principal
	}
	return mine, nil
}

// pager reads the server's next ListTasks pages for one answer.
type pager struct {
	x     *exchange
	pages int // upstream pages read for the answer, its first included
	room  int // the bytes the tasks of the next pages may add to the answer
	// base is the caller's page size (the tasks of the server's first
	// page), size the next page's: it starts at base and doubles up to
	// maxPageSize while the caller's tasks are sparse, and is base again
	// for good once a larger page could not be read (over
	// a2a.max_response_bytes: one of base was, as the caller's own).
	base, size int
	frozen     bool
}

// grown reads the page after token at the pager's size, doubling it for
// the next; a page larger than base that cannot be read is read at base,
// and the size stays base.
func (p *pager) grown(part *listener.Hold, token string) (*jsonrpc.Object, *jsonrpc.Array, error) {
	page, ts, err := p.read(part, token, p.size)
	if err != nil && p.size > p.base && p.pages < relay.MaxListPages && !errors.Is(err, listener.ErrAnswerBudget) {
		p.size, p.frozen = p.base, true
		page, ts, err = p.read(part, token, p.size)
	}
	if err == nil && !p.frozen {
		p.size = min(p.size*2, maxPageSize)
	}
	return page, ts, err
}

// fill reads the caller's next need tasks from the server's pages after
// token (grown): a page holding more of the caller's than are needed is
// read again up to the last one needed, so that the server's token lands
// right after it; past the first page read, a page whose tasks would make
// the answer larger than p.room is left for the next call (the token
// before it). It returns the tasks read, sealed, and the server's token
// after them ("" at the end of the list).
func (p *pager) fill(need int, token string) (more [][]byte, next string, err error) {
	for need > 0 && token != "" && p.pages < relay.MaxListPages {
		got, page, err := p.fillFrom(need, token)
		if err != nil {
			return nil, "", err
		}
		n := 0
		for _, b := range got {
			n += len(b) + 1
		}
		if p.room -= n; p.room < 0 && len(more) > 0 {
			return more, token, nil // this page is the next call's
		}
		more, need = append(more, got...), need-len(got)
		token, _ = page.Str("nextPageToken")
	}
	return more, token, nil
}

// fillFrom reads the page after token for fill and returns the caller's
// tasks of it (at most need), sealed, with the page read. What the pages
// weigh is charged to the answer's share of the budget (a Part) while they
// are read, and given back but for the tasks kept.
func (p *pager) fillFrom(need int, token string) (got [][]byte, page *jsonrpc.Object, err error) {
	part := p.x.hold.Part()
	defer part.Release()
	page, ts, err := p.grown(part, token)
	if err != nil {
		return nil, nil, err
	}
	mine, err := p.x.whose(ts)
	if err != nil {
		return nil, nil, err
	}
	if at := nth(mine, need); at >= 0 && at+1 < len(mine) && p.pages < relay.MaxListPages {
		// More of the caller's than needed: read up to the last one
		// needed, for the server's token after it.
		if page, ts, err = p.read(part, token, at+1); err != nil {
			return nil, nil, err
		}
	}
	if _, _, err = p.x.keepPage(ts, need, &got); err != nil {
		return nil, nil, err
	}
	for _, b := range got {
		part.Keep(int64(len(b)))
	}
	return got, page, nil
}

// ahead is the nextPageToken of a page whose last task read leaves the
// server's list at token (relay.Ahead, the read-ahead MCP's tasks/list
// shares): its first page read ahead is one task (the server's next is
// most often the caller's), the next grown.
func (p *pager) ahead(token string) (string, error) {
	return relay.Ahead(token, func() bool { return p.pages < relay.MaxListPages }, func(at string, first bool) (bool, string, error) {
		part := p.x.hold.Part() // the page is dropped once read: nothing kept
		defer part.Release()
		var page *jsonrpc.Object
		var ts *jsonrpc.Array
		var err error
		if first {
			page, ts, err = p.read(part, at, 1)
		} else {
			page, ts, err = p.grown(part, at)
		}
		if err != nil {
			return false, "", err
		}
		mine, err := p.x.whose(ts)
		if err != nil {
			return false, "", err
		}
		next, _ := page.Str("nextPageToken")
		return nth(mine, 1) >= 0, next, nil
	})
}

// nth is the index of the n-th true of mine (n from 1), -1 when fewer.
func nth(mine []bool, n int) int {
	for i, m := range mine {
		if m {
			if n--; n == 0 {
				return i
			}
		}
	}
	return -1
}

// read asks the server for the page of the caller's ListTasks (its params
// as forwarded) after token, size tasks long, with the caller's
// credentials unless strip says the upstream must not see them (as readState
// does), and returns the result and its tasks (nil when it holds none); the
// page's bytes are charged to part.
func (p *pager) read(part *listener.Hold, token string, size int) (*jsonrpc.Object, *jsonrpc.Array, error) {
	x := p.x
	p.pages++
	params, err := decodeParams(x.call.Params)
	if err != nil {
		return nil, nil, err
	}
	if params == nil {
		params = map[string]any{}
	}
	params["pageToken"], params["pageSize"] = token, size
	b, err := x.s.own(x.ctx(), x.req, x.strip, part, a2a.MethodListTasks, "warden-list", params)
	if err != nil {
		return nil, nil, err
	}
	env, err := jsonrpc.ReadObject(b)
	if err != nil {
		return nil, nil, err
	}
	env.Hold(answerNames...)
	if raw, _ := env.Raw("id"); !sameID(raw, []byte(`"warden-list"`)) {
		return nil, nil, errors.New("the answer is not to Warden's request")
	}
	if env.Has("error") {
		return nil, nil, errors.New("an error answer")
	}
	res, ok := env.Obj("result")
	if !ok {
		return nil, nil, errors.New("the result is not a page")
	}
	res.Hold(listNames...)
	ts, _ := res.Arr("tasks")
	if err := env.Err(); err != nil {
		return nil, nil, err
	}
	return res, ts, nil
}

// own sends a request of Warden's own (method, with params; id its
// JSON-RPC id) for the caller's request r, with the caller's credentials
// unless strip, and returns the answer as relay.Own read it, its bytes
// charged to held (the answer budget's share they are held in).
func (s *Server) own(ctx context.Context, r *http.Request, strip bool, held *listener.Hold, method, id string, params map[string]any) ([]byte, error) {
	body, err := jsonrpc.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	out, err := s.target.Request(ctx, http.MethodPost, nil)
	if err != nil {
		return nil, err
	}
	relay.SetBody(out, body)
	relay.Behalf(out, r.Header, strip, []string{"Authorization", "A2a-Version", "A2a-Extensions"}, "Authorization")
	out.Header.Set("Content-Type", "application/json")
	resp, err := s.send(out)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return relay.Own{Server: "A2A server", Request: method, Types: jsonType, Limit: "a2a.max_response_bytes", Max: s.cfg.MaxResponseBytes, Held: held}.Read(resp)
}

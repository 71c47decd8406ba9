package test

import (
	"encoding/json"
	"testing"
	"time"
)

// a2aOneUserTokens maps both test tokens to one user of the A2A server: a
// server behind Warden that does not tell its tenants apart (one service
// identity, or none), so its ListTasks pages hold every tenant's tasks and
// Warden's filter is all that keeps them apart.
const a2aOneUserTokens = "svc=tok-alice,svc=tok-bob"

// startA2AGoOneUser and startA2APyOneUser start the SDK servers with both
// tokens mapped to one user.
func startA2AGoOneUser(t testing.TB) string { return startA2AGoTokens(t, a2aOneUserTokens) }

func startA2APyOneUser(t testing.TB) string { return startA2APyTokens(t, a2aOneUserTokens) }

// TestA2AListPagesHideOthers (sixteenth pass, V1): a ListTasks page through
// Warden shows no trace of other principals' tasks, in front of a server
// that lists every tenant's (C10b's class, closed for MCP tasks/list, on
// A2A). Warden used to filter each of the server's pages and pass it on, so
// bob, asking pageSize 1, got an empty page with a nextPageToken for each of
// alice's tasks: he counted her tasks, and, by asking for the first page
// now and then (tasks are listed most recently updated first), saw whenever
// another tenant's task changed, and with a status filter whether another
// tenant had a task in that state. Now Warden fills the caller's page from
// the server's next pages: a page is empty only when none of the caller's
// tasks is left, and no page's token leads to an empty page while the
// server has more of the caller's tasks within the bound.
func TestA2AListPagesHideOthers(t *testing.T) {
	servers := []a2aServer{{"a2a-go", startA2AGoOneUser}, {"a2a-py", startA2APyOneUser}}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			warden := startA2AWarden(t, s.start(t))
			e := &a2aAttackEnv{url: warden + "/jsonrpc"}
			type page struct {
				Tasks         []a2aTask `json:"tasks"`
				NextPageToken string    `json:"nextPageToken"`
			}
			list := func(token string, params map[string]any) page {
				t.Helper()
				a := e.call(t, token, "ListTasks", params)
				var p page
				if a.Error != nil || json.Unmarshal(a.Result, &p) != nil {
					t.Fatalf("ListTasks %v: %s", params, a)
				}
				return p
			}
			// walk lists every page of token's ListTasks with params and
			// pageSize 1: the tasks seen and the pages read.
			walk := func(token string, params map[string]any) (seen []string, pages int) {
				t.Helper()
				p := map[string]any{"pageSize": 1}
				for k, v := range params {
					p[k] = v
				}
				for pages < 20 {
					got := list(token, p)
					pages++
					for _, task := range got.Tasks {
						seen = append(seen, task.ID)
					}
					if got.NextPageToken == "" {
						return seen, pages
					}
					if len(got.Tasks) == 0 {
						t.Errorf("%s: an empty page with a nextPageToken (page %d, %v): it stands for another's task", token, pages, params)
					}
					p["pageToken"] = got.NextPageToken
				}
				t.Fatalf("%s: more than 20 pages", token)
				return nil, pages
			}
			// bob's oldest task, then three of alice's (most recent first
			// in the list), then bob's newest: between his two, her three.
			bobOld, a := e.send(t, bobToken, "bob old", nil, false)
			if bobOld.ID == "" {
				t.Fatalf("bob's first task: %s", a)
			}
			time.Sleep(20 * time.Millisecond) // distinct update times
			for _, text := range []string{"one", "two", "three"} {
				e.victim(t, text)
				time.Sleep(20 * time.Millisecond)
			}
			bobNew, a := e.send(t, bobToken, "bob new", nil, false)
			if bobNew.ID == "" {
				t.Fatalf("bob's second task: %s", a)
			}

			seen, pages := walk(bobToken, nil)
			if len(seen) != 2 || pages != 2 {
				t.Errorf("bob walked %d pages and saw %d tasks (%v); want his 2 tasks on 2 pages, nothing of alice's 3", pages, len(seen), seen)
			}
			// The first page asked now and then: his newest task, whatever
			// another tenant does meanwhile.
			before := list(bobToken, map[string]any{"pageSize": 1})
			e.victim(t, "four")
			after := list(bobToken, map[string]any{"pageSize": 1})
			if len(before.Tasks) != 1 || len(after.Tasks) != 1 || before.Tasks[0].ID != after.Tasks[0].ID {
				t.Errorf("bob's first page before alice's new task %v, after %v: want his newest task both times", before.Tasks, after.Tasks)
			}
			// A status filter: bob has no input-required task, alice has
			// two; his list in that state is one empty page.
			e.victim(t, "input name")
			e.victim(t, "input name")
			if seen, pages := walk(bobToken, map[string]any{"status": "TASK_STATE_INPUT_REQUIRED"}); len(seen) != 0 || pages != 1 {
				t.Errorf("bob's input-required tasks: %d on %d pages; want none on one page", len(seen), pages)
			}
			// Alice's own walk still sees all of hers (valid traffic).
			if seen, _ := walk(aliceToken, nil); len(seen) != 6 {
				t.Errorf("alice walked her list and saw %d tasks; want her 6", len(seen))
			}
		})
	}
}

package test

import (
	"encoding/json"
	"testing"
)

// TestA2AListTotalSize (issue 24 item 10, A2A part): through Warden a
// ListTasks page never states a total the caller is not entitled to. The
// server counts every tenant's tasks; Warden gives the caller's own count
// when the page is the whole list, and leaves totalSize out when the list
// has several pages (the old code gave the page's count, 1 with pageSize 1
// although alice has 3 tasks: a wrong total).
func TestA2AListTotalSize(t *testing.T) {
	for _, s := range a2aServers() {
		t.Run(s.name, func(t *testing.T) {
			warden := startA2AWarden(t, s.start(t))
			e := &a2aAttackEnv{url: warden + "/jsonrpc"}
			for _, text := range []string{"one", "two", "three"} {
				e.victim(t, text)
			}
			if task, a := e.send(t, bobToken, "bob's", nil, false); task.ID == "" {
				t.Fatalf("bob's task: %s", a)
			}
			type page struct {
				Tasks         []a2aTask `json:"tasks"`
				NextPageToken string    `json:"nextPageToken"`
				TotalSize     *int      `json:"totalSize"`
			}
			list := func(params map[string]any) page {
				a := e.call(t, aliceToken, "ListTasks", params)
				var p page
				if a.Error != nil || json.Unmarshal(a.Result, &p) != nil {
					t.Fatalf("ListTasks %v: %s", params, a)
				}
				return p
			}
			whole := list(map[string]any{})
			if len(whole.Tasks) != 3 || whole.NextPageToken != "" || whole.TotalSize == nil || *whole.TotalSize != 3 {
				t.Fatalf("alice's whole list: %d tasks, next %q, total %v; want her 3 tasks, total 3", len(whole.Tasks), whole.NextPageToken, whole.TotalSize)
			}
			seen := 0
			params := map[string]any{"pageSize": 1}
			for range 10 {
				p := list(params)
				seen += len(p.Tasks)
				if p.TotalSize != nil && *p.TotalSize != 3 {
					t.Errorf("a page of her list states a total of %d; she has 3 tasks", *p.TotalSize)
				}
				if p.NextPageToken == "" {
					break
				}
				params = map[string]any{"pageSize": 1, "pageToken": p.NextPageToken}
			}
			if seen != 3 {
				t.Errorf("her pages held %d tasks, want 3", seen)
			}
		})
	}
}

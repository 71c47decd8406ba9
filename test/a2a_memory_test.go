package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// vmKB reads a field of /proc/<pid>/status in kB (VmRSS, VmHWM).
func vmKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// a2aPost posts a JSON-RPC call and returns the status, Retry-After and
// the body's length.
func a2aPost(t *testing.T, url, token, method string, params any) (int, string, int) {
	t.Helper()
	resp := a2aBegin(t, url, token, method, params)
	if resp == nil {
		t.FailNow() // a2aBegin said why
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), int(n)
}

// TestA2AAnswerBudget (issue 24 item 22): parallel ListTasks answers of
// ~32 MB each from the a2a-go v2.3.1 server. Warden reads an answer whole
// to check it (spliced, not decoded: about its size again, where decoding
// cost a multiple); the answer bytes in flight are budgeted
// (a2a.streams.answer_bytes): past the budget an answer becomes a 503 with
// Retry-After and a JSON-RPC error, and the memory held falls with it.
//
// The answers overlap by construction, not by luck: every caller waits for
// the status of all of them before it reads its body, and Warden holds an
// answer it admitted until it is written, which the socket buffers (a few
// MB) let happen only as its caller reads it. What is compared is
// Warden's live heap at that moment (after a GC it forces through its
// profiler, /debug/pprof/heap?gc=1): the bytes the budget bounds, where the
// peak RSS of two runs (compared here before) also measures when the
// collector happened to run, and failed in CI with 217 MB budgeted, 186 MB
// not. Both runs are measured; the unbudgeted one is the old behaviour
// (every answer admitted), and must hold every answer at once for the
// comparison to mean anything.
func TestA2AAnswerBudget(t *testing.T) {
	const parallel = 3
	text := strings.Repeat("0123456789abcdef", (4<<20)/16) // 4 MiB
	list := map[string]any{"pageSize": 100, "historyLength": 10, "includeArtifacts": true}
	size := 0 // a ListTasks answer's

	// run returns how much Warden's live heap grew while the answers were
	// held, and their statuses and Retry-After; and what /metrics said: the
	// answer bytes in flight while they were held, the answers refused for
	// the budget once they were read. Each run has an A2A server
	// of its own, its tasks made through Warden: a caller's ListTasks
	// answer then passes whole (Warden lists only the tasks it saw made).
	run := func(budget int64) (grewMB int, statuses []int, retry []string, inFlight, refusals int) {
		admin := freeAddr(t)
		adminAddr := admin
		warden, proc := startA2AWardenProcess(t, startA2AGo(t), "--sidecar-answer-bytes", strconv.FormatInt(budget, 10),
			"--a2a-max-body-bytes", strconv.Itoa(8<<20), "--admin-listen", admin, "--admin-pprof")
		admin = "http://" + admin
		pid := proc.cmd.Process.Pid
		for i := range 4 {
			if status, _, _ := a2aPost(t, warden+"/jsonrpc", aliceToken, "SendMessage", map[string]any{"message": a2aMessage(text, nil)}); status != http.StatusOK {
				t.Fatalf("task %d: HTTP %d", i, status)
			}
		}
		_, _, size = a2aPost(t, warden+"/jsonrpc", aliceToken, "ListTasks", list)
		if size < 16<<20 {
			t.Fatalf("ListTasks answer: %d bytes; want the four tasks' 16 MiB and more", size)
		}
		before := liveHeap(t, admin)
		resps := make([]*http.Response, parallel)
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Go(func() { resps[i] = a2aBegin(t, warden+"/jsonrpc", aliceToken, "ListTasks", list) })
		}
		wg.Wait() // every answer has begun; none is read yet
		held, rss := liveHeap(t, admin), vmKB(t, pid, "VmRSS")
		inFlight = metric(t, adminAddr, `warden_answer_bytes_in_flight{protocol="a2a"}`)
		for _, resp := range resps {
			if resp == nil {
				t.FailNow() // a2aBegin said why
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode == http.StatusOK && n < int64(size)/2 {
				t.Errorf("answer HTTP %d: %d bytes read, %v", resp.StatusCode, n, err)
			}
			statuses, retry = append(statuses, resp.StatusCode), append(retry, resp.Header.Get("Retry-After"))
		}
		grewMB = (held - before) >> 20
		refusals = metric(t, adminAddr, `warden_answer_budget_refusals_total{protocol="a2a"}`)
		t.Logf("budget %d MiB: ListTasks answer %d MB; live heap %d MB before, %d MB with the answers held (RSS %d MB, peak %d MB); answers %v (Retry-After %q); answer bytes in flight %d MB, refusals %d",
			budget>>20, size>>20, before>>20, held>>20, rss>>10, vmKB(t, pid, "VmHWM")>>10, statuses, retry, inFlight>>20, refusals)
		return grewMB, statuses, retry, inFlight, refusals
	}
	unbudgeted, statuses, _, inFlight, refusals := run(1 << 30)
	if slices.ContainsFunc(statuses, func(s int) bool { return s != http.StatusOK }) {
		t.Fatalf("answers %v without a budget; want all %d", statuses, http.StatusOK)
	}
	// Each answer admitted is read whole before it is written: all of them
	// are held while their callers read nothing.
	if inFlight < parallel*size/2 || refusals != 0 {
		t.Errorf("without a budget: %d answer bytes in flight, %d refusals; want %d answers' (%d MB each) held, none refused", inFlight, refusals, parallel, size>>20)
	}
	if unbudgeted < parallel*size>>20 {
		t.Fatalf("the live heap grew by %d MB with %d answers of %d MB held: they were not held at once", unbudgeted, parallel, size>>20)
	}
	budgeted, statuses, retry, inFlight, refusals := run(40 << 20) // one 32 MB answer at a time
	if inFlight < size/2 || inFlight > 40<<20 || refusals != parallel-1 {
		t.Errorf("within a 40 MiB budget: %d answer bytes in flight, %d refusals; want one answer's (%d MB) held, %d refused", inFlight, refusals, size>>20, parallel-1)
	}
	ok, refused := 0, 0
	for i, s := range statuses {
		switch {
		case s == http.StatusOK:
			ok++
		case s == http.StatusServiceUnavailable && retry[i] != "":
			refused++
		}
	}
	if ok != 1 || refused != parallel-1 {
		t.Errorf("answers %v (Retry-After %q) within a 40 MiB budget; want one %d, the others %d with Retry-After", statuses, retry, http.StatusOK, http.StatusServiceUnavailable)
	}
	if budgeted > unbudgeted/2 {
		t.Errorf("the live heap grew by %d MB with the budget, %d MB without: want at most half", budgeted, unbudgeted)
	}
}

// a2aBegin posts a JSON-RPC call and returns the answer once its status and
// headers are read, its body not; nil (the test failed) if there is none.
// It is safe to call from a goroutine (it fails the test with t.Error).
func a2aBegin(t *testing.T, url, token, method string, params any) *http.Response {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Error(err)
		return nil
	}
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// liveHeap is the bytes in Warden's heap after a collection, read from its
// admin port: the heap profile with gc=1 collects first, and with debug=1
// ends with runtime.MemStats.
func liveHeap(t *testing.T, admin string) int {
	t.Helper()
	b, status := httpGet(t, admin+"/debug/pprof/heap?gc=1&debug=1")
	m := heapAlloc.FindStringSubmatch(b)
	if m == nil {
		t.Fatalf("no HeapAlloc in the heap profile (HTTP %d)", status)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var heapAlloc = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

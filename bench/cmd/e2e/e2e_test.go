package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/bench/report"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want time.Duration
		err  bool
	}{
		{"plain", "27097 (cat) R 27063 27063 11485 0 -1 4194304 122 0 0 0 250 130 0 0 20 0 1 0", 3800 * time.Millisecond, false},
		{"spaces and parentheses in the name", "42 (my (odd) name) S 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0", 100 * time.Millisecond, false},
		{"malformed", "garbage", 0, true},
		{"short", "1 (x) R 1 2 3", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat(tc.stat)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseStat = %v, %v; want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseSwitches(t *testing.T) {
	tests := []struct {
		name   string
		status string
		v, nv  int64
	}{
		{"both", "Name:\twarden\nThreads:\t5\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n", 1234, 56},
		{"none", "Name:\tx\n", 0, 0},
		{"not a number", "voluntary_ctxt_switches:\tmany\nnonvoluntary_ctxt_switches:\t7\n", 0, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if v, nv := parseSwitches(tc.status); v != tc.v || nv != tc.nv {
				t.Fatalf("parseSwitches = %d, %d; want %d, %d", v, nv, tc.v, tc.nv)
			}
		})
	}
}

func TestParseRSS(t *testing.T) {
	got, err := parseRSS("Name:\twarden\nVmPeak:\t  900 kB\nVmRSS:\t    2080 kB\nThreads:\t5\n")
	if err != nil || got != 2080*1024 {
		t.Fatalf("parseRSS = %d, %v", got, err)
	}
	if _, err := parseRSS("Name:\tx\n"); err == nil {
		t.Fatal("no VmRSS: want an error")
	}
}

func TestHandoffSlot(t *testing.T) {
	tests := []struct {
		i       int
		session int
		offer   bool
	}{
		{0, 0, true},
		{handoffBlock - 1, handoffBlock - 1, true},
		{handoffBlock, 0, false},
		{2*handoffBlock - 1, handoffBlock - 1, false},
		{2 * handoffBlock, handoffBlock, true},
		{3 * handoffBlock, handoffBlock, false},
	}
	for _, tc := range tests {
		s, o := handoffSlot(tc.i)
		if s != tc.session || o != tc.offer {
			t.Errorf("handoffSlot(%d) = %d, %v; want %d, %v", tc.i, s, o, tc.session, tc.offer)
		}
	}
	// every session gets exactly one offer and one accept, the offer first
	seen := map[int]int{}
	for i := range 8 * handoffBlock {
		s, offer := handoffSlot(i)
		if offer != (seen[s] == 0) {
			t.Fatalf("message %d: session %d out of order", i, s)
		}
		seen[s]++
	}
	for s, n := range seen {
		if n != 2 {
			t.Fatalf("session %d got %d messages", s, n)
		}
	}
}

func TestMemoryFigures(t *testing.T) {
	const mb = 1 << 20
	figs := memoryFigures("memory", []memoryPoint{
		{Sessions: 1000, WardenRSS: 40 * mb, WardenHeap: 10 * mb, RuntimeRSS: 60 * mb},
		{Sessions: 10_000, WardenRSS: 50 * mb, WardenHeap: 18 * mb, RuntimeRSS: 120 * mb},
		{Sessions: 100_000, WardenRSS: 50*mb + 90_000*900, WardenHeap: 18*mb + 90_000*700, RuntimeRSS: 120*mb + 90_000*7000},
	})
	var got []string
	for _, f := range figs {
		got = append(got, f.Name+" = "+f.ValueText()+" "+string(f.Verdict()))
	}
	want := []string{
		"Warden RSS with 10,000 live sessions = 50.0 MiB -",
		"Warden RSS with 100,000 live sessions = 127.2 MiB -",
		"Warden RSS per session, 10,000 → 100,000 sessions = 900 B/session yes",
		"Warden Go heap per session, 10,000 → 100,000 sessions = 700 B/session -",
		"runtime RSS per session (for comparison), 10,000 → 100,000 sessions = 7000 B/session -",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTaskID(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"JSON", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t-1"}}`, "t-1"},
		{"SSE", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"taskId\":\"t-2\"}}\n\n", "t-2"},
		{"error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := taskID([]byte(tc.body))
			if got != tc.want || (err != nil) != (tc.want == "") {
				t.Fatalf("taskID = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNoiseNote(t *testing.T) {
	figs := []report.Figure{{Name: "a", Note: "2 failed"}, {Name: "b"}}
	noiseNote(figs, []runRecord{{CPU: map[string]float64{"other": 0.1}}})
	if figs[0].Note != "2 failed" {
		t.Fatalf("quiet machine noted: %q", figs[0].Note)
	}
	noiseNote(figs, []runRecord{{CPU: map[string]float64{"other": 0.1}}, {CPU: map[string]float64{"other": 1.26}}})
	if !strings.HasPrefix(figs[0].Note, "2 failed; other work on the machine") || !strings.Contains(figs[0].Note, "1.3 of the") {
		t.Fatalf("note %q", figs[0].Note)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100_000: "100,000", 1_234_567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestChartPanels(t *testing.T) {
	run := func(sc, side, load string, rate float64) runRecord {
		return runRecord{Scenario: sc, Side: side, Load: load, Rate: rate}
	}
	panels := chartPanels([]runRecord{
		run("task", "direct", "200 msg/s", 200), run("task", "Warden", "200 msg/s", 200),
		run("task", "direct", "1000 msg/s", 1000), run("task", "Warden", "1000 msg/s", 1000),
		run("task", "direct", "500 msg/s", 500), run("task", "Warden", "500 msg/s", 500),
		run("task", "direct", "saturation", 0), run("task", "Warden", "saturation", 0),
		run("mcp", "direct", "500 req/s", 500), run("mcp", "Warden", "500 req/s", 500),
		run("memory", "Warden", "", 0),
	})
	var got []string
	for _, p := range panels {
		got = append(got, fmt.Sprintf("%s: %d series", p.Title, len(p.Series)))
	}
	if want := "task, 500 msg/s: 2 series|mcp, 500 req/s: 2 series"; strings.Join(got, "|") != want {
		t.Fatalf("panels %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestNginxConf(t *testing.T) {
	tests := []struct {
		proto string
		want  []string
		not   []string
	}{
		{"grpc", []string{"listen 127.0.0.1:9000 http2;", "grpc_pass grpc://upstream;", "server 127.0.0.1:8000;", "keepalive 64;"}, []string{"proxy_pass"}},
		{"http", []string{"listen 127.0.0.1:9000;", "proxy_pass http://upstream;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`, "proxy_buffering off;"}, []string{"grpc_pass", "http2"}},
	}
	for _, tc := range tests {
		t.Run(tc.proto, func(t *testing.T) {
			conf := nginxConf("/tmp/x", "127.0.0.1:9000", tc.proto, "127.0.0.1:8000")
			for _, w := range append(tc.want, "master_process off;", "daemon off;", "worker_processes 1;", "error_log stderr", "pid /tmp/x/nginx.pid;") {
				if !strings.Contains(conf, w) {
					t.Errorf("config lacks %q:\n%s", w, conf)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(conf, n) {
					t.Errorf("config has %q:\n%s", n, conf)
				}
			}
		})
	}
}

func TestTaskSessions(t *testing.T) {
	many := &taskWork{sessions: make([]string, 10)}
	hot := &taskWork{hot: true, sessions: make([]string, 3)}
	// 16 messages in flight: on 10 sessions for the many-sessions workload,
	// on one for the hot one
	inFlight := func(w *taskWork, from int) map[int]bool {
		seen := map[int]bool{}
		for i := from; i < from+16; i++ {
			seen[w.session(i)] = true
		}
		return seen
	}
	if got := len(inFlight(many, 500)); got != 10 {
		t.Errorf("many sessions: 16 in flight on %d sessions, want 10", got)
	}
	if got := len(inFlight(hot, hotSessionUpdates+10)); got != 1 {
		t.Errorf("hot session: 16 in flight on %d sessions, want 1", got)
	}
	counts := map[int]int{}
	for i := range 10 * updatesPerSession {
		counts[many.session(i)]++
	}
	for k, n := range counts {
		if n != updatesPerSession {
			t.Errorf("session %d got %d updates, want %d", k, n, updatesPerSession)
		}
	}
}

func TestUnusedStem(t *testing.T) {
	dir := t.TempDir()
	full := record{Date: "2026-11-28T09:41:07Z"}
	quick := record{Date: "2026-11-28T09:41:07Z", Quick: true}
	if got := full.unused(dir); got != "2026-11-28" {
		t.Fatalf("first run of the day: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "2026-11-28.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := full.unused(dir); got != "2026-11-28-0941" {
		t.Fatalf("second run of the day: %q, want the start time added (the first record kept)", got)
	}
	if got := quick.unused(dir); got != "2026-11-28-quick" {
		t.Fatalf("a quick run after a full one: %q", got)
	}
	full.name = full.unused(dir)
	if got := full.stem(); got != "2026-11-28-0941" {
		t.Fatalf("stem of a named record: %q", got)
	}
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentwarden/warden/bench/report"
)

// memoryWarm is how many sessions are started before the first reading, so
// that the start-up allocations (connections, policy compilation, caches)
// are not counted per session.
const memoryWarm = 1000

// memoryPoint is one reading of the memory scenario.
type memoryPoint struct {
	Sessions   int   `json:"sessions"`
	WardenRSS  int64 `json:"warden_rss_bytes"`
	WardenHeap int64 `json:"warden_heap_inuse_bytes"`
	RuntimeRSS int64 `json:"runtime_rss_bytes"`
	CreateMs   int64 `json:"create_ms"`
}

// memory starts task sessions (SessionStart only) through a fresh Warden and
// reads its resident memory (VmRSS) and Go heap after a forced collection at
// each count.
func (b *bench) memory(ctx context.Context, counts []int) (outcome, []memoryPoint, error) {
	const group = "memory (live sessions)"
	rt, rtAddr, err := b.startRuntime()
	if err != nil {
		return outcome{}, nil, err
	}
	defer rt.stop()
	wAddr, err := freeAddr()
	if err != nil {
		return outcome{}, nil, err
	}
	largest := counts[len(counts)-1]
	w, err := b.startWarden("warden-memory", wAddr, "--macp-listen", wAddr, "--macp-upstream", rtAddr,
		"--plaintext", "--auth", "dev", "--insecure-dev-auth", "--sessions", strconv.Itoa(2*largest),
		// Without the collector's floor: a floor adds up to its size to RSS
		// whatever the sessions, which is not what one session costs.
		"--gc-min-heap-bytes", "-1")
	if err != nil {
		return outcome{}, nil, err
	}
	defer w.stop()
	admin := w.admin
	c, err := dialMACP(wAddr)
	if err != nil {
		return outcome{}, nil, err
	}
	defer c.close()

	created := 0
	read := func() (memoryPoint, error) {
		p := memoryPoint{Sessions: created}
		heap, err := collect(ctx, admin)
		if err != nil {
			return p, err
		}
		p.WardenHeap = heap
		if p.WardenRSS, err = rss(w.pid()); err != nil {
			return p, err
		}
		p.RuntimeRSS, err = rss(rt.pid())
		return p, err
	}
	grow := func(to int) (time.Duration, error) {
		t0 := time.Now()
		// bounded in time as well as in count
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		err := parallel(cctx, to-created, func(ctx context.Context, _ int) error {
			return c.send(ctx, taskMode, "SessionStart", "s", newSessionID(), "planner", taskStart)
		})
		if err != nil {
			return 0, fmt.Errorf("memory: starting sessions: %w", err)
		}
		created = to
		return time.Since(t0), nil
	}
	if _, err := grow(memoryWarm); err != nil {
		return outcome{}, nil, err
	}
	base, err := read()
	if err != nil {
		return outcome{}, nil, err
	}
	points := []memoryPoint{base}
	for _, n := range counts {
		took, err := grow(n)
		if err != nil {
			return outcome{}, points, err
		}
		p, err := read()
		if err != nil {
			return outcome{}, points, err
		}
		p.CreateMs = took.Milliseconds()
		points = append(points, p)
		b.logf("memory: %d sessions (started at %.0f/s): Warden RSS %.1f MiB, heap %.1f MiB; runtime RSS %.1f MiB", n,
			float64(n-points[len(points)-2].Sessions)/took.Seconds(), mib(p.WardenRSS), mib(p.WardenHeap), mib(p.RuntimeRSS))
	}
	return outcome{figs: memoryFigures(group, points)}, points, nil
}

// memoryFigures derives the table's lines: resident memory at each count,
// and the cost of one more session as the slope between the last two
// readings (resident memory against the target, the Go heap and the
// runtime's resident memory for comparison).
func memoryFigures(group string, points []memoryPoint) []report.Figure {
	var figs []report.Figure
	for _, p := range points[1:] {
		figs = append(figs, report.Figure{Group: group, Name: fmt.Sprintf("Warden RSS with %s live sessions", thousands(p.Sessions)), Value: mib(p.WardenRSS), Unit: "MiB"})
	}
	if len(points) < 2 {
		return figs
	}
	a, z := points[len(points)-2], points[len(points)-1]
	n := float64(z.Sessions - a.Sessions)
	span := fmt.Sprintf("%s → %s sessions", thousands(a.Sessions), thousands(z.Sessions))
	figs = append(figs,
		report.Figure{Group: group, Name: "Warden RSS per session, " + span, Value: float64(z.WardenRSS-a.WardenRSS) / n, Unit: "B/session", Target: report.SessionBytes,
			Note: "VmRSS from /proc after a forced GC (admin /debug/pprof/heap?gc=1), sessions started with SessionStart through Warden, gc.min_heap_bytes -1 (no floor)"},
		report.Figure{Group: group, Name: "Warden Go heap per session, " + span, Value: float64(z.WardenHeap-a.WardenHeap) / n, Unit: "B/session"},
		report.Figure{Group: group, Name: "runtime RSS per session (for comparison), " + span, Value: float64(z.RuntimeRSS-a.RuntimeRSS) / n, Unit: "B/session"},
	)
	return figs
}

// collect forces a garbage collection in Warden through its admin port and
// returns the heap in use afterwards (go_memstats_heap_inuse_bytes).
func collect(ctx context.Context, admin string) (int64, error) {
	get := func(path string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+path, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", fmt.Errorf("admin %s: %w", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("admin %s: %s", path, resp.Status)
		}
		return string(b), err
	}
	if _, err := get("/debug/pprof/heap?gc=1"); err != nil {
		return 0, err
	}
	time.Sleep(500 * time.Millisecond) // let the scavenger return freed pages
	metrics, err := get("/metrics")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(metrics))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("admin /metrics: no go_memstats_heap_inuse_bytes")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// thousands prints n with thousands separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

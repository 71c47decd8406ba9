package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/bench/report"
)

// jsonWork encodes and decodes JSON for each message, so that a profile
// of this process says json.
type jsonWork struct{}

func (jsonWork) setup(context.Context, int) error { return nil }

func (jsonWork) do(context.Context, int) error {
	v := map[string]any{"jsonrpc": "2.0", "id": 1, "params": map[string]any{"taskId": strings.Repeat("t", 64)}}
	for range 50 {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil {
			return err
		}
	}
	return nil
}

// The profile run takes a real CPU profile from a net/http/pprof admin
// port (this test process's) at the comparison's measured rate, or at
// saturation when it has none, saves it in the record's profiles and
// summarizes it; an admin port without pprof is a profile with an error,
// not a failed scenario.
func TestProfileRun(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	admin := httptest.NewServer(mux)
	defer admin.Close()
	bare := httptest.NewServer(http.NotFoundHandler())
	defer bare.Close()
	dir := filepath.Join(t.TempDir(), "2026-11-28-quick-profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hop := func(admin string) side {
		return side{name: report.Warden, work: func() workload { return jsonWork{} }, procs: map[string]int{"hop": os.Getpid()}, admin: admin}
	}
	tests := []struct {
		name  string
		c     comparison
		rate  float64
		load  string
		error string
	}{
		{"at the measured rate", comparison{id: "mcp-0", hops: []side{hop(strings.TrimPrefix(admin.URL, "http://"))}}, 200, "200 req/s", ""},
		{"at saturation on one session", comparison{id: "task-hot", hot: true, workers: 2, satMax: 1000, hops: []side{hop(strings.TrimPrefix(admin.URL, "http://"))}}, 0, "saturation, 2 in flight on one session", ""},
		{"no pprof", comparison{id: "a2a-0", hops: []side{hop(strings.TrimPrefix(bare.URL, "http://"))}}, 200, "200 req/s", "HTTP 404"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.group, c.profiles, c.profileFor = "group "+c.id, dir, time.Second
			c.timing = timing{warmup: 100 * time.Millisecond, measure: 500 * time.Millisecond}
			p, err := c.profileRun(context.Background(), c.hops[0], c.hops[0].admin, c.id+"-cpu.pprof", tc.rate, "req/s", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if p.Group != c.group || p.Side != report.Warden || p.Load != tc.load || p.MeasuredCores <= 0 || p.Throughput <= 0 || p.Failed != 0 {
				t.Errorf("profile %+v: want group %q, side Warden, load %q, measured CPU and throughput, no failures", p, c.group, tc.load)
			}
			if tc.error != "" {
				if !strings.Contains(p.Error, tc.error) || p.File != "" {
					t.Errorf("error %q, file %q; want %q and no file", p.Error, p.File, tc.error)
				}
				return
			}
			if p.Error != "" {
				t.Fatalf("error %s", p.Error)
			}
			if want := filepath.Join("2026-11-28-quick-profiles", c.id+"-cpu.pprof"); p.File != want {
				t.Errorf("file %q, want %q (relative to the record)", p.File, want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), p.File)); err != nil {
				t.Error(err)
			}
			// Seconds is the runtime's own clock, started on its profile
			// writer's goroutine, which a loaded machine starts late: 0.8 s
			// of a 1 s profile was seen under CI load; none is the failure.
			if p.Seconds <= 0 || p.Samples == 0 || len(p.TopFlat) == 0 || len(p.TopCum) == 0 {
				t.Errorf("profile of %.1f s, %d samples, top %d/%d", p.Seconds, p.Samples, len(p.TopFlat), len(p.TopCum))
			}
			if !slices.ContainsFunc(p.Layers, func(s report.Share) bool { return s.Name == report.LayerJSON && s.Cum > 0 }) {
				t.Errorf("no json in %+v", p.Layers)
			}
		})
	}
}

// The CPU target of the MACP sidecar is nginx's, of the HTTP sidecars the
// null net/http hop's; a comparison without the side, or informative, has
// none.
func TestFigureTargets(t *testing.T) {
	sides := func(names ...string) []side {
		var s []side
		for _, n := range names {
			s = append(s, side{name: n})
		}
		return s
	}
	tests := []struct {
		name  string
		c     comparison
		rule  targetRule
		limit float64 // 0: no target
		basis string
	}{
		{"MACP CPU against nginx", comparison{hops: sides(report.Warden, report.NullGRPC, report.NullFrames, report.Nginx)}, macpCPU, 12.5, "1.25 × nginx"},
		{"HTTP CPU against the null net/http hop", comparison{hops: sides(report.Warden, report.NullHTTP, report.Nginx)}, httpCPU, 33, "1.1 × null net/http hop"},
		{"HTTP saturation against nginx", comparison{hops: sides(report.Warden, report.NullHTTP, report.Nginx)}, saturation, 10, "nginx's"},
		{"hot session", comparison{hops: sides(report.Warden, report.NullGRPC, report.NullFrames, report.Nginx)}, hotSession, 8, "0.8 × nginx"},
		{"no nginx", comparison{hops: sides(report.Warden, report.NullHTTP)}, saturation, 0, ""},
		{"informative", comparison{informative: true, hops: sides(report.Warden, report.NullHTTP, report.Nginx)}, httpCPU, 0, ""},
		{"no rule", comparison{hops: sides(report.Warden, report.NullHTTP, report.Nginx)}, targetRule{}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Warden 40, then each other side: the null hop 30, nginx 10
			values := []float64{40}
			for _, h := range tc.c.hops[1:] {
				values = append(values, map[string]float64{report.NullGRPC: 30, report.NullHTTP: 30, report.NullFrames: 20, report.Nginx: 10}[h.name])
			}
			f := tc.c.figure("cpu", "% core", values, tc.rule, "")
			switch {
			case tc.limit == 0 && f.Target != nil:
				t.Fatalf("target %+v, want none", f.Target)
			case tc.limit == 0:
			case f.Target == nil || f.Target.Limit != tc.limit || f.Target.Basis != tc.basis || f.Target.Of != tc.rule.of:
				t.Fatalf("target %+v, want ≤ or ≥ %v (%s) of %s", f.Target, tc.limit, tc.basis, tc.rule.of)
			}
		})
	}
}

func TestProfileLength(t *testing.T) {
	for _, tc := range []struct {
		cores   float64
		longest time.Duration
		want    time.Duration
	}{
		{0.1, 30 * time.Second, 30 * time.Second}, // 50 s wanted
		{0.25, 30 * time.Second, 20 * time.Second},
		{0.3, 30 * time.Second, 17 * time.Second}, // rounded up
		{1, 30 * time.Second, 5 * time.Second},
		{4, 30 * time.Second, 3 * time.Second},
		{0, 30 * time.Second, 3 * time.Second},
		{0.25, 10 * time.Second, 10 * time.Second},
		{1, 1500 * time.Millisecond, time.Second},
	} {
		if got := profileLength(tc.cores, tc.longest); got != tc.want {
			t.Errorf("profileLength(%v, %v) = %v, want %v", tc.cores, tc.longest, got, tc.want)
		}
	}
}

func TestDefaultDoor(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, help, want string }{
		{"relay", "  -transport string\n    \tthe MACP sidecar's front door (macp.transport; default relay)\n", "relay"},
		{"no transport flag", "  -macp-listen string\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(bin, []byte("#!/bin/sh\ncat >&2 <<'EOF'\n"+tc.help+"EOF\nexit 2\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if got := defaultDoor(bin); got != tc.want {
				t.Fatalf("defaultDoor = %q, want %q", got, tc.want)
			}
		})
	}
	cols := columns("relay", "nginx/1.22.1", false)
	var names []string
	for _, c := range cols {
		names = append(names, c.Side)
	}
	if got := strings.Join(names, ", "); got != "Warden, null grpc-go hop, null frame relay hop, null net/http hop, nginx" {
		t.Errorf("columns %s", got)
	}
	if !strings.Contains(cols[0].Is, "--transport relay, the default MACP front door") || !strings.Contains(cols[0].Is, "HTTP/2 frame relay") {
		t.Errorf("Warden is %q", cols[0].Is)
	}
	if cols := columns("relay", "", true); cols[1].Side != report.WardenGRPC || !strings.Contains(cols[1].Is, "--transport grpc") {
		t.Errorf("with -warden-grpc: %+v", cols[1])
	}
}

package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentwarden/warden/bench/load"
)

func TestVerdict(t *testing.T) {
	tests := []struct {
		name string
		fig  Figure
		want Verdict
	}{
		{"added p50 under", Figure{Value: 80, Target: AddedP50(75)}, Met},
		{"added p50 on the bound", Figure{Value: 100, Target: AddedP50(75)}, Met},
		{"added p50 over", Figure{Value: 101, Target: AddedP50(75)}, Missed},
		{"added p99 within nginx + 150 µs", Figure{Value: 400, Target: AddedP99(300)}, Met},
		{"added p99 over nginx + 150 µs", Figure{Value: 451, Target: AddedP99(300)}, Missed},
		{"negative added latency (noise)", Figure{Value: -12, Target: AddedP99(-30)}, Met},
		{"cpu within 1.25 x nginx", Figure{Value: 12, Target: CPUPer1000(10)}, Met},
		{"cpu over 1.25 x nginx", Figure{Value: 13, Target: CPUPer1000(10)}, Missed},
		{"cpu within 1.1 x the null net/http hop", Figure{Value: 33, Target: CPUPerNullHTTP(30)}, Met},
		{"cpu over 1.1 x the null net/http hop", Figure{Value: 33.1, Target: CPUPerNullHTTP(30)}, Missed},
		{"throughput ratio met", Figure{Value: 0.93, Target: ThroughputRatio(0.9)}, Met},
		{"throughput ratio missed", Figure{Value: 0.44, Target: ThroughputRatio(0.8)}, Missed},
		{"hot session ratio met", Figure{Value: 0.65, Target: HotSessionRatio(0.8)}, Met},
		{"hot session ratio missed", Figure{Value: 0.63, Target: HotSessionRatio(0.8)}, Missed},
		{"memory", Figure{Value: 1500, Target: SessionBytes}, Missed},
		{"enforce", Figure{Value: 4.2, Target: EnforceMedian}, Met},
		{"no target", Figure{Value: 1e9}, NoTarget},
		{"not run wins", Figure{Value: 1, Target: AddedP50(0), NotRun: "no server"}, NotMeasured},
		{"NaN misses", Figure{Value: math.NaN(), Target: AddedP50(0)}, Missed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fig.Verdict(); got != tc.want {
				t.Fatalf("Verdict = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{
		{4.25, "µs", "4.2 µs"},
		{412.6, "µs", "413 µs"},
		{0.876, "ratio", "0.88"},
		{2480.4, "msg/s", "2480 msg/s"},
		{731.2, "B/session", "731 B/session"},
		{12.34, "MiB", "12.3 MiB"},
		{7.26, "% core", "7.3% of a core"},
		{math.NaN(), "µs", "n/a"},
	}
	for _, tc := range tests {
		if got := Format(tc.v, tc.unit); got != tc.want {
			t.Errorf("Format(%v, %q) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
	f := Figure{Value: 0.9, Unit: "ratio", Target: ThroughputRatio(0.8)}
	if got := f.TargetText(); got != "≥ 0.80 (nginx's)" {
		t.Errorf("TargetText = %q", got)
	}
	if got := (Figure{Unit: "B/session", Target: SessionBytes}).TargetText(); got != "≤ 1024 B/session" {
		t.Errorf("TargetText = %q", got)
	}
}

const microOut = `goos: linux
pkg: github.com/agentwarden/warden/proxy
BenchmarkEnforce/task/TaskUpdate/allow-2         	  300000	      4100 ns/op	    1200 B/op	      20 allocs/op
BenchmarkEnforce/task/TaskUpdate/allow-2         	  300000	      3900 ns/op	    1200 B/op	      20 allocs/op
BenchmarkEnforce/task/TaskUpdate/allow-2         	  300000	      4000 ns/op	    1200 B/op	      20 allocs/op
BenchmarkEnforce/task/Commitment/allow-2         	  100000	     12000 ns/op	    3600 B/op	      40 allocs/op
BenchmarkEnforce/task/Commitment/allow-2         	  100000	     14000 ns/op	    3600 B/op	      40 allocs/op
BenchmarkSessionMemory-2                         	       1	 900000000 ns/op	       700.0 B/session
BenchmarkSessionMemory-2                         	       1	 900000000 ns/op	       720.0 B/session
PASS
ok  	github.com/agentwarden/warden/proxy	10.0s
pkg: github.com/agentwarden/warden/proxy/extauthz
BenchmarkCheck/Send/deny-8   	  50000	     20000 ns/op
pkg: github.com/agentwarden/warden/proxy/macp
BenchmarkSidecarSend-2   	    3000	    400000 ns/op	    130000 cpu-ns/op	   23000 B/op	     361 allocs/op
BenchmarkSidecarSendRelay-2   	    3000	    300000 ns/op	    90000 cpu-ns/op	   16000 B/op	     267 allocs/op
BenchmarkSidecarSendParallel-2   	    3000	    300000 ns/op	    150000 cpu-ns/op	   23000 B/op	     360 allocs/op
pkg: github.com/agentwarden/warden/proxy/mcp
BenchmarkSidecar/tasks-get-2   	    3000	    300000 ns/op	    118000 cpu-ns/op	   21000 B/op	     240 allocs/op
`

func TestMicro(t *testing.T) {
	m, err := ParseMicro(strings.NewReader(microOut))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, unit string
		want       float64
		ok         bool
	}{
		{"BenchmarkEnforce/task/TaskUpdate/allow", "ns/op", 4000, true},
		{"BenchmarkEnforce/task/Commitment/allow", "ns/op", 13000, true},
		{"BenchmarkSessionMemory", "B/session", 710, true},
		{"BenchmarkCheck/Send/deny", "ns/op", 20000, true},
		{"BenchmarkEnforce/task/TaskUpdate/allow", "B/session", 0, false},
		{"BenchmarkMissing", "ns/op", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name+" "+tc.unit, func(t *testing.T) {
			got, ok := m.Median(tc.name, tc.unit)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Median = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	figs := MicroFigures(m)
	var names []string
	for _, f := range figs {
		names = append(names, f.Name+"="+f.ValueText()+" "+string(f.Verdict()))
	}
	want := []string{
		"Enforce median, TaskUpdate allowed=4.0 µs yes",
		"Enforce median, slowest of 2 messages (task/Commitment/allow)=13 µs NO",
		"ext_authz Check median, Send/deny=20 µs -",
		"allocations per message through the sidecar, MACP Send, grpc-go door (the test oracle)=361 allocs/op -",
		"CPU per message through the sidecar, MACP Send, grpc-go door (the test oracle)=130 µs -",
		"allocations per message through the sidecar, MACP Send=267 allocs/op -",
		"CPU per message through the sidecar, MACP Send=90 µs -",
		"allocations per message through the sidecar, MCP tasks-get=240 allocs/op -",
		"CPU per message through the sidecar, MCP tasks-get=118 µs -",
		"heap per tracked task session=710 B/session yes",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("micro figures:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

func TestTables(t *testing.T) {
	figs := []Figure{
		{Group: "MACP task", Name: "added p50 at 500 msg/s (direct 510 µs)", Value: 60, Unit: "µs", Target: AddedP50(75), Note: "no errors",
			Baselines: []Baseline{{Nginx, 75}, {NullGRPC, 240}, {NullFrames, 90}}},
		{Group: "MACP task", Name: "added p50 at 1000 msg/s (direct 410 µs)", Value: 130, Unit: "µs", Target: AddedP50(75),
			Baselines: []Baseline{{Nginx, 75}, {NullGRPC, 240}, {NullFrames, 90}}},
		{Group: "MACP task", Name: "hop CPU per 1,000 msg/s", Value: 20, Unit: "% core", Target: CPUPer1000(8),
			Baselines: []Baseline{{Nginx, 8}, {NullGRPC, 29}, {NullFrames, 14}}},
		{Group: "MACP task", Name: "throughput ratio", Value: 0.5, Unit: "ratio", Target: ThroughputRatio(0.8), Baselines: []Baseline{{Nginx, 0.8}}},
		{Group: "MCP tasks/get", Name: "hop CPU per 1,000 req/s", Value: 30, Unit: "% core", Target: CPUPerNullHTTP(28), Note: "a | pipe",
			Baselines: []Baseline{{NullHTTP, 28}, {Nginx, 9}}},
		{Group: "MCP", Name: "scenario mcp", NotRun: "warden serve has no --mcp-listen | yet"},
	}
	rep := Report{Figures: figs, Columns: []Column{{Warden, "as it ships"}, {WardenGRPC, "the oracle"}, {NullGRPC, "grpc-go"},
		{NullFrames, "frames"}, {NullHTTP, "net/http"}, {Nginx, "nginx"}},
		Profiles: []Profile{{Group: "MCP tasks/get", Side: Warden, Load: "500 req/s", File: "x-profiles/mcp-cpu.pprof", Seconds: 5, Samples: 250,
			SampledCores: 0.5, MeasuredCores: 0.15, Throughput: 498, Failed: 2, FirstError: "HTTP 502", Layers: []Share{{LayerNetHTTP, 0.4, 0.7}, {LayerSyscalls, 0.3, 0.3}}, TopFlat: []Share{{"syscall.Syscall6", 0.3, 0.3}},
			TopCum: []Share{{"net/http.(*conn).serve", 0.01, 0.6}, {"github.com/agentwarden/warden/proxy/mcp.(*Sidecar).ServeHTTP", 0.02, 0.4}}}},
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// the legend names only the sides some figure has (no oracle here)
		"- **Warden**: as it ships\n- **null grpc-go hop**: grpc-go\n- **null frame relay hop**: frames\n- **null net/http hop**: net/http\n- **nginx**: nginx\n",
		// the summary of targets: per scenario, per kind
		"| scenario | CPU per message | added p50 | saturation |",
		"| MACP task | NO: 20.0% of a core (2.50 × nginx), target ≤ 10.0% of a core (1.25 × nginx) | NO: met at 1 of 2 rates; worst 130 µs, target ≤ 100 µs (nginx + 25 µs) (1000 msg/s) | NO: 0.50, target ≥ 0.80 (nginx's) |",
		"| MCP tasks/get | yes: 30.0% of a core (1.07 × null net/http hop), target ≤ 30.8% of a core (1.1 × null net/http hop) | - | - |",
		// each scenario has its own columns, in the table's order
		"## MACP task\n\n| figure | Warden | null grpc-go hop | null frame relay hop | nginx | target | met |",
		"| added p50 at 500 msg/s (direct 510 µs) [1] | 60 µs | 240 µs | 90 µs | 75 µs | ≤ 100 µs (nginx + 25 µs) | yes |",
		"| throughput ratio | 0.50 | - | - | 0.80 | ≥ 0.80 (nginx's) | NO |",
		"\n1. no errors\n",
		"## MCP tasks/get\n\n| figure | Warden | null net/http hop | nginx | target | met |",
		"| hop CPU per 1,000 req/s [2] | 30.0% of a core | 28.0% of a core | 9.0% of a core | ≤ 30.8% of a core (1.1 × null net/http hop) | yes |",
		"\n2. a | pipe\n",
		// the profile beside its scenario
		"**Where the time goes** (Warden: CPU profile `x-profiles/mcp-cpu.pprof`; 500 req/s (498/s answered, 2 failed: HTTP 502), 5 s, 250 samples, 0.50 cores sampled, 0.15 measured (30.1% of a core per 1,000/s);",
		"| net/http | 40.0% | 70.0% |",
		"| `syscall.Syscall6` | 30.0% | 30.0% | `net/http.(*conn).serve` | 1.0% | 60.0% |",
		"|  |  |  | `warden/proxy/mcp.(*Sidecar).ServeHTTP` | 2.0% | 40.0% |",
		`| scenario mcp | not run: warden serve has no --mcp-listen \| yet | - | not run |`,
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), WardenGRPC) {
		t.Errorf("markdown has a column no figure has:\n%s", md.String())
	}
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MACP TASK", "not run", "null net/http hop: net/http",
		"where the time goes (Warden: 500 req/s (498/s answered, 2 failed: HTTP 502), 5 s, 250 samples, 0.50 cores sampled, 0.15 measured (30.1% of a core per 1,000/s)): net/http 40%, syscalls (read, write, epoll, futex) 30%"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text table lacks %q:\n%s", want, txt.String())
		}
	}
	if missed := MissedFigures(figs); len(missed) != 3 || missed[0].Name != "added p50 at 1000 msg/s (direct 410 µs)" {
		t.Errorf("missed %v", missed)
	}
}

// A record written before records carried their columns is read with the
// legacy legend: its Warden column was the grpc-go door.
func TestLegacyColumns(t *testing.T) {
	rep := Report{Figures: []Figure{{Group: "MACP task", Name: "cpu", Value: 33, Unit: "% core", Target: &Target{Op: AtMost, Limit: 11, Basis: "1.25 × nginx"},
		Baselines: []Baseline{{"Warden relay", 15}, {"null Go", 29}, {"null relay", 14}, {Nginx, 9}}}}}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- **Warden**: bin/warden; for MACP the grpc-go front door (--transport grpc",
		"- **Warden relay**: bin/warden --transport relay",
		"| figure | Warden | Warden relay | null Go | null relay | nginx | target | met |",
		"| cpu | 33.0% of a core | 15.0% of a core | 29.0% of a core | 14.0% of a core | 9.0% of a core | ≤ 11.0% of a core (1.25 × nginx) | NO |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	// its targets' kinds are read from their basis
	if !strings.Contains(md.String(), "| scenario | CPU per message |\n|---|---|\n| MACP task | NO: 33.0% of a core, target ≤ 11.0% of a core (1.25 × nginx) |") {
		t.Errorf("legacy targets not summarized:\n%s", md.String())
	}
}

func TestChart(t *testing.T) {
	curve := func(scale float64) []load.Point {
		return []load.Point{{Percentile: 0, Micros: 100 * scale}, {Percentile: 50, Micros: 300 * scale}, {Percentile: 99, Micros: 900 * scale}, {Percentile: 100, Micros: 2000 * scale}}
	}
	path := filepath.Join(t.TempDir(), "chart.png")
	err := WriteChart(path, []Panel{
		{Title: "MACP task, 1000 msg/s", Series: []Series{{Name: "direct", Points: curve(1)}, {Name: "Warden", Points: curve(1.2)}}},
		{Title: "MACP handoff, 1000 msg/s", Series: []Series{{Name: "direct", Points: curve(1)}, {Name: "Warden", Points: nil}}},
		{Title: "ext_authz", Series: []Series{{Name: "null", Points: curve(0.1)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("not a PNG (%v)", err)
	}
	if err := WriteChart(path, nil); err == nil {
		t.Fatal("no panels: want an error")
	}
}

func TestLatencyTicks(t *testing.T) {
	for v, want := range map[float64]string{100: "100 µs", 1000: "1 ms", 25_000: "25 ms", 1e6: "1 s", 3.5e6: "3.5 s"} {
		if got := micros(v); got != want {
			t.Errorf("micros(%v) = %q, want %q", v, got, want)
		}
	}
	tests := []struct {
		lo, hi float64
		labels string
	}{
		{300, 5000, "500 µs,1 ms,2 ms,5 ms"},
		{90, 2.5e6, "100 µs,200 µs,500 µs,1 ms,2 ms,5 ms,10 ms,20 ms,50 ms,100 ms,200 ms,500 ms,1 s,2 s"},
		{0, 10, ""},
	}
	for _, tc := range tests {
		var labels []string
		for _, tk := range (latencyTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if l := strings.Join(labels, ","); l != tc.labels {
			t.Errorf("Ticks(%v, %v) labels %q, want %q", tc.lo, tc.hi, l, tc.labels)
		}
	}
}

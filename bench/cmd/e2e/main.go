// Command e2e is the end-to-end half of `make bench`: it starts the real MACP
// runtime, Warden (`bin/warden serve`) and the other servers on loopback,
// drives them with an open-loop generator at fixed rates and a closed loop at
// saturation, direct and through Warden in the same run, and reports what
// enforcement costs as differences and ratios: one table on the terminal
// (with the micro-benchmark figures read from -micro), bench/results/<date>.json,
// a latency chart, and latest.md/latest.png for the README.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentwarden/warden/bench/report"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// defaultDoor is the MACP front door `warden serve` states as its default
// (macp.transport), "" when it states none (no --transport).
func defaultDoor(bin string) string {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	if m := regexp.MustCompile(`macp\.transport; default (\w+)`).FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

// columns say what each side of the table is; door is the MACP front door
// Warden's column runs on (defaultDoor).
func columns(door, nginx string, grpcDoor bool) []report.Column {
	macp := "its only MACP front door (serve -h names no other)"
	switch door {
	case "relay":
		macp = "--transport relay, the default MACP front door serve -h states: the HTTP/2 frame relay (proxy/frames), every MACP call decided on it"
	case "":
	default:
		macp = "--transport " + door + ", the default MACP front door serve -h states"
	}
	cols := []report.Column{
		{Side: report.Warden, Is: "bin/warden serve as it ships: for MACP " + macp + "; for MCP and A2A net/http; for ext_authz grpc-go"},
	}
	if grpcDoor {
		cols = append(cols, report.Column{Side: report.WardenGRPC, Is: "bin/warden-oracle serve --transport grpc: the retired grpc-go MACP door (grpc-go server and client), built only into the test oracle (-tags wardenoracle), which the MACP tests compare the relay with (-warden-grpc)"})
	}
	if nginx == "" {
		nginx = "nginx (not installed here)"
	}
	return append(cols,
		report.Column{Side: report.NullGRPC, Is: "bench/cmd/null -macp: a grpc-go server relaying every call as raw frames over one grpc-go client connection, no decision: what the grpc-go library costs"},
		report.Column{Side: report.NullFrames, Is: "bench/cmd/null -macp -relay: the HTTP/2 frame relay of proxy/frames, no decision: the floor of Warden's MACP front door"},
		report.Column{Side: report.NullHTTP, Is: "bench/cmd/null -mcp: httputil.ReverseProxy on net/http, flushing every write, no decision: the floor of the library the MCP and A2A sidecars stand on"},
		report.Column{Side: report.Nginx, Is: nginx + ", one process (master_process off): grpc_pass (MACP), proxy_pass with upstream keepalive and no buffering (MCP, A2A)"},
	)
}

// scenarioNames are the scenarios in the order they run.
var scenarioNames = []string{"task", "task-hot", "handoff", "extauthz", "extauthz-redis", "mcp", "a2a", "memory"}

func run() error {
	quick := flag.Bool("quick", false, "fewer and shorter runs, 10,000 sessions only (about a minute)")
	out := flag.String("out", "bench/results", "directory of the results")
	micro := flag.String("micro", "", "`go test -bench` output whose figures join the table")
	wardenBin := flag.String("warden", "bin/warden", "the Warden binary")
	runtimeBin := flag.String("runtime", ".peers/cargo/bin/macp-runtime", "the MACP reference runtime")
	mcpServer := flag.String("mcp-server", "", "MCP fixture server command (default: go build ./test/mcptasks)")
	genProcs := flag.Int("gen-procs", 1, "GOMAXPROCS of the load generator (this program)")
	wardenProcs := flag.Int("warden-procs", 1, "GOMAXPROCS of Warden and of the baseline Go servers")
	only := flag.String("scenarios", strings.Join(scenarioNames, ","), "scenarios to run")
	nullAuthz := flag.String("null-extauthz", "", "internal: serve the null ext_authz server on this address")
	profile := flag.String("profile", "", "save Warden's CPU and heap profiles at saturation, per scenario, into this `directory`")
	wardenGRPC := flag.Bool("warden-grpc", false, "MACP scenarios: also run a second Warden on the grpc-go door (--transport grpc), the oracle the MACP tests compare the relay with, in a column beside Warden's; it runs -warden-oracle, the only build that serves that door")
	oracleBin := flag.String("warden-oracle", "bin/warden-oracle", "the test oracle binary (make build: cmd/warden built with -tags wardenoracle), run by -warden-grpc")
	profileSecs := flag.Int("profile-seconds", -1, "longest CPU profile of Warden taken, per scenario, at its measured rate, into the record (<out>/<date>-profiles/): each as long as 500 samples take at the CPU Warden used in the measured runs, 3 s at least; 0: none; default 30, 10 with -quick")
	wardenArgs := flag.String("warden-args", "", "space-separated flags added to every `warden serve` (for example --pipeline-depth 1)")
	wardenEnv := flag.String("warden-env", "", "comma-separated `VAR=value` pairs added to Warden's environment (diagnosis: GODEBUG=gctrace=1)")
	render := flag.String("render", "", "write the table, markdown and chart again from a JSON record, without measuring")
	rounds := flag.Int("rounds", 0, "diagnosis: runs per side and load (default 4, 1 with -quick)")
	roundWarmup := flag.Duration("round-warmup", 0, "diagnosis: warm-up of each run, not recorded (default 500ms, 300ms with -quick)")
	roundMeasure := flag.Duration("round-measure", 0, "diagnosis: measured part of each run (default 2s, 1.5s with -quick)")
	jitter := flag.Bool("jitter", false, "diagnosis: jitter the fixed-rate runs' arrivals within their periods, as the profiled runs do (default: evenly spaced)")
	saturation := flag.Bool("saturation", true, "MCP and A2A: run the closed loop at saturation (false: fixed rates only, for diagnosis)")
	logRuns := flag.Bool("log-runs", false, "diagnosis: log every run's wall time, answers and CPU by process")
	groups := flag.String("groups", "", "diagnosis: run only the MCP and A2A comparisons whose group matches this `regexp` (for example GetTask)")
	flag.Parse()
	if *nullAuthz != "" {
		return serveNullAuthz(*nullAuthz)
	}
	if *render != "" {
		rec, err := readRecord(*render)
		if err != nil {
			return err
		}
		return rec.write(*out)
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(scenarioNames, s) {
			return fmt.Errorf("-scenarios: unknown scenario %q (the scenarios: %s)", s, strings.Join(scenarioNames, ", "))
		}
		want[s] = true
	}
	runtime.GOMAXPROCS(*genProcs)
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	logDir := filepath.Join(*out, "tmp")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	b := &bench{wardenBin: *wardenBin, oracleBin: *oracleBin, runtimeBin: *runtimeBin, self: self, logDir: logDir, wardenProcs: *wardenProcs, quick: *quick,
		// four short rounds per side rather than one long one: the machine is
		// shared, and alternating often spreads other work evenly over both sides
		timing:  timing{warmup: 500 * time.Millisecond, measure: 2 * time.Second, rounds: 4},
		logf:    func(f string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...) },
		profile: *profile, wardenGRPC: *wardenGRPC}
	b.wardenArgs = strings.Fields(*wardenArgs)
	if *wardenEnv != "" {
		b.wardenEnv = strings.Split(*wardenEnv, ",")
	}
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			return err
		}
	}
	if *quick {
		b.timing = timing{warmup: 300 * time.Millisecond, measure: 1500 * time.Millisecond, rounds: 1}
	}
	if *rounds > 0 {
		b.timing.rounds = *rounds
	}
	if *roundWarmup > 0 {
		b.timing.warmup = *roundWarmup
	}
	if *roundMeasure > 0 {
		b.timing.measure = *roundMeasure
	}
	b.timing.jitter, b.timing.logRuns, b.noSaturation = *jitter, *logRuns, !*saturation
	if *groups != "" {
		if b.groups, err = regexp.Compile(*groups); err != nil {
			return fmt.Errorf("-groups: %w", err)
		}
	}
	rec := record{
		Date:  started.Format(time.RFC3339),
		Quick: *quick,
		Machine: describeMachine(map[string]string{
			"generator":           strconv.Itoa(*genProcs),
			"warden":              strconv.Itoa(*wardenProcs),
			"null ext_authz":      strconv.Itoa(*wardenProcs),
			"null hops":           strconv.Itoa(*wardenProcs),
			"nginx":               "1 worker process",
			"mcp servers (Go)":    strconv.Itoa(*wardenProcs),
			"macp-runtime (Rust)": fmt.Sprintf("not pinned: Tokio's default, %d worker threads", runtime.NumCPU()),
		}),
		Timing: timingRecord{Warmup: b.timing.warmup.String(), Measure: b.timing.measure.String(), Rounds: b.timing.rounds},
	}
	rec.name = rec.unused(*out)
	b.wardenDoor = defaultDoor(*wardenBin)
	rec.Columns = columns(b.wardenDoor, rec.Machine.Nginx, *wardenGRPC)
	if secs := *profileSecs; secs != 0 {
		if secs < 0 {
			secs = 30
			if *quick {
				secs = 10
			}
		}
		b.profiles, b.profileFor = filepath.Join(*out, rec.stem()+"-profiles"), time.Duration(secs)*time.Second
		if err := os.MkdirAll(b.profiles, 0o755); err != nil {
			return err
		}
		rec.Timing.Profile = fmt.Sprintf("in a run of its own after %s warm-up, as long as %d samples take (3-%d s), its arrivals jittered within their periods (evenly spaced ones keep a phase to the kernel tick that hides the hop from the profiler); then the null hop's the same way (same load, same length: the null net/http hop for MCP and A2A, the null frame relay for MACP, served with bench/cmd/null -pprof)", b.timing.warmup, profileSamples, secs)
	}
	if *micro != "" {
		figs, medians, err := readMicro(*micro)
		if err != nil {
			return err
		}
		rec.Figures = append(rec.Figures, figs...)
		rec.Micro = medians
	}

	var failed []string
	for _, name := range scenarioNames {
		if !want[name] || ctx.Err() != nil {
			continue
		}
		b.logf("scenario %s", name)
		t0 := time.Now()
		var o outcome
		var err error
		switch name {
		case "task":
			o, err = b.macpTask(ctx)
		case "task-hot":
			o, err = b.macpTaskHot(ctx)
		case "handoff":
			o, err = b.macpHandoff(ctx)
		case "extauthz":
			o, err = b.extAuthz(ctx)
		case "extauthz-redis":
			o, err = b.extAuthzRedis(ctx)
		case "mcp":
			o, err = b.mcp(ctx, *mcpServer)
		case "a2a":
			o, err = b.a2a(ctx)
		case "memory":
			counts := []int{10_000, 100_000}
			if *quick {
				counts = counts[:1]
			}
			var points []memoryPoint
			o, points, err = b.memory(ctx, counts)
			rec.Memory = points
		}
		b.logf("scenario %s took %.0fs", name, time.Since(t0).Seconds())
		rec.Runs = append(rec.Runs, o.runs...)
		rec.Figures = append(rec.Figures, o.figs...)
		rec.Profiles = append(rec.Profiles, o.profiles...)
		if err != nil {
			reason := err.Error()
			if !errors.Is(err, errNotRun) {
				failed = append(failed, name)
			}
			reason = strings.TrimPrefix(reason, errNotRun.Error()+": ")
			rec.Figures = append(rec.Figures, report.Figure{Group: name, Name: "scenario " + name, NotRun: reason})
			rec.NotRun = append(rec.NotRun, name+": "+reason)
			b.logf("scenario %s not run: %s", name, reason)
		}
	}
	rec.WallSeconds = time.Since(started).Seconds()
	if err := rec.write(*out); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("scenarios failed: %s", strings.Join(failed, ", "))
	}
	return ctx.Err()
}

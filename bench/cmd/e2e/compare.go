package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwarden/warden/bench/load"
	"github.com/agentwarden/warden/bench/report"
)

// side is one way of reaching the same upstream: direct, through Warden,
// through the null Go pass-through or through nginx.
type side struct {
	name string
	// work returns a workload with fresh state (new sessions) for one run.
	work func() workload
	// procs are the servers whose CPU is measured during the side's runs,
	// by label ("hop", "upstream") and pid.
	procs map[string]int
	// admin is Warden's admin address: its CPU and heap profiles are taken
	// there at saturation when the benchmark runs with -profile.
	admin string
	// pprof is a null hop's net/http/pprof address (bench/cmd/null -pprof),
	// set when the record holds profiles: it is profiled after Warden, the
	// same way, as the baseline of Warden's profile.
	pprof string
}

// timing is how long the runs of a comparison last.
type timing struct {
	warmup  time.Duration // per run, not recorded
	measure time.Duration // per run, recorded
	rounds  int           // runs per side and load, alternating which side goes first
	// jitter moves the fixed-rate runs' arrivals within their periods
	// (load.Open.Jitter), as the profiled runs always do (-jitter)
	jitter bool
	// logRuns logs every run's CPU by process and its answers (-log-runs)
	logRuns bool
}

// comparison measures one scenario on several sides, at fixed rates and at
// saturation, on the same upstream with the same generator: the base
// (direct) and the hops in front of it, Warden first.
type comparison struct {
	// id names the scenario in file names (profiles).
	id    string
	group string
	base  side
	hops  []side
	rates []float64
	// workers is the closed loop's concurrency at saturation; satMax bounds
	// its messages (state for them is set up before the run).
	workers int
	satMax  int
	// hot says the workload puts every message in flight on one session:
	// its throughput target is 0.8 x nginx's rather than nginx's.
	hot    bool
	timing timing
	// unit names what one message is, for the table ("msg/s" or "req/s").
	unit string
	// informative drops the targets: DESIGN.md §12 sets them for the
	// standalone sidecar only.
	informative bool
	// profile, when set, is the directory Warden's saturation profiles go to.
	profile string
	// cpu is the CPU target's rule (none when of is empty).
	cpu targetRule
	// profiles, when set, is where the CPU profile of Warden (hops[0]) at
	// the comparison's measured rate goes, taken in a run of its own after
	// the measured ones, at most profileFor long (see profileLength).
	profiles   string
	profileFor time.Duration
	// skip leaves the comparison out (-groups did not match its group).
	skip bool
}

// targetRule builds a figure's target from the value of the side it is
// relative to, in the same run.
type targetRule struct {
	of    string
	build func(float64) *report.Target
}

// The targets' rules: issue 28's (and DESIGN.md §12's) for the MACP
// sidecar; for the HTTP sidecars (MCP, A2A) the CPU is bounded by the null
// net/http hop's instead of nginx's.
var (
	macpCPU    = targetRule{report.Nginx, report.CPUPer1000}
	httpCPU    = targetRule{report.NullHTTP, report.CPUPerNullHTTP}
	addedP50   = targetRule{report.Nginx, report.AddedP50}
	addedP99   = targetRule{report.Nginx, report.AddedP99}
	saturation = targetRule{report.Nginx, report.ThroughputRatio}
	hotSession = targetRule{report.Nginx, report.HotSessionRatio}
)

// runRecord is one side at one load, kept in the JSON record.
type runRecord struct {
	Scenario string       `json:"scenario"`
	Side     string       `json:"side"`
	Load     string       `json:"load"`
	Rate     float64      `json:"rate_per_s,omitempty"`
	Workers  int          `json:"workers,omitempty"`
	Summary  load.Summary `json:"summary"`
	// CPU is what each process used during the runs, in cores (1 = one core
	// busy the whole time): the side's servers by label ("hop", "upstream"),
	// "generator", the whole "machine", and "other" (the machine minus the
	// benchmark's own processes: other work sharing the machine).
	CPU map[string]float64 `json:"cpu_cores"`
}

// outcome is what a comparison produced.
type outcome struct {
	runs     []runRecord
	figs     []report.Figure
	profiles []report.Profile
}

// add appends another outcome.
func (o *outcome) add(p outcome) {
	o.runs = append(o.runs, p.runs...)
	o.figs = append(o.figs, p.figs...)
	o.profiles = append(o.profiles, p.profiles...)
}

// accum merges the rounds of one side at one load.
type accum struct {
	res *load.Result
	cpu map[string]float64 // CPU seconds by process label
	// switches are the servers' context switches by process label (summed
	// over their threads), for -log-runs
	switches map[string]switches
	wall     float64
}

// runSide sets up a fresh workload and runs it once; during (if not nil)
// runs beside it and is waited for.
func runSide(ctx context.Context, s side, n int, run func(load.Func) *load.Result, a *accum, during func()) error {
	w := s.work()
	if err := w.setup(ctx, n); err != nil {
		return fmt.Errorf("%s setup: %w", s.name, err)
	}
	meters := map[string]cpuMeter{"generator": startCPU("self")}
	for label, pid := range s.procs {
		meters[label] = startCPU(strconv.Itoa(pid))
	}
	var side sync.WaitGroup
	if during != nil {
		side.Go(during)
	}
	sw0 := make(map[string]switches, len(s.procs))
	for label, pid := range s.procs {
		sw0[label], _ = contextSwitches(pid)
	}
	busy0, _ := machineBusy()
	t0 := time.Now()
	res := run(w.do)
	wall := time.Since(t0).Seconds()
	busy1, _ := machineBusy()
	if a.switches == nil {
		a.switches = map[string]switches{}
	}
	for label, pid := range s.procs {
		sw1, _ := contextSwitches(pid)
		a.switches[label] = a.switches[label].add(sw1.sub(sw0[label]))
	}
	side.Wait()
	if a.cpu == nil {
		a.cpu = map[string]float64{}
	}
	for label, m := range meters {
		a.cpu[label] += m.share() * wall
	}
	a.cpu["machine"] += (busy1 - busy0).Seconds()
	a.wall += wall
	if a.res == nil {
		a.res = res
	} else {
		a.res.Merge(res)
	}
	return ctx.Err()
}

// sides is the base, then the hops.
func (c comparison) sides() []side { return append([]side{c.base}, c.hops...) }

// measure runs every side at one load for the configured rounds, rotating
// which side goes first; accums[0] is the base's, then the hops' in order.
// profile, when set, is the file stem Warden's profiles of its first round
// are saved under.
func (c comparison) measure(ctx context.Context, n int, run func(load.Func) *load.Result, profile string) ([]*accum, error) {
	sides := c.sides()
	accums := make([]*accum, len(sides))
	for i := range accums {
		accums[i] = &accum{}
	}
	for r := range max(c.timing.rounds, 1) {
		for k := range sides {
			i := (k + r) % len(sides)
			var during func()
			if profile != "" && r == 0 && sides[i].admin != "" {
				during = func() { c.saveProfiles(ctx, sides[i].admin, profile) }
			}
			before := *accums[i]
			before.cpu = maps.Clone(before.cpu)
			before.switches = maps.Clone(before.switches)
			var answered int64 // Merge adds to accum.res in place: its count before
			if before.res != nil {
				answered = before.res.Summary().Count
			}
			if err := runSide(ctx, sides[i], n, run, accums[i], during); err != nil {
				return nil, err
			}
			if c.timing.logRuns {
				logRun(c.group, r, sides[i].name, before, answered, accums[i])
			}
		}
	}
	return accums, nil
}

// logRun logs what one run added to a side's accum: its wall time and each
// process's CPU, in ms and per 1,000 answers a second.
func logRun(group string, round int, name string, before accum, answered int64, after *accum) {
	wall := after.wall - before.wall
	n := after.res.Summary().Count - answered
	parts := []string{fmt.Sprintf("%s round %d %s: %.2f s, %d answers", group, round, name, wall, n)}
	for _, label := range slices.Sorted(maps.Keys(after.cpu)) {
		ms := 1000 * (after.cpu[label] - before.cpu[label])
		parts = append(parts, fmt.Sprintf("%s %.0f ms", label, ms))
	}
	for _, label := range slices.Sorted(maps.Keys(after.switches)) {
		d := after.switches[label].sub(before.switches[label])
		parts = append(parts, fmt.Sprintf("%s switches per answer %.2f voluntary, %.2f involuntary, %d threads",
			label, float64(d.voluntary)/float64(max(n, 1)), float64(d.involuntary)/float64(max(n, 1)), after.switches[label].threads))
	}
	fmt.Fprintln(os.Stderr, "bench: "+strings.Join(parts, ", "))
}

// record turns an accumulated side into its JSON record.
func (c comparison) record(s side, a *accum, loadName string, rate float64, workers int) runRecord {
	r := runRecord{Scenario: c.group, Side: s.name, Load: loadName, Rate: rate, Workers: workers, Summary: a.res.Summary(), CPU: map[string]float64{}}
	if a.wall > 0 {
		other := a.cpu["machine"]
		for label, sec := range a.cpu {
			r.CPU[label] = sec / a.wall
			if label != "machine" {
				other -= sec
			}
		}
		r.CPU["other"] = max(other, 0) / a.wall
	}
	return r
}

// profileSamples is how many samples a profile is meant to hold: enough
// for a layer's share to within a few points.
const profileSamples = 500

// profileLength is how long a profile takes to hold profileSamples when
// the process uses cores (100 samples per second of CPU), in whole seconds,
// at least 3 s and at most longest.
func profileLength(cores float64, longest time.Duration) time.Duration {
	d := 3 * time.Second
	if cores > 0 {
		d = max(d, time.Duration(math.Ceil(profileSamples/(100*cores)))*time.Second)
	}
	return min(d, max(longest, time.Second).Truncate(time.Second))
}

// errorNote describes the failed messages of every side, if any.
func errorNote(recs []runRecord) string {
	var parts []string
	for _, r := range recs {
		if s := r.Summary; s.Errors > 0 || s.Dropped > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d failed, %d dropped (%s)", r.Side, s.Errors, s.Dropped, s.FirstError))
		}
	}
	return strings.Join(parts, "; ")
}

// noisy is the CPU, in cores, other work may use during a comparison's runs
// before the table says so.
const noisy = 0.25

// noiseNote adds to the comparison's first figure how much other work shared
// the machine during its runs, when that was more than noisy.
func noiseNote(figs []report.Figure, runs []runRecord) {
	most := 0.0
	for _, r := range runs {
		most = max(most, r.CPU["other"])
	}
	if most <= noisy || len(figs) == 0 {
		return
	}
	n := fmt.Sprintf("other work on the machine (not the benchmark's processes) used up to %.1f of the %d cores during these runs", most, runtime.NumCPU())
	figs[0].Note = strings.TrimPrefix(figs[0].Note+"; "+n, "; ")
}

// figure is one figure of the table: Warden's value (hops[0]), the other
// hops' beside it, and the target rule builds from its side's value when
// that side was measured and the comparison has targets.
func (c comparison) figure(name, unit string, values []float64, rule targetRule, note string) report.Figure {
	f := report.Figure{Group: c.group, Name: name, Value: values[0], Unit: unit, Note: note}
	for i, h := range c.hops[1:] {
		f.Baselines = append(f.Baselines, report.Baseline{Side: h.name, Value: values[i+1]})
	}
	if ref, ok := f.Baseline(rule.of); ok && rule.build != nil && !c.informative && !math.IsNaN(ref) {
		f.Target = rule.build(ref)
	}
	return f
}

// describe lists every hop's value of one figure, for the log and the
// figure's name ("direct 500 µs, Warden 900 µs, ...").
func describe(sides []side, values []float64, unit string) string {
	parts := make([]string, len(sides))
	for i, s := range sides {
		if unit == "µs" {
			parts[i] = s.name + " " + report.Format(values[i], unit)
		} else {
			parts[i] = fmt.Sprintf("%s %.0f %s", s.name, values[i], unit)
		}
	}
	return strings.Join(parts, ", ")
}

// run measures every load and derives the figures: added latency at each
// fixed rate, each hop's CPU per 1,000 messages a second, and the throughput
// ratio at saturation.
func (c comparison) run(ctx context.Context, logf func(string, ...any)) (out outcome, err error) {
	if c.skip {
		return out, nil
	}
	unit := c.unit
	if unit == "" {
		unit = "msg/s"
	}
	defer func() { noiseNote(out.figs, out.runs) }()
	sides := c.sides()
	hopName := "Warden"
	if len(c.hops) > 0 {
		hopName = c.hops[0].name
	}
	var cpuFig *report.Figure
	wardenCores := 1.0 // at saturation, about a core
	for _, rate := range c.rates {
		open := load.Open{Rate: rate, Warmup: c.timing.warmup, Duration: c.timing.measure}
		if c.timing.jitter {
			open.Jitter = rand.Uint64() | 1
		}
		acc, err := c.measure(ctx, open.Count(), func(do load.Func) *load.Result { return open.Run(ctx, do) }, "")
		if err != nil {
			return out, fmt.Errorf("%s at %v %s: %w", c.group, rate, unit, err)
		}
		name := fmt.Sprintf("%.0f %s", rate, unit)
		recs := make([]runRecord, len(sides))
		for i, s := range sides {
			recs[i] = c.record(s, acc[i], name, rate, 0)
		}
		out.runs = append(out.runs, recs...)
		var errs int64
		p50, p99 := make([]float64, len(sides)), make([]float64, len(sides))
		for i, r := range recs {
			p50[i], p99[i] = r.Summary.P50, r.Summary.P99
			errs += r.Summary.Errors + r.Summary.Dropped
		}
		logf("%s at %s: p50 %s; p99 %s (errors %d)", c.group, name, describe(sides, p50, "µs"), describe(sides, p99, "µs"), errs)
		note := errorNote(recs)
		bs := recs[0].Summary
		for _, p := range []struct {
			label  string
			get    func(load.Summary) float64
			target targetRule
		}{
			{"p50", func(s load.Summary) float64 { return s.P50 }, addedP50},
			{"p90", func(s load.Summary) float64 { return s.P90 }, targetRule{}},
			{"p99", func(s load.Summary) float64 { return s.P99 }, addedP99},
		} {
			added := make([]float64, len(c.hops))
			abs := make([]float64, len(sides))
			for i, r := range recs {
				abs[i] = p.get(r.Summary)
				if i > 0 {
					added[i-1] = abs[i] - p.get(bs)
				}
			}
			out.figs = append(out.figs, c.figure(fmt.Sprintf("added %s at %s (%s %s)", p.label, name, c.base.name, report.Format(abs[0], "µs")), "µs", added, p.target, note))
			note = "" // once per rate
		}
		// CPU per 1,000 messages a second, of each hop's own process
		cpu := make([]float64, len(c.hops))
		if len(recs) > 1 && recs[1].CPU["hop"] > 0 {
			wardenCores = recs[1].CPU["hop"]
		}
		for i, r := range recs[1:] {
			cpu[i] = math.NaN()
			if r.CPU["hop"] > 0 && r.Summary.Throughput > 0 {
				cpu[i] = 100 * r.CPU["hop"] / (r.Summary.Throughput / 1000)
			}
		}
		if !math.IsNaN(cpu[0]) {
			label := fmt.Sprintf("%s CPU per 1,000 %s (measured at %s)", hopName, unit, name)
			if up := recs[0].CPU["upstream"]; up > 0 && bs.Throughput > 0 {
				label = fmt.Sprintf("hop CPU per 1,000 %s (measured at %s; the upstream itself, direct: %s)", unit, name, report.Format(100*up/(bs.Throughput/1000), "% core"))
			}
			f := c.figure(label, "% core", cpu, c.cpu, "")
			cpuFig = &f
		}
	}
	if cpuFig != nil {
		out.figs = append(out.figs, *cpuFig)
	}
	if c.workers > 0 {
		closed := load.Closed{Workers: c.workers, Max: c.satMax, Warmup: c.timing.warmup, Duration: c.timing.measure}
		profile := ""
		if c.profile != "" {
			profile = filepath.Join(c.profile, c.id)
		}
		acc, err := c.measure(ctx, c.satMax, func(do load.Func) *load.Result { return closed.Run(ctx, do) }, profile)
		if err != nil {
			return out, fmt.Errorf("%s at saturation: %w", c.group, err)
		}
		name := fmt.Sprintf("saturation, %d in flight", c.workers)
		if c.hot {
			name += " on one session"
		}
		recs := make([]runRecord, len(sides))
		tput := make([]float64, len(sides))
		for i, s := range sides {
			recs[i] = c.record(s, acc[i], name, 0, c.workers)
			tput[i] = recs[i].Summary.Throughput
		}
		out.runs = append(out.runs, recs...)
		logf("%s at %s: %s", c.group, name, describe(sides, tput, unit))
		ratio := make([]float64, len(c.hops))
		for i := range c.hops {
			ratio[i] = math.NaN()
			if tput[0] > 0 {
				ratio[i] = tput[i+1] / tput[0]
			}
		}
		note := errorNote(recs)
		if g := recs[0].CPU["generator"]; g > 0.9 {
			note = strings.TrimPrefix(note+fmt.Sprintf("; the generator used %.0f%% of its core against %s: it may limit that figure", 100*g, c.base.name), "; ")
		}
		target := saturation
		if c.hot {
			target = hotSession
		}
		out.figs = append(out.figs, c.figure(fmt.Sprintf("throughput ratio at %s (%s %.0f %s, %s %.0f)", name, c.base.name, tput[0], unit, hopName, tput[1]), "ratio", ratio, target, note))
	}
	if c.profiles != "" && c.profileFor > 0 && len(c.hops) > 0 && c.hops[0].admin != "" {
		rate := 0.0 // saturation, when there is no fixed rate
		if len(c.rates) > 0 {
			rate = c.rates[len(c.rates)-1] // the CPU figure's
		}
		length := profileLength(wardenCores, c.profileFor)
		p, err := c.profileRun(ctx, c.hops[0], c.hops[0].admin, c.id+"-cpu.pprof", rate, unit, length)
		if err != nil {
			return out, fmt.Errorf("%s, profile: %w", c.group, err)
		}
		if p.Error != "" {
			logf("%s: no profile: %s", c.group, p.Error)
		}
		// the null hop the same way (same load, same length), right after
		if i := slices.IndexFunc(c.hops, func(h side) bool { return h.pprof != "" }); i > 0 && p.Error == "" {
			n, err := c.profileRun(ctx, c.hops[i], c.hops[i].pprof, c.id+"-null-cpu.pprof", rate, unit, length)
			if err != nil {
				return out, fmt.Errorf("%s, profile of %s: %w", c.group, c.hops[i].name, err)
			}
			if n.Error != "" {
				logf("%s: no profile of %s: %s", c.group, n.Side, n.Error)
			}
			p.Baseline = &n
		}
		out.profiles = append(out.profiles, p)
	}
	return out, nil
}

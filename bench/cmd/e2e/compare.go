package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agentwarden/warden/bench/load"
	"github.com/agentwarden/warden/bench/report"
)

// side is one way of reaching the same upstream: direct, or through Warden.
type side struct {
	name string
	// work returns a workload with fresh state (new sessions) for one run.
	work func() workload
	// procs are the servers whose CPU is measured during the side's runs,
	// by label ("warden", "upstream") and pid.
	procs map[string]int
}

// timing is how long the runs of a comparison last.
type timing struct {
	warmup  time.Duration // per run, not recorded
	measure time.Duration // per run, recorded
	rounds  int           // runs per side and load, alternating which side goes first
}

// comparison measures one scenario on two sides, at fixed rates and at
// saturation, on the same upstream with the same generator.
type comparison struct {
	group        string
	base, warden side
	rates        []float64
	// workers is the closed loop's concurrency at saturation; satMax bounds
	// its messages (state for them is set up before the run).
	workers int
	satMax  int
	timing  timing
	// unit names what one message is, for the table ("msg/s" or "req/s").
	unit string
	// informative drops the targets: DESIGN.md §12 sets them for the
	// standalone sidecar only.
	informative bool
}

// runRecord is one side at one load, kept in the JSON record.
type runRecord struct {
	Scenario string       `json:"scenario"`
	Side     string       `json:"side"`
	Load     string       `json:"load"`
	Rate     float64      `json:"rate_per_s,omitempty"`
	Workers  int          `json:"workers,omitempty"`
	Summary  load.Summary `json:"summary"`
	// CPU is what each process used during the runs, in cores (1 = one core
	// busy the whole time): the side's servers by label, "generator", the
	// whole "machine", and "other" (the machine minus the benchmark's own
	// processes: other work sharing the machine).
	CPU map[string]float64 `json:"cpu_cores"`
}

// outcome is what a comparison produced.
type outcome struct {
	runs []runRecord
	figs []report.Figure
}

// accum merges the rounds of one side at one load.
type accum struct {
	res  *load.Result
	cpu  map[string]float64 // CPU seconds by process label
	wall float64
}

// runSide sets up a fresh workload and runs it once.
func runSide(ctx context.Context, s side, n int, run func(load.Func) *load.Result, a *accum) error {
	w := s.work()
	if err := w.setup(ctx, n); err != nil {
		return fmt.Errorf("%s setup: %w", s.name, err)
	}
	meters := map[string]cpuMeter{"generator": startCPU("self")}
	for label, pid := range s.procs {
		meters[label] = startCPU(strconv.Itoa(pid))
	}
	busy0, _ := machineBusy()
	t0 := time.Now()
	res := run(w.do)
	wall := time.Since(t0).Seconds()
	busy1, _ := machineBusy()
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

// measure runs both sides at one load for the configured rounds.
func (c comparison) measure(ctx context.Context, n int, run func(load.Func) *load.Result) (base, warden *accum, err error) {
	base, warden = &accum{}, &accum{}
	for r := range max(c.timing.rounds, 1) {
		order := []struct {
			s side
			a *accum
		}{{c.base, base}, {c.warden, warden}}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, o := range order {
			if err := runSide(ctx, o.s, n, run, o.a); err != nil {
				return nil, nil, err
			}
		}
	}
	return base, warden, nil
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

// errorNote describes the failed messages of both sides, if any.
func errorNote(b, w runRecord) string {
	var parts []string
	for _, r := range []runRecord{b, w} {
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

// run measures every load and derives the figures: added latency at each
// fixed rate, Warden's CPU per 1,000 messages a second, and the throughput
// ratio at saturation.
func (c comparison) run(ctx context.Context, logf func(string, ...any)) (out outcome, err error) {
	unit := c.unit
	if unit == "" {
		unit = "msg/s"
	}
	defer func() { noiseNote(out.figs, out.runs) }()
	var cpuFig *report.Figure
	for _, rate := range c.rates {
		open := load.Open{Rate: rate, Warmup: c.timing.warmup, Duration: c.timing.measure}
		b, w, err := c.measure(ctx, open.Count(), func(do load.Func) *load.Result { return open.Run(ctx, do) })
		if err != nil {
			return out, fmt.Errorf("%s at %v %s: %w", c.group, rate, unit, err)
		}
		name := fmt.Sprintf("%.0f %s", rate, unit)
		br, wr := c.record(c.base, b, name, rate, 0), c.record(c.warden, w, name, rate, 0)
		out.runs = append(out.runs, br, wr)
		bs, ws := br.Summary, wr.Summary
		logf("%s at %s: %s p50 %.0f p99 %.0f µs, %s p50 %.0f p99 %.0f µs (errors %d/%d)", c.group, name,
			c.base.name, bs.P50, bs.P99, c.warden.name, ws.P50, ws.P99, bs.Errors+bs.Dropped, ws.Errors+ws.Dropped)
		note := errorNote(br, wr)
		for _, p := range []struct {
			label  string
			b, w   float64
			target *report.Target
		}{{"p50", bs.P50, ws.P50, report.AddedP50}, {"p90", bs.P90, ws.P90, nil}, {"p99", bs.P99, ws.P99, report.AddedP99}} {
			if c.informative {
				p.target = nil
			}
			out.figs = append(out.figs, report.Figure{Group: c.group,
				Name:  fmt.Sprintf("added %s at %s (%s %s, %s %s)", p.label, name, c.base.name, report.Format(p.b, "µs"), c.warden.name, report.Format(p.w, "µs")),
				Value: p.w - p.b, Unit: "µs", Target: p.target, Note: note})
			note = "" // once per rate
		}
		if cpu := wr.CPU["warden"]; cpu > 0 && ws.Throughput > 0 {
			label := fmt.Sprintf("Warden CPU per 1,000 %s (measured at %s)", unit, name)
			if up := br.CPU["upstream"]; up > 0 && bs.Throughput > 0 {
				label = fmt.Sprintf("Warden CPU per 1,000 %s (measured at %s; the upstream itself, direct: %s)", unit, name, report.Format(100*up/(bs.Throughput/1000), "% core"))
			}
			cpuFig = &report.Figure{Group: c.group, Name: label, Value: 100 * cpu / (ws.Throughput / 1000), Unit: "% core"}
		}
	}
	if cpuFig != nil {
		out.figs = append(out.figs, *cpuFig)
	}
	if c.workers > 0 {
		closed := load.Closed{Workers: c.workers, Max: c.satMax, Warmup: c.timing.warmup, Duration: c.timing.measure}
		b, w, err := c.measure(ctx, c.satMax, func(do load.Func) *load.Result { return closed.Run(ctx, do) })
		if err != nil {
			return out, fmt.Errorf("%s at saturation: %w", c.group, err)
		}
		name := fmt.Sprintf("saturation, %d in flight", c.workers)
		br, wr := c.record(c.base, b, name, 0, c.workers), c.record(c.warden, w, name, 0, c.workers)
		out.runs = append(out.runs, br, wr)
		bs, ws := br.Summary, wr.Summary
		logf("%s at %s: %s %.0f %s, %s %.0f %s", c.group, name, c.base.name, bs.Throughput, unit, c.warden.name, ws.Throughput, unit)
		ratio := 0.0
		if bs.Throughput > 0 {
			ratio = ws.Throughput / bs.Throughput
		}
		note := errorNote(br, wr)
		if g := br.CPU["generator"]; g > 0.9 {
			note = strings.TrimPrefix(note+fmt.Sprintf("; the generator used %.0f%% of its core against %s: it may limit that figure", 100*g, c.base.name), "; ")
		}
		target := report.ThroughputRatio
		if c.informative {
			target = nil
		}
		out.figs = append(out.figs, report.Figure{Group: c.group,
			Name:  fmt.Sprintf("throughput ratio at saturation, %d in flight (%s %.0f %s, %s %.0f %s)", c.workers, c.base.name, bs.Throughput, unit, c.warden.name, ws.Throughput, unit),
			Value: ratio, Unit: "ratio", Target: target, Note: note})
	}
	return out, nil
}

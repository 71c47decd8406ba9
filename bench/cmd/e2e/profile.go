package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/pprof/profile"

	"github.com/agentwarden/warden/bench/load"
	"github.com/agentwarden/warden/bench/report"
)

// topFunctions is how many functions a profile's summary lists by flat and
// by cum.
const topFunctions = 12

// profileRun runs a hop's side h (Warden, or the null hop Warden's profile
// is set against) once more, alone, at rate (0: saturation), and takes its
// CPU profile from admin (net/http/pprof) for length after the warm-up,
// into <c.profiles>/<name>; the summary of where the time went goes into
// the record. A run of its own, so that profiling costs none of the
// measured runs anything and the profile can be longer than they are (100
// samples per second of CPU). A profile that could not be taken is a
// Profile with Error; err is the run's own failure.
func (c comparison) profileRun(ctx context.Context, h side, admin, name string, rate float64, unit string, length time.Duration) (report.Profile, error) {
	p := report.Profile{Group: c.group, Side: h.name}
	// the load outlasts the profile by half a second: steady to the end
	measure := length + 500*time.Millisecond
	var n int
	var run func(load.Func) *load.Result
	if rate > 0 {
		// arrivals jittered: evenly spaced ones keep a phase to the kernel's
		// tick that hides the hop from the profiler (load.Open.Jitter)
		open := load.Open{Rate: rate, Warmup: c.timing.warmup, Duration: measure, Jitter: rand.Uint64() | 1}
		n, p.Load = open.Count(), fmt.Sprintf("%.0f %s", rate, unit)
		run = func(do load.Func) *load.Result { return open.Run(ctx, do) }
	} else {
		// satMax scaled to the longer run
		n = int(float64(c.satMax) * (c.timing.warmup + measure).Seconds() / (c.timing.warmup + c.timing.measure).Seconds())
		closed := load.Closed{Workers: c.workers, Max: n, Warmup: c.timing.warmup, Duration: measure}
		p.Load = fmt.Sprintf("saturation, %d in flight", c.workers)
		if c.hot {
			p.Load += " on one session"
		}
		run = func(do load.Func) *load.Result { return closed.Run(ctx, do) }
	}
	file := filepath.Join(c.profiles, name)
	var ferr error
	a := &accum{}
	err := runSide(ctx, h, n, run, a, func() { ferr = cpuProfile(ctx, admin, c.timing.warmup, length, file) })
	if err != nil {
		return p, err
	}
	if a.wall > 0 {
		p.MeasuredCores = a.cpu["hop"] / a.wall
	}
	if a.res != nil {
		s := a.res.Summary()
		p.Throughput, p.Failed, p.FirstError = s.Throughput, s.Errors+s.Dropped, s.FirstError
	}
	if ferr != nil {
		p.Error = ferr.Error()
		return p, nil
	}
	p.File = filepath.Join(filepath.Base(c.profiles), name)
	sum, err := summarizeFile(file)
	if err != nil {
		p.Error = err.Error()
		return p, nil
	}
	sum.Group, sum.Side, sum.Load, sum.File = p.Group, p.Side, p.Load, p.File
	sum.MeasuredCores, sum.Throughput, sum.Failed, sum.FirstError = p.MeasuredCores, p.Throughput, p.Failed, p.FirstError
	sum.CheckSampling()
	return sum, nil
}

// summarizeFile reads a CPU profile and summarizes it.
func summarizeFile(file string) (report.Profile, error) {
	f, err := os.Open(file)
	if err != nil {
		return report.Profile{}, err
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		return report.Profile{}, fmt.Errorf("%s: %w", file, err)
	}
	sum, err := report.Summarize(prof, topFunctions)
	if err != nil {
		return report.Profile{}, fmt.Errorf("%s: %w", file, err)
	}
	return sum, nil
}

// cpuProfile waits, then takes a CPU profile of d (whole seconds, at least
// one) from a Go process's net/http/pprof at admin into file.
func cpuProfile(ctx context.Context, admin string, wait, d time.Duration, file string) error {
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	return fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, max(1, int(d/time.Second))), file)
}

// saveProfiles takes Warden's CPU profile over the measured part of a
// saturation run from its admin port (net/http/pprof), then its heap
// profile, and saves them as <stem>-cpu.pprof and <stem>-heap.pprof. A
// failure is logged, not returned: profiles are an aid, not a figure.
func (c comparison) saveProfiles(ctx context.Context, admin, stem string) {
	if err := cpuProfile(ctx, admin, c.timing.warmup, c.timing.measure, stem+"-cpu.pprof"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: profile %s: %v\n", stem+"-cpu.pprof", err)
	}
	if err := fetch(ctx, "http://"+admin+"/debug/pprof/heap", stem+"-heap.pprof"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: profile %s: %v\n", stem+"-heap.pprof", err)
	}
}

// fetch saves what url answers into file.
func fetch(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

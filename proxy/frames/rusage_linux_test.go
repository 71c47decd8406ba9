package frames

import (
	"runtime/metrics"
	"syscall"
	"testing"

	"github.com/agentwarden/warden/internal/cputime"
)

// usage is the process's CPU time, voluntary context switches, goroutine
// wake-ups (the scheduling latencies the runtime sampled) and write system
// calls.
type usage struct{ cpu, nvcsw, wakes, writes int64 }

func usageNow() usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	var wakes uint64
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		for _, n := range s[0].Value.Float64Histogram().Counts {
			wakes += n
		}
	}
	return usage{ru.Utime.Nano() + ru.Stime.Nano(), ru.Nvcsw, int64(wakes), cputime.Writes()}
}

// reportUsage reports, per operation since start, the process's CPU time
// (client, relay and upstream together), its voluntary context switches
// (a thread that went to sleep), its goroutine wake-ups (the runtime
// samples one transition in eight: relative figures) and its write system
// calls, which the machine's other load changes less than time.
func reportUsage(b *testing.B, start usage) {
	end := usageNow()
	n := float64(b.N)
	b.ReportMetric(float64(end.cpu-start.cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(end.nvcsw-start.nvcsw)/n, "vcsw/op")
	b.ReportMetric(float64(end.wakes-start.wakes)/n, "wakes/op")
	b.ReportMetric(float64(end.writes-start.writes)/n, "syscw/op")
}

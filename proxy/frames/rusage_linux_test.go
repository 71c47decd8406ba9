package frames

import (
	"runtime/metrics"
	"syscall"
	"testing"
)

// usage is the process's CPU time, voluntary context switches and
// goroutine wake-ups (the scheduling latencies the runtime sampled).
type usage struct{ cpu, nvcsw, wakes int64 }

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
	return usage{ru.Utime.Nano() + ru.Stime.Nano(), ru.Nvcsw, int64(wakes)}
}

// reportUsage reports, per operation since start, the process's CPU time
// (client, relay and upstream together), its voluntary context switches
// (a thread that went to sleep) and its goroutine wake-ups (the runtime
// samples one transition in eight: relative figures), which the machine's
// other load changes less than time.
func reportUsage(b *testing.B, start usage) {
	end := usageNow()
	n := float64(b.N)
	b.ReportMetric(float64(end.cpu-start.cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(end.nvcsw-start.nvcsw)/n, "vcsw/op")
	b.ReportMetric(float64(end.wakes-start.wakes)/n, "wakes/op")
}

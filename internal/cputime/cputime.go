// Package cputime reads the CPU time this process has used, for benchmarks
// on shared machines, where what a call costs shows better in CPU time than
// in wall time. The in-process benchmarks and the load harness (bench/, a
// module of its own) both use it.
package cputime

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Used returns the CPU time (user and system) this process used so far.
func Used() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Writes returns the write system calls this process made so far (syscw of
// /proc/self/io; 0 where there is none): on loopback each one costs the
// writer the receiver's network stack as well, so benchmarks count them.
func Writes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Reporter is what Report needs of a *testing.B (named by its methods, so
// this package does not import testing).
type Reporter interface {
	ReportMetric(n float64, unit string)
}

// Report adds the CPU time used since start, per operation of n, to a
// benchmark's result as cpu-ns/op: Report(b, start, b.N) after the loop,
// where start is Used() read before it.
func Report(b Reporter, start time.Duration, n int) {
	if n > 0 {
		b.ReportMetric(float64(Used()-start)/float64(n), "cpu-ns/op")
	}
}

// ReportWrites adds the write system calls made since start (Writes), per
// operation of n, to a benchmark's result as syscw/op.
func ReportWrites(b Reporter, start int64, n int) {
	if n > 0 {
		b.ReportMetric(float64(Writes()-start)/float64(n), "syscw/op")
	}
}

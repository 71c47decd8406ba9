// Package cputime reads the CPU time this process has used, for benchmarks
// on shared machines, where what a call costs shows better in CPU time than
// in wall time. The in-process benchmarks and the load harness (bench/, a
// module of its own) both use it.
package cputime

import (
	"syscall"
	"time"
)

// Used returns the CPU time (user and system) this process used so far.
func Used() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

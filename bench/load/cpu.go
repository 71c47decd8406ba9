package load

import (
	"syscall"
	"time"
)

// CPU returns the CPU time (user and system) this process used so far: on a
// shared machine, what a call costs shows better in it than in wall time
// (in-process benchmarks report it per operation).
func CPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package load

import (
	"time"

	"github.com/agentwarden/warden/internal/cputime"
)

// CPU returns the CPU time (user and system) this process used so far: on a
// shared machine, what a call costs shows better in it than in wall time
// (in-process benchmarks report it per operation).
func CPU() time.Duration { return cputime.Used() }

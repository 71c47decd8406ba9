package load

import (
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// setTimerSlack lowers the calling thread's timer slack from 50 µs to 1 µs,
// so that sleep wakes close to the due time.
func setTimerSlack() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1000, 0)
}

// sleep blocks the calling thread in nanosleep: Go's timers wake up to a
// millisecond late, which would add to every open-loop latency.
func sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // an interrupted sleep ends early; the caller checks the clock
}

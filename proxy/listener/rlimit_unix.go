//go:build unix

package listener

import "syscall"

// FileLimit is the process's soft limit on open files (RLIMIT_NOFILE), 0 if
// it cannot be read. Go raises the soft limit to the hard one at start.
func FileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}

//go:build !linux

package frames

import "syscall"

// rawIO: elsewhere a connection is read and written as it is.
const rawIO = false

func rawRead(uintptr, []byte) (int, syscall.Errno)  { return 0, syscall.EINVAL }
func rawWrite(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }

package frames

import (
	"syscall"
	"unsafe"
)

// rawIO: reads and writes go through the raw file descriptor (sysIO).
const rawIO = true

// rawRead is read(2) on a non-blocking socket without the runtime's
// system-call bookkeeping: it never blocks.
func rawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

// rawWrite is write(2) on a non-blocking socket, likewise.
func rawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

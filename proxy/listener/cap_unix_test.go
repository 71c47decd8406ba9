//go:build unix

package listener

import (
	"syscall"
	"testing"
	"time"
)

// TestCapSyscallConn: a connection accepted through Cap hands out the TCP
// connection's raw connection, so the frame relay reads and writes its
// socket directly as it does a plain one (proxy/frames sysIO), and the raw
// connection is the socket's: what the client sends is read through it.
func TestCapSyscallConn(t *testing.T) {
	client, server := capPair(t)
	sc, ok := server.(syscall.Conn)
	if !ok {
		t.Fatal("a capped connection has no SyscallConn")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatalf("SyscallConn: %v", err)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	var n int
	err = rc.Read(func(fd uintptr) bool {
		var buf [1]byte
		n, _ = syscall.Read(int(fd), buf[:])
		return n > 0
	})
	if err != nil || n != 1 {
		t.Fatalf("raw read: %d, %v; want the client's byte", n, err)
	}
}

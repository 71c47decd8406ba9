// Package redistest starts Debian's redis-server for tests: on a free
// loopback port, without persistence, stopped when the test ends.
package redistest

import (
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Start starts redis-server for t and returns its address, a stop function
// (also run at cleanup; safe to call twice) and its process. It skips t when
// redis-server is not installed, unless WARDEN_REQUIRE_PEERS=1
// (scripts/peers.sh installs it).
func Start(t testing.TB) (addr string, stop func(), proc *os.Process) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("WARDEN_REQUIRE_PEERS") == "1" {
			t.Fatalf("redis-server is missing: run scripts/peers.sh")
		}
		t.Skip("redis-server is not installed (run scripts/peers.sh)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop, cmd.Process
		}
	}
	t.Fatalf("redis-server did not listen on %s", addr)
	return "", nil, nil
}

package listener

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestCapHalfClose: a connection accepted through Cap half-closes as the
// TCP connection it wraps does, so a server closing gracefully (the frame
// relay after a bad preface) is not turned into a TCP reset (h2spec 3.5/2
// failed against the relay front door when Cap hid CloseWrite).
func TestCapHalfClose(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := Cap(raw, 4, nil)
	defer lis.Close()
	client, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	cw, ok := server.(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("a capped connection has no CloseWrite")
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after the server's half-close: %d, %v; want EOF", n, err)
	}
	if _, err := client.Write([]byte("still open")); err != nil {
		t.Fatalf("client write after the server's half-close: %v", err)
	}
	buf := make([]byte, 10)
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "still open" {
		t.Fatalf("server read %q, %v; want the client's bytes", buf, err)
	}
}

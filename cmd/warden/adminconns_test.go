package main

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestAdminConnections: whoever reaches the admin port holds nothing of the
// process's without end. A kept-alive connection idle past the idle
// timeout is closed, and one source address holds at most adminPerSource
// connections, while another address (the kubelet's probes) is still
// served. Before, an idle connection stayed open for ever and one address
// held as many as it opened (a goroutine and a file descriptor each, the
// descriptors the main listeners' caps are sized from).
func TestAdminConnections(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &admin{reg: newRegistry(), ready: func() error { return nil }, log: slog.New(slog.DiscardHandler), idle: 300 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.serve(ctx, lis) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := lis.Addr().String()

	// get sends GET /healthz on c and reads the answer; false when the
	// connection was refused or closed instead.
	get := func(c net.Conn) bool {
		if c == nil {
			return false
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	// dial connects from the address from; nil when the connection was
	// refused at once (a reset can land before connect returns).
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return nil
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	t.Run("idle closed", func(t *testing.T) {
		c := dial("127.0.0.1")
		if !get(c) {
			t.Fatal("GET /healthz was not answered")
		}
		time.Sleep(time.Second)
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var b [1]byte
		_, err := c.Read(b[:])
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a connection idle for 1 s (idle timeout 300ms) is still open")
		}
	})
	t.Run("per source", func(t *testing.T) {
		served := 0
		for range 3 * adminPerSource {
			c := dial("127.0.0.1")
			if get(c) {
				served++
			}
		}
		if served > adminPerSource {
			t.Errorf("one source address held %d connections open at once, want at most %d", served, adminPerSource)
		}
		if !get(dial("127.0.0.2")) {
			t.Error("another source address was not served while the first held its share")
		}
		t.Logf("one address: %d of %d connections served at once", served, 3*adminPerSource)
	})
}

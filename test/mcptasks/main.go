// Command mcptasks is a fixture MCP server (protocol 2026-07-28, stateless
// Streamable HTTP) implementing the Tasks extension (SEP-2663) and the
// SEP-2669 draft methods tasks/steer, tasks/pause and tasks/resume, for
// black-box tests that put it behind Warden.
//
//	mcptasks -listen 127.0.0.1:3990 [-path /mcp] [-lax] [-list [-list-page n]]
//
// -lax skips the SEP-2669 status rules (steer on a terminal task, pause when
// not working/input_required, resume when not paused, update while paused are
// acked and applied naively). -list serves tasks/list as the 2025-11-25 tasks
// did, every task unfiltered (SEP-2663 has no list), for tests of Warden's
// filtering. GET /debug/requests lists every JSON-RPC message
// received on the endpoint; POST /debug/reset clears that list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "", "address to listen on, e.g. 127.0.0.1:3990 (required)")
	path := flag.String("path", "/mcp", "MCP endpoint path")
	lax := flag.Bool("lax", false, "do not enforce the SEP-2669 status rules (simulates an uneven runtime)")
	list := flag.Bool("list", false, "serve tasks/list: every task, whoever created it (SEP-2663 has no list)")
	listPage := flag.Int("list-page", 0, "page tasks/list by this many tasks (0: one page)")
	flag.Parse()
	if *listen == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: mcptasks -listen 127.0.0.1:3990 [-path /mcp] [-lax] [-list [-list-page n]]")
		os.Exit(2)
	}
	if !strings.HasPrefix(*path, "/") || strings.HasPrefix(*path, "/debug/") {
		fmt.Fprintln(os.Stderr, "mcptasks: -path must start with / and must not be under /debug/")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptasks:", err)
		os.Exit(1)
	}
	s := NewServer(*lax)
	s.List, s.ListPage = *list, *listPage
	hs := &http.Server{
		Handler:           s.Handler(*path),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "mcptasks listening on http://%s%s\n", ln.Addr(), *path)

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "mcptasks:", err)
			s.Close()
			os.Exit(1)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "mcptasks: shutdown:", err)
	}
	s.Close()
}

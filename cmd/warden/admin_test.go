package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/redistest"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
)

// upstream is an HTTP server that counts the connections it accepts.
func upstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestDialProbe: the MCP upstream probe dials once per cache period, and
// reports an upstream that is down.
func TestDialProbe(t *testing.T) {
	srv, conns := upstream(t)
	now := time.Unix(1000, 0)
	p := newDialProbe(srv.Listener.Addr().String(), time.Second, func() time.Time { return now })
	for i := range 5 {
		if err := p.Ready(); err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
	}
	waitFor(t, func() bool { return conns.Load() == 1 }, "one connection for five probes within the cache period")
	now = now.Add(probeCache)
	if err := p.Ready(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return conns.Load() == 2 }, "a new dial once the cache expired")
	srv.Close()
	if err := p.Ready(); err != nil {
		t.Fatalf("cached result changed before expiry: %v", err)
	}
	now = now.Add(probeCache)
	if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("upstream down: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal(what)
}

// TestReadyzCoversMCPUpstream: with the MCP sidecar configured, /readyz
// answers 503 while the MCP server is down and 200 while it is up;
// /healthz stays 200 (liveness only).
func TestReadyzCoversMCPUpstream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready bool
	}{{"server up", true}, {"server down", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := upstream(t)
			if !tc.ready {
				srv.Close()
			}
			cfg, err := loadConfig(write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nmcp:\n  listen: 127.0.0.1:0\n  plaintext: true\n  upstream: "+srv.URL+"/mcp\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.inheritLimits(listener.Limits{})
			p, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			h := (&admin{reg: p.reg, ready: p.ready, log: slog.New(slog.DiscardHandler)}).handler()
			get := func(path string) (int, string) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				return rec.Code, rec.Body.String()
			}
			if code, _ := get("/healthz"); code != http.StatusOK {
				t.Errorf("/healthz %d", code)
			}
			code, body := get("/readyz")
			switch {
			case tc.ready && code != http.StatusOK:
				t.Errorf("/readyz %d %q with the MCP server up", code, body)
			case !tc.ready && (code != http.StatusServiceUnavailable || !strings.Contains(body, "mcp upstream "+srv.URL)):
				t.Errorf("/readyz %d %q with the MCP server down", code, body)
			}
		})
	}
}

// TestReloadKeepsPoliciesOnError: a SIGHUP reload whose policy file is in
// the wrong package fails and keeps the running authentication and
// policies; a valid one replaces them.
func TestReloadKeepsPoliciesOnError(t *testing.T) {
	dir := files(t)
	cfgPath := write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nextauthz:\n  listen: 127.0.0.1:0\n")
	p := buildFrom(t, cfgPath)
	devWorks := func() bool {
		_, err := p.enf.Authenticate(context.Background(), authn.Credentials{Bearer: "agent://mallory"})
		return err == nil
	}
	static := "authn:\n  mode: static\n  static:\n    tokens_file: " + dir + "/tokens.json\nextauthz:\n  listen: 127.0.0.1:0\n"
	for _, tc := range []struct {
		name, yaml, err string
		devAfter        bool
	}{
		{"wrong package", static + "policies:\n  files: [" + dir + "/foo.rego]\n", "package foo is not consulted", true},
		{"broken file", static + "log:\n  levl: x\n", "field levl not found", true},
		{"valid", static + "policies:\n  files: [" + dir + "/operator.rego]\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := writeTo(cfgPath, tc.yaml); err != nil {
				t.Fatal(err)
			}
			err := reload(context.Background(), cfgPath, func(*Config) {}, p, slog.New(slog.DiscardHandler))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("reload: %v, want %q", err, tc.err)
			}
			if devWorks() != tc.devAfter {
				t.Fatalf("dev authentication in force: %v, want %v", devWorks(), tc.devAfter)
			}
		})
	}
}

// redisServer starts redis-server on a free loopback port for the test; it
// skips when redis-server is not installed, unless WARDEN_REQUIRE_PEERS=1.
func redisServer(t *testing.T) string {
	t.Helper()
	addr, _, _ := redistest.Start(t)
	return addr
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestReadyzCoversState: with state.url set, /readyz answers 503 naming
// Redis (without its password) while it does not answer.
func TestReadyzCoversState(t *testing.T) {
	srv, _ := upstream(t)
	for _, tc := range []struct {
		name     string
		addr     func(t *testing.T) string
		userinfo string
		ready    bool
	}{{"redis up", redisServer, "", true}, {"redis down", freePort, ":secret@", false}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.addr(t)
			cfg, err := loadConfig(write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nmcp:\n  listen: 127.0.0.1:0\n  plaintext: true\n  upstream: "+srv.URL+"/mcp\nstate:\n  url: redis://"+tc.userinfo+addr+"/3\n  timeout: 100ms\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.inheritLimits(listener.Limits{})
			p, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			h := (&admin{reg: p.reg, ready: p.ready, log: slog.New(slog.DiscardHandler)}).handler()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			body := rec.Body.String()
			switch {
			case strings.Contains(body, "secret"):
				t.Errorf("/readyz shows the password: %q", body)
			case tc.ready && rec.Code != http.StatusOK:
				t.Errorf("/readyz %d %q with Redis up", rec.Code, body)
			case !tc.ready && (rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "state redis://"+addr+"/3")):
				t.Errorf("/readyz %d %q with Redis down", rec.Code, body)
			}
		})
	}
}

// TestReloadHandleKeys: a SIGHUP reload reads the handle keyring again: a
// handle sealed under key 1 opens after the file rotates to {2, 1} (new
// handles under key 2), is refused as sealed under a retired key once 1 is
// removed, and a broken keyring file keeps the keys in force. Before, the
// handle key was read once at start.
func TestReloadHandleKeys(t *testing.T) {
	dir := t.TempDir()
	keyFile := dir + "/handle.key"
	ring := func(ids ...string) {
		var keys []string
		for _, id := range ids {
			keys = append(keys, `{"id": "`+id+`", "secret": "`+strings.Repeat(id, 32)+`"}`)
		}
		if err := writeTo(keyFile, `{"keys": [`+strings.Join(keys, ",")+`]}`); err != nil {
			t.Fatal(err)
		}
	}
	ring("1")
	cfgPath := write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nmcp:\n  listen: 127.0.0.1:0\n  plaintext: true\n  upstream: http://127.0.0.1:1/mcp\n  handle_key_file: "+keyFile+"\n")
	p := buildFrom(t, cfgPath)
	h, err := handle.NewSealer(p.mcpKeys, "mcp", []byte{'t'})
	if err != nil {
		t.Fatal(err)
	}
	old := h.Seal('t', "alice", "task-1")
	reloadWith := func(ids ...string) error {
		ring(ids...)
		return reload(context.Background(), cfgPath, func(*Config) {}, p, slog.New(slog.DiscardHandler))
	}
	if err := reloadWith("2", "1"); err != nil {
		t.Fatal(err)
	}
	if id, err := h.Unseal('t', "alice", "", old); err != nil || id != "task-1" {
		t.Fatalf("after rotating to {2,1}: %q %v", id, err)
	}
	if fresh := h.Seal('t', "alice", "task-1"); !strings.HasPrefix(fresh, handle.Prefix+"2.") {
		t.Fatalf("new handle %q not under key 2", fresh)
	}
	if err := reloadWith("2", "2"); err == nil {
		t.Fatal("a keyring listing an id twice reloaded")
	}
	if _, err := h.Unseal('t', "alice", "", old); err != nil {
		t.Fatalf("a failed reload changed the keys: %v", err)
	}
	if err := reloadWith("2"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Unseal('t', "alice", "", old); !errors.Is(err, handle.ErrRetiredKey) {
		t.Fatalf("after removing key 1: %v", err)
	}
}

// buildFrom builds the parts of the configuration file at cfgPath, closed
// when the test ends.
func buildFrom(t *testing.T, cfgPath string) *parts {
	t.Helper()
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestAdminPprof: the Go profiler is served on the admin port only when
// asked (admin.pprof): whoever reaches the port could otherwise profile
// and trace the process, and force collections.
func TestAdminPprof(t *testing.T) {
	for _, tc := range []struct {
		pprof bool
		want  int
	}{{false, http.StatusNotFound}, {true, http.StatusOK}} {
		h := (&admin{reg: newRegistry(), ready: func() error { return nil }, log: slog.New(slog.DiscardHandler), pprof: tc.pprof}).handler()
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/cmdline"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			switch {
			case path == "/debug/pprof/cmdline" && rec.Code == http.StatusOK:
				t.Errorf("pprof %v: GET %s served: the flags may hold secrets", tc.pprof, path)
			case path != "/debug/pprof/cmdline" && rec.Code != tc.want:
				t.Errorf("pprof %v: GET %s = %d, want %d", tc.pprof, path, rec.Code, tc.want)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("pprof %v: /metrics %d", tc.pprof, rec.Code)
		}
	}
}

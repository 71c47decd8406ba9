package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// repoRoot is the directory holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// peer returns the path of an installed peer. A missing peer skips the test
// with the reason, unless WARDEN_REQUIRE_PEERS=1 (set by `make test`, which
// installs them with scripts/peers.sh first): there a missing peer fails, so
// that a broken install cannot pass CI.
func peer(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("WARDEN_REQUIRE_PEERS") == "1" {
			t.Fatalf("peer %s is missing (%v): run scripts/peers.sh", rel, err)
		}
		t.Skipf("peer %s is not installed (run scripts/peers.sh, or make test)", rel)
	}
	return p
}

var builds sync.Map // package path -> *built

type built struct {
	once sync.Once
	dir  string // the temporary directory holding path, removed by TestMain
	path string
	err  error
}

// TestMain runs the tests, then removes the binaries they built: each
// build's directory (63 MB for bin/warden) was left in the temporary
// directory by every run before, hundreds of them on a machine that runs
// the suite often.
func TestMain(m *testing.M) {
	code := m.Run()
	builds.Range(func(_, v any) bool {
		if b := v.(*built); b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
		return true
	})
	os.Exit(code)
}

// buildOnce builds a main package of this module once per test run and
// returns the binary.
func buildOnce(t testing.TB, pkg string) string {
	t.Helper()
	return buildIn(t, ".", pkg)
}

// buildIn builds the main package pkg of the Go module in dir (relative to
// the repo root) once per test run and returns the binary. A module of its
// own (a test peer) builds offline (GOPROXY=off, -mod=readonly): its
// modules were downloaded by scripts/peers.sh, and nothing downloads at
// test time.
func buildIn(t testing.TB, dir, pkg string) string {
	t.Helper()
	return buildTagged(t, dir, pkg, "")
}

// buildTagged is buildIn with the build tags tags (a binary of their own).
func buildTagged(t testing.TB, dir, pkg, tags string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(dir+"\x00"+pkg+"\x00"+tags, &built{})
	b := v.(*built)
	b.once.Do(func() {
		tmp, err := os.MkdirTemp("", "warden-test-bin")
		if err != nil {
			b.err = err
			return
		}
		b.dir = tmp
		b.path = filepath.Join(tmp, filepath.Base(filepath.Join(dir, pkg)))
		cmd := exec.Command("go", "build", "-tags", tags, "-o", b.path, pkg)
		cmd.Dir = filepath.Join(repoRoot(t), dir)
		if dir != "." {
			cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly -buildvcs=false")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// wardenBinary builds Warden once per test run: the product (bin/warden),
// or, while wardenTransport is grpc, the test oracle (oracleBinary), the
// only build that serves the grpc-go front door.
func wardenBinary(t testing.TB) string {
	t.Helper()
	if wardenTransport == "grpc" {
		return oracleBinary(t)
	}
	return buildOnce(t, "./cmd/warden")
}

// oracleBinary builds the test oracle once per test run (bin/warden-oracle:
// cmd/warden with -tags wardenoracle), the product plus the grpc-go MACP
// front door the relay is held to. A build that fails fails the test.
func oracleBinary(t testing.TB) string {
	t.Helper()
	return buildTagged(t, ".", "./cmd/warden", "wardenoracle")
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// process is a started peer or Warden; its output is kept for failures.
type process struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	mu     *sync.Mutex
	once   sync.Once
	exited chan struct{} // closed once the process exited (its one Wait returned)
}

// stop interrupts the process and waits for it (SIGKILL after 10 s).
func (p *process) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// kill ends the process at once (SIGKILL), as a crash would, and waits
// for it.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// output is what the process has written so far, read under the writers' lock.
func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// start runs a command until the test ends and waits until addr accepts
// connections.
func start(t testing.TB, name, addr string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{out: &bytes.Buffer{}, mu: &sync.Mutex{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = lockedWriter{p.mu, p.out}
	p.cmd.Stderr = lockedWriter{p.mu, p.out}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("--- %s output ---\n%s", name, p.out.String())
			p.mu.Unlock()
		}
	})
	deadline := time.Now().Add(listenWithin)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case <-p.exited: // it will not listen: say so now, not at the deadline
			t.Fatalf("%s exited before it listened on %s:\n%s", name, addr, p.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not listen on %s within %v:\n%s", name, addr, listenWithin, p.output())
	return nil
}

// listenWithin bounds a peer's start: the Python SDKs import their models
// for seconds, and past 30 s on a machine whose two cores other work kept
// busy (a2a-sdk, still importing pydantic models when stopped, in a CI run
// beside four test runs).
const listenWithin = 90 * time.Second

// startRuntime starts the MACP reference runtime on loopback, in memory;
// extra environment selects its authentication.
func startRuntime(t testing.TB, env ...string) string {
	t.Helper()
	addr := freeAddr(t)
	env = append([]string{"MACP_BIND_ADDR=" + addr, "MACP_MEMORY_ONLY=1", "MACP_ALLOW_INSECURE=1", "RUST_LOG=warn"}, env...)
	start(t, "macp-runtime", addr, env, peer(t, ".peers/cargo/bin/macp-runtime"))
	return addr
}

// startWarden starts `warden serve` in front of upstream.
func startWarden(t testing.TB, upstream string, args ...string) string {
	t.Helper()
	addr, _ := startWardenProcess(t, upstream, args...)
	return addr
}

// wardenTransport is the MACP front door startWarden serves with (empty:
// the default, relay); eachTransport sets it for the tests it runs.
var wardenTransport string

// eachTransport runs test once per MACP front door (macp.transport grpc and
// relay), each a subtest named for it, with startWarden serving it: the
// same black-box tests hold on both. The grpc-go door is the test oracle's
// alone (wardenBinary serves it with oracleBinary); the relay is the
// product's.
func eachTransport(t *testing.T, test func(t *testing.T)) {
	for _, tr := range []string{"grpc", "relay"} {
		t.Run(tr, func(t *testing.T) {
			wardenTransport = tr
			defer func() { wardenTransport = "" }()
			test(t)
		})
	}
}

func startWardenProcess(t testing.TB, upstream string, args ...string) (string, *process) {
	t.Helper()
	addr := freeAddr(t)
	base := []string{"serve", "--macp-listen", addr, "--macp-upstream", upstream}
	if wardenTransport != "" {
		base = append(base, "--transport", wardenTransport)
	}
	if !slices.Contains(args, "--tls-cert") {
		base = append(base, "--plaintext")
	}
	return addr, start(t, "warden", addr, nil, wardenBinary(t), append(base, args...)...)
}

// step is one call of the Python driver (see test/peers/macp_driver.py).
type step map[string]any

// result is the driver's account of one call.
type result struct {
	I         int      `json:"i"`
	OK        bool     `json:"ok"`
	Duplicate bool     `json:"duplicate"`
	Code      string   `json:"code"`
	Message   string   `json:"message"`
	Sessions  []string `json:"sessions"`
	Received  int      `json:"received"`
	Results   []struct {
		Type string `json:"type"`
		OK   bool   `json:"ok"`
		Code string `json:"code"`
	} `json:"results"`
}

// drive runs steps with the real MACP Python SDK against target.
func drive(t testing.TB, target string, tokens map[string]string, steps []step) []result {
	t.Helper()
	script, err := json.Marshal(map[string]any{"tokens": tokens, "steps": steps})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(f, script, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, peer(t, ".peers/venv/bin/python"), filepath.Join(repoRoot(t), "test/peers/macp_driver.py"), target, f)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, stderr.String())
	}
	var res []result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("driver output %q: %v", sc.Text(), err)
		}
		res = append(res, r)
	}
	if len(res) != len(steps) {
		t.Fatalf("driver answered %d of %d steps\n%s", len(res), len(steps), stderr.String())
	}
	return res
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/agentwarden/warden/bench/report"
)

// bench holds what every scenario shares: the binaries, the settings and
// where the servers' logs go.
type bench struct {
	wardenBin   string
	oracleBin   string // the test oracle (-warden-oracle), for -warden-grpc
	runtimeBin  string
	self        string // this program, run again as the null ext_authz server
	logDir      string
	wardenProcs int
	quick       bool
	timing      timing
	logf        func(string, ...any)
	// wardenArgs are added to every warden serve (-warden-args).
	wardenArgs []string
	// wardenEnv is added to Warden's environment (-warden-env), for
	// diagnosis: GODEBUG=gctrace=1, GOGC=...
	wardenEnv []string
	// profile is -profile: where Warden's saturation profiles go ("": none).
	profile string
	// profiles is where the record's CPU profiles go (one per scenario, at
	// its measured rate), profileFor how long each may be ("" or 0: none).
	profiles   string
	profileFor time.Duration
	// wardenDoor is the MACP front door Warden's column runs on: the default
	// serve -h states, given explicitly ("": serve -h names none).
	wardenDoor string
	// wardenGRPC runs, in the MACP scenarios, a second Warden on the grpc-go
	// door (--transport grpc), the oracle column (-warden-grpc): oracleBin,
	// the only build that serves that door.
	wardenGRPC bool
	// nullOnce builds the null Go pass-through (bench/cmd/null) once.
	nullOnce sync.Once
	nullPath string
	nullErr  error
	// groups, when set, is -groups: comparisons whose group it does not
	// match are skipped; noSaturation (-saturation=false) skips the
	// closed loop.
	groups       *regexp.Regexp
	noSaturation bool
}

// runtimeEnv is the runtime's environment, as in test/peers_test.go, with its
// rate limits lifted (600 messages and 60 starts a minute would throttle
// every run).
func runtimeEnv(addr string) []string {
	return []string{"MACP_BIND_ADDR=" + addr, "MACP_MEMORY_ONLY=1", "MACP_ALLOW_INSECURE=1", "RUST_LOG=warn",
		"MACP_MESSAGE_LIMIT_PER_MINUTE=100000000", "MACP_SESSION_START_LIMIT_PER_MINUTE=100000000"}
}

// startRuntime starts the MACP reference runtime, in memory, on loopback; it
// gets every core (its own default).
func (b *bench) startRuntime() (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc(b.logDir, "macp-runtime", addr, runtimeEnv(addr), b.runtimeBin)
	return p, addr, err
}

// startWarden starts `warden serve` with GOMAXPROCS pinned, its admin port
// (metrics, pprof) on a free loopback port, and waits for listen.
func (b *bench) startWarden(name, listen string, args ...string) (*proc, error) {
	return b.startWardenBin(b.wardenBin, name, listen, args...)
}

// startWardenBin is startWarden with the Warden binary bin.
func (b *bench) startWardenBin(bin, name, listen string, args ...string) (*proc, error) {
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append([]string{"GOMAXPROCS=" + strconv.Itoa(b.wardenProcs)}, b.wardenEnv...)
	args = append(append([]string{"serve"}, args...), b.wardenArgs...)
	// The runtime's rate limits are raised (runtimeEnv); ext_authz mirrors
	// them (security.md Y3), so Warden's are raised alike.
	p, err := startProc(b.logDir, name, listen, env, bin, append(args, "--admin-listen", admin, "--admin-pprof",
		"--macp-message-limit-per-minute", "100000000", "--macp-session-start-limit-per-minute", "100000000")...)
	if err != nil {
		return nil, err
	}
	p.admin = admin
	return p, nil
}

// startNull starts the null Go pass-through (bench/cmd/null, built on first
// use) on listen, relaying to upstream: proto is "macp" (gRPC) or "mcp"
// (HTTP, upstream a URL); extra flags follow (-relay: the frame relay).
func (b *bench) startNull(name, listen, proto, upstream string, extra ...string) (*proc, error) {
	b.nullOnce.Do(func() {
		// bench is a module of its own; go build -C resolves -o in it, so
		// the path must be absolute.
		if b.nullPath, b.nullErr = filepath.Abs(filepath.Join(b.logDir, "nullhop")); b.nullErr != nil {
			return
		}
		if out, err := exec.Command("go", "build", "-C", "bench", "-o", b.nullPath, "./cmd/null").CombinedOutput(); err != nil {
			b.nullErr = fmt.Errorf("go build ./bench/cmd/null: %v %s", err, out)
		}
	})
	if b.nullErr != nil {
		return nil, b.nullErr
	}
	env := []string{"GOMAXPROCS=" + strconv.Itoa(b.wardenProcs)}
	return startProc(b.logDir, name, listen, env, b.nullPath, append([]string{"-listen", listen, "-" + proto, upstream}, extra...)...)
}

// hops starts the hops of a comparison in front of an upstream: Warden as
// it ships (already started), for MACP Warden on the grpc-go door
// (-warden-grpc), the null hop of the library Warden stands on (grpc-go for
// MACP, net/http for MCP and A2A), for MACP the null frame relay
// (proxy/frames), and nginx. newSide makes a side that reaches the
// upstream through a hop's address; stop stops them. nginx is left out,
// with a log line, when it is not installed.
func (b *bench) hops(id string, w *proc, wAddr, proto, upstream string, newSide func(name, addr string, p *proc) side) (hops []side, stop func(), err error) {
	var started []*proc
	stop = func() {
		for _, p := range started {
			p.stop()
		}
	}
	hops = []side{newSide(report.Warden, wAddr, w)}
	hops[0].admin = w.admin
	if proto == "macp" && b.wardenGRPC {
		gAddr, err := freeAddr()
		if err != nil {
			return nil, stop, err
		}
		g, err := b.startWardenBin(b.oracleBin, "warden-grpc-"+id, gAddr, macpWardenArgs(gAddr, upstream, "--transport", "grpc")...)
		if err != nil {
			return nil, stop, err
		}
		started = append(started, g)
		hops = append(hops, newSide(report.WardenGRPC, gAddr, g))
	}
	nAddr, err := freeAddr()
	if err != nil {
		return nil, stop, err
	}
	nullUp, ngProto, nullName := upstream, "grpc", report.NullGRPC
	if proto == "mcp" {
		nullUp, ngProto, nullName = "http://"+upstream, "http", report.NullHTTP
	}
	// the baseline of Warden's profile: the null net/http hop for MCP and
	// A2A, the null frame relay for MACP (the library its one door stands
	// on); it serves pprof only when the record holds profiles
	var pprofArgs []string
	pprofAddr := ""
	if b.profiles != "" && b.profileFor > 0 {
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, stop, err
		}
		pprofArgs = []string{"-pprof", pprofAddr}
	}
	var nullArgs []string
	if proto == "mcp" {
		nullArgs = pprofArgs
	}
	n, err := b.startNull("null-"+id, nAddr, proto, nullUp, nullArgs...)
	if err != nil {
		return nil, stop, err
	}
	started = append(started, n)
	hops = append(hops, newSide(nullName, nAddr, n))
	if proto == "mcp" {
		hops[len(hops)-1].pprof = pprofAddr
	}
	if proto == "macp" {
		rAddr, err := freeAddr()
		if err != nil {
			return nil, stop, err
		}
		r, err := b.startNull("relay-"+id, rAddr, proto, nullUp, append([]string{"-relay"}, pprofArgs...)...)
		if err != nil {
			return nil, stop, err
		}
		started = append(started, r)
		hops = append(hops, newSide(report.NullFrames, rAddr, r))
		hops[len(hops)-1].pprof = pprofAddr
	}
	if nginxBin() == "" {
		b.logf("%s: nginx is not installed (scripts/peers.sh all installs it): no nginx baseline, no targets", id)
		return hops, stop, nil
	}
	gAddr, err := freeAddr()
	if err != nil {
		return nil, stop, err
	}
	g, err := b.startNginx("nginx-"+id, gAddr, ngProto, upstream)
	if err != nil {
		return nil, stop, err
	}
	started = append(started, g)
	hops = append(hops, newSide(report.Nginx, gAddr, g))
	return hops, stop, nil
}

// profileAt has the comparison profile Warden at its measured rate into the
// record's profiles (-profile-seconds).
func (b *bench) profileAt(c *comparison) { c.profiles, c.profileFor = b.profiles, b.profileFor }

// macpWarden are the flags of a MACP sidecar Warden on listen in front of
// the runtime at upstream, then extra.
func macpWardenArgs(listen, upstream string, extra ...string) []string {
	return append([]string{"--macp-listen", listen, "--macp-upstream", upstream,
		"--plaintext", "--auth", "dev", "--insecure-dev-auth", "--sessions", "500000"}, extra...)
}

// macpRates are the fixed rates of the MACP scenarios, in messages per
// second.
func (b *bench) macpRates() []float64 {
	if b.quick {
		return []float64{200, 1000}
	}
	return []float64{200, 500, 1000}
}

// macpWorkload is one comparison run against the runtime.
type macpWorkload struct {
	id, group string
	work      func(*macpClient) workload
	// hot: saturation only, every message in flight on one session.
	hot bool
}

// macp compares the runtime direct, through Warden, through the null Go
// pass-through and through nginx, for each workload.
func (b *bench) macp(ctx context.Context, wls ...macpWorkload) (outcome, error) {
	rt, rtAddr, err := b.startRuntime()
	if err != nil {
		return outcome{}, err
	}
	defer rt.stop()
	id := wls[0].id
	wAddr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	// The Warden column is Warden as it ships: the default front door serve
	// -h states (the frame relay since 2026-11-27), given explicitly: on
	// 3ff7733 an unset macp.transport still served the grpc-go door, which
	// the profile showed (grpc.(*Server).handleStream).
	var door []string
	if b.wardenDoor != "" {
		door = []string{"--transport", b.wardenDoor}
	}
	w, err := b.startWarden("warden-"+id, wAddr, macpWardenArgs(wAddr, rtAddr, door...)...)
	if err != nil {
		return outcome{}, err
	}
	defer w.stop()
	b.logf("%s: runtime %s, Warden %s (pid %d, admin and pprof on %s)", id, rtAddr, wAddr, w.pid(), w.admin)
	direct, err := dialMACP(rtAddr)
	if err != nil {
		return outcome{}, err
	}
	defer direct.close()
	var clients []*macpClient
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	// each hop's side carries the workload's factory through wl below
	var wl macpWorkload
	hops, stop, err := b.hops(id, w, wAddr, "macp", rtAddr, func(name, addr string, p *proc) side {
		c, derr := dialMACP(addr)
		if derr != nil { // grpc.NewClient fails only on a malformed target
			panic(derr)
		}
		clients = append(clients, c)
		return side{name: name, work: func() workload { return wl.work(c) }, procs: map[string]int{"hop": p.pid(), "upstream": rt.pid()}}
	})
	defer stop()
	if err != nil {
		return outcome{}, err
	}
	var all outcome
	for _, wl = range wls {
		c := comparison{
			id:      wl.id,
			group:   wl.group,
			base:    side{name: "direct", work: func() workload { return wl.work(direct) }, procs: map[string]int{"upstream": rt.pid()}},
			hops:    hops,
			rates:   b.macpRates(),
			workers: 16,
			satMax:  int(6000 * (b.timing.warmup + b.timing.measure).Seconds()),
			timing:  b.timing,
			profile: b.profile,
			cpu:     macpCPU,
		}
		b.profileAt(&c)
		if wl.hot {
			c.rates, c.hot = nil, true
		}
		out, err := c.run(ctx, b.logf)
		all.add(out)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// macpTask is the TaskUpdate scenario on many sessions.
func (b *bench) macpTask(ctx context.Context) (outcome, error) {
	return b.macp(ctx, macpWorkload{id: "task", group: "MACP task (TaskUpdate)", work: func(c *macpClient) workload { return &taskWork{c: c} }})
}

// macpTaskHot is the TaskUpdate scenario on one hot session.
func (b *bench) macpTaskHot(ctx context.Context) (outcome, error) {
	return b.macp(ctx, macpWorkload{id: "task-hot", group: "MACP task (TaskUpdate), one hot session", hot: true,
		work: func(c *macpClient) workload { return &taskWork{c: c, hot: true} }})
}

// macpHandoff is the HandoffOffer/HandoffAccept scenario.
func (b *bench) macpHandoff(ctx context.Context) (outcome, error) {
	return b.macp(ctx, macpWorkload{id: "handoff", group: "MACP handoff (Offer/Accept)", work: func(c *macpClient) workload { return &handoffWork{c: c} }})
}

// extAuthz compares Warden's ext_authz Check with a null ext_authz server
// that allows everything, for allowed and for denied TaskUpdates.
func (b *bench) extAuthz(ctx context.Context) (outcome, error) {
	nAddr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	null, err := startProc(b.logDir, "null-extauthz", nAddr, []string{"GOMAXPROCS=" + strconv.Itoa(b.wardenProcs)}, b.self, "-null-extauthz", nAddr)
	if err != nil {
		return outcome{}, err
	}
	defer null.stop()
	wAddr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	// One planner sets up a session per 100 updates ahead of the load, none
	// ended: above ext_authz's cap of unconfirmed starts per principal (1,000
	// by default, a flood guard), which the setup is not measuring.
	w, err := b.startWarden("warden-extauthz", wAddr, "--extauthz-listen", wAddr, "--auth", "dev", "--insecure-dev-auth", "--sessions", "500000", "--extauthz-max-unconfirmed-starts", "500000")
	if err != nil {
		return outcome{}, err
	}
	defer w.stop()
	base, err := dialAuthz(nAddr, false)
	if err != nil {
		return outcome{}, err
	}
	defer base.close()
	through, err := dialAuthz(wAddr, true)
	if err != nil {
		return outcome{}, err
	}
	defer through.close()
	rates := []float64{1000}
	if !b.quick {
		rates = []float64{2000}
	}
	var all outcome
	for _, allow := range []bool{true, false} {
		group := "ext_authz Check, TaskUpdate allowed"
		if !allow {
			group = "ext_authz Check, TaskUpdate denied"
		}
		id := "extauthz-allow"
		if !allow {
			id = "extauthz-deny"
		}
		c := comparison{
			id:      id,
			group:   group,
			base:    side{name: "null ext_authz", work: func() workload { return &checkWork{c: base, allow: allow} }, procs: map[string]int{"null ext_authz": null.pid()}},
			hops:    []side{{name: "Warden", work: func() workload { return &checkWork{c: through, allow: allow} }, procs: map[string]int{"hop": w.pid()}, admin: w.admin}},
			profile: b.profile,
			rates:   rates,
			workers: 16,
			satMax:  int(15000 * (b.timing.warmup + b.timing.measure).Seconds()),
			timing:  b.timing,
			unit:    "req/s",
			// §12's targets are the standalone sidecar's
			informative: true,
		}
		b.profileAt(&c)
		out, err := c.run(ctx, b.logf)
		if err != nil {
			return all, err
		}
		all.add(out)
	}
	return all, nil
}

// errNotRun marks a scenario that could not run here; its reason goes into
// the table.
var errNotRun = errors.New("not run")

// notRun wraps a reason as errNotRun.
func notRun(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotRun, fmt.Sprintf(format, args...))
}

// exists reports whether a file is there.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

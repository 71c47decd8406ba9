package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// bench holds what every scenario shares: the binaries, the settings and
// where the servers' logs go.
type bench struct {
	wardenBin   string
	runtimeBin  string
	self        string // this program, run again as the null ext_authz server
	logDir      string
	wardenProcs int
	quick       bool
	timing      timing
	logf        func(string, ...any)
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

// startWarden starts `warden serve` with GOMAXPROCS pinned and waits for
// listen.
func (b *bench) startWarden(name, listen string, args ...string) (*proc, error) {
	env := []string{"GOMAXPROCS=" + strconv.Itoa(b.wardenProcs)}
	return startProc(b.logDir, name, listen, env, b.wardenBin, append([]string{"serve"}, args...)...)
}

// macpRates are the fixed rates of the MACP scenarios, in messages per
// second.
func (b *bench) macpRates() []float64 {
	if b.quick {
		return []float64{200, 1000}
	}
	return []float64{200, 500, 1000}
}

// macp compares the runtime direct and through Warden for one workload.
func (b *bench) macp(ctx context.Context, id, group string, newWork func(*macpClient) workload) (outcome, error) {
	rt, rtAddr, err := b.startRuntime()
	if err != nil {
		return outcome{}, err
	}
	defer rt.stop()
	wAddr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	admin, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	w, err := b.startWarden("warden-"+id, wAddr, "--macp-listen", wAddr, "--macp-upstream", rtAddr,
		"--plaintext", "--auth", "dev", "--insecure-dev-auth", "--sessions", "500000", "--admin-listen", admin)
	if err != nil {
		return outcome{}, err
	}
	defer w.stop()
	b.logf("%s: runtime %s, Warden %s (pid %d, admin and pprof on %s)", group, rtAddr, wAddr, w.pid(), admin)
	direct, err := dialMACP(rtAddr)
	if err != nil {
		return outcome{}, err
	}
	defer direct.close()
	through, err := dialMACP(wAddr)
	if err != nil {
		return outcome{}, err
	}
	defer through.close()
	c := comparison{
		group:   group,
		base:    side{name: "direct", work: func() workload { return newWork(direct) }, procs: map[string]int{"upstream": rt.pid()}},
		warden:  side{name: "Warden", work: func() workload { return newWork(through) }, procs: map[string]int{"warden": w.pid(), "upstream": rt.pid()}},
		rates:   b.macpRates(),
		workers: 16,
		satMax:  int(6000 * (b.timing.warmup + b.timing.measure).Seconds()),
		timing:  b.timing,
	}
	return c.run(ctx, b.logf)
}

// macpTask is the TaskUpdate scenario.
func (b *bench) macpTask(ctx context.Context) (outcome, error) {
	return b.macp(ctx, "task", "MACP task (TaskUpdate)", func(c *macpClient) workload { return &taskWork{c: c} })
}

// macpHandoff is the HandoffOffer/HandoffAccept scenario.
func (b *bench) macpHandoff(ctx context.Context) (outcome, error) {
	return b.macp(ctx, "handoff", "MACP handoff (Offer/Accept)", func(c *macpClient) workload { return &handoffWork{c: c} })
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
	w, err := b.startWarden("warden-extauthz", wAddr, "--extauthz-listen", wAddr, "--auth", "dev", "--insecure-dev-auth", "--sessions", "500000")
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
		c := comparison{
			group:   group,
			base:    side{name: "null ext_authz", work: func() workload { return &checkWork{c: base, allow: allow} }, procs: map[string]int{"null ext_authz": null.pid()}},
			warden:  side{name: "Warden", work: func() workload { return &checkWork{c: through, allow: allow} }, procs: map[string]int{"warden": w.pid()}},
			rates:   rates,
			workers: 16,
			satMax:  int(15000 * (b.timing.warmup + b.timing.measure).Seconds()),
			timing:  b.timing,
			unit:    "req/s",
			// §12's targets are the standalone sidecar's
			informative: true,
		}
		out, err := c.run(ctx, b.logf)
		if err != nil {
			return all, err
		}
		all.runs = append(all.runs, out.runs...)
		all.figs = append(all.figs, out.figs...)
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

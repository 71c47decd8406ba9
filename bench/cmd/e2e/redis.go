package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
)

// extAuthzRedis compares one ext_authz Warden with its own session table
// against two replicas sharing the sessions through Redis, consecutive
// messages of a session alternating between them (issue 14): the latency
// and CPU the shared state adds, for allowed TaskUpdates (a version check
// and a compare-and-set each) and denied ones (a version check).
func (b *bench) extAuthzRedis(ctx context.Context) (outcome, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return outcome{}, notRun("redis-server is not installed (scripts/peers.sh)")
	}
	rAddr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	_, port, _ := net.SplitHostPort(rAddr)
	rd, err := startProc(b.logDir, "redis", rAddr, nil, bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return outcome{}, err
	}
	defer rd.stop()
	start := func(name string, args ...string) (*proc, *authzClient, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, nil, err
		}
		p, err := b.startWarden(name, addr, append([]string{"--extauthz-listen", addr, "--auth", "dev", "--insecure-dev-auth", "--sessions", "500000", "--extauthz-max-unconfirmed-starts", "500000"}, args...)...)
		if err != nil {
			return nil, nil, err
		}
		c, err := dialAuthz(addr, true)
		if err != nil {
			p.stop()
			return nil, nil, err
		}
		return p, c, nil
	}
	one, c1, err := start("warden-extauthz-one")
	if err != nil {
		return outcome{}, err
	}
	defer one.stop()
	defer c1.close()
	var reps []*proc
	var clients []*authzClient
	for i := range 2 {
		p, c, err := start("warden-extauthz-redis-"+strconv.Itoa(i), "--state", "redis://"+rAddr+"/0")
		if err != nil {
			return outcome{}, err
		}
		defer p.stop()
		defer c.close()
		reps, clients = append(reps, p), append(clients, c)
	}
	rate := 1000.0
	if b.quick {
		rate = 500
	}
	var all outcome
	for _, allow := range []bool{true, false} {
		verdict := "allowed"
		if !allow {
			verdict = "denied"
		}
		c := comparison{
			id:    "extauthz-redis-" + verdict,
			group: "ext_authz Check, TaskUpdate " + verdict + ": one replica vs two on Redis",
			base: side{name: "one replica", work: func() workload { return &checkWork{c: c1, allow: allow} },
				procs: map[string]int{"hop": one.pid()}, admin: one.admin},
			hops: []side{{name: "two replicas on Redis", work: func() workload { return &checkWork{c: clients[0], others: clients[1:], allow: allow} },
				procs: map[string]int{"hop": reps[0].pid(), "hop2": reps[1].pid(), "redis": rd.pid()}, admin: reps[0].admin}},
			profile: b.profile,
			rates:   []float64{rate},
			workers: 16,
			satMax:  int(10000 * (b.timing.warmup + b.timing.measure).Seconds()),
			timing:  b.timing,
			unit:    "req/s",
			// the comparison is between Wardens, not against §12's targets
			informative: true,
		}
		b.profileAt(&c) // of the first replica
		out, err := c.run(ctx, b.logf)
		if err != nil {
			return all, fmt.Errorf("%s: %w", c.id, err)
		}
		all.add(out)
	}
	return all, nil
}

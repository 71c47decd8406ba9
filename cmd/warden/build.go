package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentwarden/warden/decisionlog"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a"
	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/proxy/mcp"
	"github.com/agentwarden/warden/proxy/state"
)

// parts is everything serve runs, built from one configuration: what
// `warden check --config` builds too, so that check refuses exactly what
// serve would.
type parts struct {
	engine   *policies.Engine
	enf      *proxy.Enforcer
	sessions *sessions.Decider // MACP's decision on enf: the sidecar's and ext_authz's
	up       *macp.Upstream    // nil without macp.upstream
	macp     *macp.Server      // nil when the mode is off, as mcp and ext
	mcp      *mcp.Server
	a2a      *a2a.Server
	ext      *extauthz.Server
	reg      *prometheus.Registry
	metrics  *metrics
	dl       *decisionlog.Logger // nil when the decision log is off
	mcpKeys  *handle.Ring        // the MCP handle keys, nil when the mode is off; a reload swaps them
	a2aKeys  *handle.Ring        // the A2A handle keys, likewise
	state    *state.Redis        // nil without state.url
	ready    func() error        // every configured upstream reachable
	tls      []*listener.TLS     // the listeners' TLS material, reloaded on SIGHUP
	modes    []string            // what is served, one line each
	packages []policies.FilePackage
}

// Close releases the upstream connection and flushes and closes the
// decision log (after the listeners drained); it is safe on a nil parts.
func (p *parts) Close() {
	if p == nil {
		return
	}
	if p.up != nil {
		_ = p.up.Close()
	}
	if p.dl != nil {
		_ = p.dl.Close()
	}
	if p.state != nil {
		_ = p.state.Close()
	}
}

// build validates cfg as serve runs it (flags applied, limits inherited)
// and builds every part: the authenticator (reading the tokens and JWKS
// files), the policies, the Enforcer and the server of each configured mode
// (reading TLS certificates, keys and CA bundles, the MCP handle key and the
// upstream token files). It opens no socket and starts no goroutine; tp may
// be nil.
func build(ctx context.Context, cfg Config, log *slog.Logger, tp trace.TracerProvider) (*parts, error) {
	if err := cfg.serveValidate(); err != nil {
		return nil, err
	}
	p := &parts{reg: newRegistry()}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	checks, err := p.buildEnforcer(ctx, cfg, log, tp)
	if err != nil {
		return nil, err
	}
	if cfg.MACP.Listen != "" {
		if err := p.buildMACP(cfg.MACP, log, tp); err != nil {
			return nil, err
		}
	}
	if cfg.MCP.Listen != "" {
		check, err := p.buildMCP(cfg.MCP, log)
		if err != nil {
			return nil, err
		}
		checks = append(checks, check)
	}
	if cfg.A2A.Listen != "" {
		check, err := p.buildA2A(cfg.A2A, log)
		if err != nil {
			return nil, err
		}
		checks = append(checks, check)
	}
	if cfg.ExtAuthz.Listen != "" {
		if err := p.buildExtAuthz(cfg.ExtAuthz, log); err != nil {
			return nil, err
		}
	}
	if p.state != nil && cfg.ExtAuthz.Listen != "" {
		p.modes = append(p.modes, "task table and MACP sessions shared through "+p.state.String())
	} else if p.state != nil {
		p.modes = append(p.modes, "task table shared through "+p.state.String())
	}
	p.ready = func() error {
		for _, c := range checks {
			if err := c.check(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
		return nil
	}
	ok = true
	return p, nil
}

// buildEnforcer builds the authenticator, the policies, the runtime
// connection, the metrics, the decision log, the shared state, the
// Enforcer that decides with them and MACP's decision on it (one session
// table for the MACP sidecar and ext_authz); it returns the readiness checks
// of the upstream and the state.
func (p *parts) buildEnforcer(ctx context.Context, cfg Config, log *slog.Logger, tp trace.TracerProvider) ([]namedCheck, error) {
	var err error
	if p.packages, err = policies.Packages(cfg.Policies); err != nil {
		return nil, err
	}
	a, err := authn.New(cfg.Authn, authn.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	if p.engine, err = policies.New(ctx, cfg.Policies); err != nil {
		return nil, err
	}
	opts := proxy.Options{Authenticator: a, Policies: p.engine, Logger: log}
	var macpOpts sessions.Options
	var checks []namedCheck
	// The runtime: the sidecar's upstream, and where state is rebuilt from
	// (ext_authz too, when macp.upstream is given).
	if cfg.MACP.Upstream != "" {
		if p.up, err = macp.DialUpstream(cfg.MACP, tp); err != nil {
			return nil, err
		}
		rb := macp.NewRebuilder(p.up, log)
		macpOpts.Rebuilder, macpOpts.PolicySource = rb, rb
		checks = append(checks, namedCheck{"macp upstream " + cfg.MACP.Upstream, p.up.Ready})
	}
	p.metrics = newMetrics(p.reg)
	observer := observers{p.metrics}
	if p.dl, err = decisionlog.New(cfg.DecisionLog, os.Stdout, map[string]string{"app": "warden", "version": version}); err != nil {
		return nil, err
	}
	if p.dl != nil {
		observer = append(observer, p.dl)
		if p.dl.Shipper() != nil {
			p.dl.WithShipping(newShipMetrics(p.reg), log)
		}
	}
	opts.Observer, opts.Tracer = observer, tp
	opts.RecordInputs = p.dl != nil && cfg.DecisionLog.IncludeInput
	// The shared state: the MCP and A2A task table on Redis and, for an ext_authz
	// fleet, the MACP sessions, this replica's tables their cache. Connected
	// on first use: an unreachable Redis makes the decisions that need it
	// fail closed and /readyz report it.
	if cfg.State.URL != "" {
		if p.state, err = state.New(cfg.State); err != nil {
			return nil, err
		}
		opts.Tasks = p.state
		if cfg.ExtAuthz.Listen != "" { // serveValidate refuses it with the MACP sidecar
			macpOpts.Store = p.state
		}
		checks = append(checks, namedCheck{"state " + p.state.String(), p.state.Ready})
	}
	if p.enf, err = proxy.New(cfg.Enforcer, opts); err != nil {
		return nil, err
	}
	if p.sessions, err = sessions.New(p.enf, macpOpts); err != nil {
		return nil, err
	}
	return checks, nil
}

// buildMACP builds the MACP sidecar's server over p's MACP decision and upstream.
func (p *parts) buildMACP(cfg macp.Config, log *slog.Logger, tp trace.TracerProvider) error {
	var err error
	if cfg.TLS, err = p.loadTLS("macp", cfg.Plaintext, cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile, log); err != nil {
		return err
	}
	if p.macp, err = macp.New(cfg, p.sessions, p.up, log, tp); err != nil {
		return err
	}
	p.modes = append(p.modes, fmt.Sprintf("MACP sidecar on %s -> runtime %s (transport %s; %s)", cfg.Listen, cfg.Upstream, cfg.FrontDoor(), cfg.Streams))
	return nil
}

// buildMCP builds the MCP sidecar's server and handle keys; it returns the
// readiness check of its upstream.
func (p *parts) buildMCP(cfg mcp.Config, log *slog.Logger) (namedCheck, error) {
	keys, check, err := httpSidecar(cfg.Sidecar(), cfg.HandleKeyFile, "task and session", log)
	if err != nil {
		return check, err
	}
	if cfg.TLS, err = p.loadTLS("mcp", cfg.Plaintext, cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile, log); err != nil {
		return check, err
	}
	if p.mcp, err = mcp.New(cfg, p.enf, keys, nil, log); err != nil {
		return check, err
	}
	p.metrics.answersOf("mcp", p.mcp.Answers)
	p.mcpKeys = keys
	p.modes = append(p.modes, fmt.Sprintf("MCP sidecar on %s -> server %s (%s; handle keys %s)", cfg.Listen, cfg.Upstream, cfg.WithDefaults().Streams, keyIDs(keys)))
	return check, nil
}

// buildA2A builds the A2A sidecar's server and handle keys; it returns the
// readiness check of its upstream.
func (p *parts) buildA2A(cfg a2a.Config, log *slog.Logger) (namedCheck, error) {
	keys, check, err := httpSidecar(cfg.Sidecar(), cfg.HandleKeyFile, "task and context", log)
	if err != nil {
		return check, err
	}
	if cfg.TLS, err = p.loadTLS("a2a", cfg.Plaintext, cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile, log); err != nil {
		return check, err
	}
	if p.a2a, err = a2a.New(cfg, p.enf, keys, nil, log); err != nil {
		return check, err
	}
	p.metrics.answersOf("a2a", p.a2a.Answers)
	p.a2aKeys = keys
	p.modes = append(p.modes, fmt.Sprintf("A2A sidecar on %s -> server %s (%s; handle keys %s)", cfg.Listen, cfg.Upstream, cfg.WithDefaults().Streams, keyIDs(keys)))
	return check, nil
}

// buildExtAuthz builds the Envoy ext_authz server over p's MACP decision
// (and its Enforcer).
func (p *parts) buildExtAuthz(cfg extauthz.Config, log *slog.Logger) error {
	var err error
	if p.ext, err = extauthz.New(cfg, p.sessions, log); err != nil {
		return err
	}
	m := "ext_authz on " + cfg.Listen + " (MACP: " + cfg.Unseen()
	if cfg.MCP {
		m += " and MCP at " + orDefault(cfg.MCPPath, extauthz.DefaultMCPPath)
	}
	if cfg.A2A {
		m += " and A2A at " + orDefault(cfg.A2APath, extauthz.DefaultA2APath)
	}
	p.modes = append(p.modes, m+")")
	return nil
}

// serveValidate is Validate plus what serve needs beyond a valid file: an
// authentication method, something to serve, and each configured mode's own
// validation.
func (c Config) serveValidate() error {
	var errs []error
	if len(c.Authn.Mode) == 0 { // Validate checks authn when a mode is given
		errs = append(errs, errors.New("choose an authentication method with --auth (or authn.mode in the config)"))
	}
	if c.MACP.Listen == "" && c.ExtAuthz.Listen == "" && c.MCP.Listen == "" && c.A2A.Listen == "" {
		errs = append(errs, errors.New("nothing to serve: give --macp-listen (MACP sidecar), --mcp-listen (MCP sidecar), --a2a-listen (A2A sidecar) and/or --extauthz-listen (Envoy ext_authz)"))
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MACP.Listen != "" {
		if err := c.MACP.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ExtAuthz.Listen != "" {
		if err := c.ExtAuthz.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.State.URL != "" && c.ExtAuthz.Listen != "" && c.MACP.Listen != "" {
		errs = append(errs, errors.New("state.url with extauthz.listen shares MACP sessions between ext_authz replicas, which commit on allow; "+
			"the MACP sidecar commits on the runtime's Ack, after which a replica's concurrent commit could no longer be refused: "+
			"run the sidecar (one per runtime instance) and the ext_authz fleet as separate processes"))
	}
	return joinUnique(errs)
}

// joinUnique joins errs, each distinct line once (a section's Validate and
// the file's may name the same problem).
func joinUnique(errs []error) error {
	seen := map[string]bool{}
	var out []error
	for _, err := range errs {
		for _, line := range strings.Split(err.Error(), "\n") {
			if !seen[line] {
				seen[line] = true
				out = append(out, errors.New(line))
			}
		}
	}
	return errors.Join(out...)
}

// loadTLS reads a listener's certificate, key and client CA bundle, so that
// a missing or broken file is found before anything is served, and keeps the
// material for SIGHUP to reload; nil for a plaintext listener.
func (p *parts) loadTLS(section string, plaintext bool, cert, key, clientCA string, log *slog.Logger) (*listener.TLS, error) {
	if plaintext {
		return nil, nil
	}
	t, err := listener.NewTLS(cert, key, clientCA, log)
	if err != nil {
		return nil, fmt.Errorf("%s tls: %w", section, err)
	}
	t.OnReload(func(err error) { p.metrics.tlsReloaded(section, err) })
	p.tls = append(p.tls, t)
	return t, nil
}

// httpSidecar prepares what an HTTP sidecar (MCP, A2A) needs before it is
// built: its handle key loaded from keyFile (a random
// one, with a warning naming the handles that will not survive, when none),
// and the readiness check of its upstream.
func httpSidecar(sc listener.Sidecar, keyFile, handles string, log *slog.Logger) (*handle.Ring, namedCheck, error) {
	keys, err := handle.LoadKeyring(keyFile)
	if err != nil {
		return nil, namedCheck{}, fmt.Errorf("%s.handle_key_file: %w", sc.Name, err)
	}
	if keyFile == "" {
		log.Warn(sc.Name + ": no handle key file; " + handles + " handles will not survive a restart nor work across replicas")
	}
	if err := sc.Validate(); err != nil {
		return nil, namedCheck{}, err
	}
	addr, err := dialAddr(sc.Upstream)
	if err != nil {
		return nil, namedCheck{}, err
	}
	probe := newDialProbe(addr, min(sc.Limits.WithDefaults().UpstreamConnectTimeout, probeTimeout), time.Now)
	return handle.NewRing(keys), namedCheck{sc.Name + " upstream " + sc.Upstream, probe.Ready}, nil
}

// keyIDs names a ring's keys for `warden check` and the start-up line, the
// sealing key first ("(no id)" for a single-key file's key).
func keyIDs(r *handle.Ring) string {
	ids := r.Keyring().IDs()
	for i, id := range ids {
		if id == "" {
			ids[i] = "(no id)"
		}
	}
	return strings.Join(ids, ", ")
}

// namedCheck is one readiness condition.
type namedCheck struct {
	name  string
	check func() error
}

// dialAddr is the host:port an http(s) URL connects to.
func dialAddr(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("upstream: %q is not an http(s) URL", raw)
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// Readiness probe bounds: one TCP dial of at most probeTimeout, its result
// reused for probeCache, so that probes do not hammer the upstream.
const (
	probeTimeout = time.Second
	probeCache   = time.Second
)

// dialProbe reports whether a TCP connection to addr can be opened. A result
// is reused for probeCache; concurrent callers share one dial.
type dialProbe struct {
	addr    string
	timeout time.Duration
	now     func() time.Time
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)

	mu   sync.Mutex
	at   time.Time
	last error
}

func newDialProbe(addr string, timeout time.Duration, now func() time.Time) *dialProbe {
	d := &net.Dialer{}
	return &dialProbe{addr: addr, timeout: timeout, now: now, dial: d.DialContext}
}

// Ready dials the upstream, or returns the result of a dial less than
// probeCache old.
func (p *dialProbe) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && p.now().Sub(p.at) < probeCache {
		return p.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	c, err := p.dial(ctx, "tcp", p.addr)
	if err == nil {
		_ = c.Close()
	} else {
		err = fmt.Errorf("unreachable: %w", err)
	}
	p.at, p.last = p.now(), err
	return err
}

// orDefault is v, or def when v is empty.
func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

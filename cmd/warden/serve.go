package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/gc"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp"
	"github.com/agentwarden/warden/proxy/state"
)

const serveSynopsis = `[--config FILE] [flags]

Run Warden in one or more modes at once (flags override the config file):
  MACP sidecar  --macp-listen ADDR --macp-upstream RUNTIME   gRPC, in front of a MACP runtime
  MCP sidecar   --mcp-listen ADDR --mcp-upstream URL         Streamable HTTP, in front of an MCP server
  A2A sidecar   --a2a-listen ADDR --a2a-upstream URL         A2A JSON-RPC over HTTP+SSE, in front of an A2A server
  ext_authz     --extauthz-listen ADDR [--extauthz-mcp|--extauthz-a2a]  Envoy's external authorization service
Every mode needs an authentication method (--auth) and TLS or an explicit
--plaintext. SIGHUP reloads authentication, policies, handle keys and the TLS
files (also read again every --tls-reload-interval), and reopens the decision
log file.`

// serveCmd runs the sidecar: flags override the config file.
func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	listen := fs.String("macp-listen", "", "address the MACP sidecar listens on (host:port)")
	upstream := fs.String("macp-upstream", "", "address of the MACP runtime (host:port)")
	transport := fs.String("transport", "", "the MACP sidecar's front door: grpc (grpc-go server and client) or relay (HTTP/2 frame relay deciding Send itself) (macp.transport; default grpc)")
	auth := fs.String("auth", "", "authentication: jwt, static, mtls or dev (comma-separated to try several)")
	insecureAuth := fs.Bool("insecure-dev-auth", false, "allow --auth dev: the bearer value is taken as the identity, unverified")
	plaintext := fs.Bool("plaintext", false, "serve and dial the runtime without TLS (loopback and tests only)")
	listenPlaintext := fs.Bool("listen-plaintext", false, "serve without TLS")
	upstreamPlaintext := fs.Bool("upstream-plaintext", false, "dial the runtime without TLS")
	certFile := fs.String("tls-cert", "", "the listener's certificate (PEM)")
	keyFile := fs.String("tls-key", "", "the listener's private key (PEM)")
	clientCA := fs.String("tls-client-ca", "", "CA bundle that verifies client certificates (turns on mTLS)")
	upstreamCA := fs.String("upstream-ca", "", "CA bundle that verifies the runtime's certificate")
	maxMsg := fs.Int("max-message-bytes", 0, "largest gRPC message accepted or forwarded (default 4 MiB)")
	tokens := fs.String("static-tokens", "", "static token file in the MACP runtime's shape")
	jwksURL := fs.String("jwks-url", "", "JWKS URL for --auth jwt")
	jwksFile := fs.String("jwks-file", "", "JWKS file for --auth jwt")
	issuer := fs.String("jwt-issuer", "", "required JWT issuer")
	audience := fs.String("jwt-audience", "", "required JWT audience")
	sessions := fs.Int("sessions", 0, "session table bound (default 100000)")
	dryRun := fs.Bool("dry-run", false, "log refusals and forward everything")
	var depth *int
	fs.Func("pipeline-depth", "MACP TaskUpdate, Progress and HandoffContext messages of one session that may await the runtime's answer at once; 0 or 1: one message of a session at a time (default 16)", func(v string) error {
		n, err := strconv.Atoi(v)
		depth = &n
		return err
	})
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
	adminListen := fs.String("admin-listen", "", "address of the admin port: /healthz, /readyz, /metrics (off when empty)")
	otlp := fs.String("otlp-endpoint", "", "OTLP/gRPC collector (host:port) that receives traces (off when empty)")
	extListen := fs.String("extauthz-listen", "", "serve Envoy ext_authz Check on this address (host:port)")
	extMCP := fs.Bool("extauthz-mcp", false, "ext_authz: check requests that are not gRPC as MCP Streamable HTTP")
	extStarts := fs.Int("extauthz-max-unconfirmed-starts", 0, fmt.Sprintf("ext_authz: MACP sessions one principal started through this replica that have not ended (terminal or expired); one more SessionStart is refused (default %d)", extauthz.DefaultMaxUnconfirmedStarts))
	extA2A := fs.Bool("extauthz-a2a", false, "ext_authz: check requests that are not gRPC as A2A JSON-RPC (not with --extauthz-mcp)")
	extA2APath := fs.String("extauthz-a2a-path", "", "ext_authz: the A2A JSON-RPC endpoint's path; any other path is denied but GET of the agent card (default /)")
	extMCPPath := fs.String("extauthz-mcp-path", "", "ext_authz: the MCP endpoint's path; any other path is denied (default /mcp)")
	extMaxBody := fs.Int64("extauthz-max-body-bytes", 0, "ext_authz: largest MCP or A2A request body; a larger one, or one Envoy cut (x-envoy-auth-partial-body), gets 413 (default 4 MiB; set Envoy's max_request_bytes at least as large)")
	mcpListen := fs.String("mcp-listen", "", "address the MCP sidecar listens on (host:port)")
	mcpUpstream := fs.String("mcp-upstream", "", "the MCP server's endpoint URL (http://host:port/mcp)")
	decisionLog := fs.String("decision-log", "", "write one OPA-shaped record per decision to this file (- for standard output; off when empty)")
	decisionInput := fs.Bool("decision-log-include-input", false, "record in each decision-log record what it was decided on (the MACP envelope, the MCP or A2A policy input), for warden what-if; sensitive: message content (decision_log.include_input)")
	upTokens := fs.String("upstream-tokens-file", "", "token file (the runtime's shape) whose token for a principal authenticated by client certificate is presented to the runtime in place of the client's credentials (MACP sidecar and ext_authz)")
	mcpMaxBody := fs.Int64("mcp-max-body-bytes", 0, "MCP: largest request body; a larger one gets 413 and a JSON-RPC error naming the limit (default 4 MiB)")
	mcpMaxResp := fs.Int64("mcp-max-response-bytes", 0, "MCP: largest answer body or SSE event Warden reads whole to check it; a larger answer becomes a JSON-RPC error naming the limit, -1 for no bound (default 64 MiB)")
	mcpKey := fs.String("mcp-handle-key-file", "", "key (>= 32 bytes) binding MCP task and session handles to principals; replicas share it (random per start when empty)")
	a2aListen := fs.String("a2a-listen", "", "address the A2A sidecar listens on (host:port)")
	a2aUpstream := fs.String("a2a-upstream", "", "the A2A server's JSON-RPC endpoint URL (http://host:port/path)")
	a2aKey := fs.String("a2a-handle-key-file", "", "key (>= 32 bytes) binding A2A task, context and page-token handles to principals; replicas share it (random per start when empty)")
	a2aMaxBody := fs.Int64("a2a-max-body-bytes", 0, "A2A: largest request body; a larger one gets 413 and a JSON-RPC error naming the limit (default 4 MiB)")
	a2aMaxResp := fs.Int64("a2a-max-response-bytes", 0, "A2A: largest answer body or SSE event Warden reads whole to check it; a larger answer becomes a JSON-RPC error naming the limit, -1 for no bound (default 64 MiB)")
	var a2aAllow multi
	fs.Var(&a2aAllow, "a2a-webhook-allow", "A2A: a network (CIDR), address, host or host:port push-notification URLs may name although internal (repeatable)")
	a2aAllowOnly := fs.Bool("a2a-webhook-allow-only", false, "A2A (sidecar and ext_authz): push notifications go only to what --a2a-webhook-allow names")
	a2aRelayListen := fs.String("a2a-push-relay-listen", "", "A2A: address the push relay serves the A2A server on, plain HTTP; a fixed port lets push configs outlive a restart (default 127.0.0.1:0)")
	a2aRelayURL := fs.String("a2a-push-relay-url", "", "A2A: the push relay's base URL as the A2A server reaches it (default http:// and the relay's listen address)")
	a2aRelayTimeout := fs.Duration("a2a-push-timeout", 0, "A2A: time one push delivery may take, dial to answer (default 10s)")
	stateURL := fs.String("state", "", "share the MCP and A2A task tables, and with --extauthz-listen the MACP sessions, between replicas through Redis: redis://host:port/db (state.url; off when empty)")
	var streams macp.StreamLimits
	fs.IntVar(&streams.Max, "max-streams", 0, fmt.Sprintf("MACP: relayed calls held open at once (StreamSession, the watches, pass-through), all callers together; at most %d, the rest of the runtime's streams stay for decided calls (default %d)", macp.MaxStreamsLimit, macp.DefaultMaxStreams))
	fs.IntVar(&streams.PerPrincipal, "max-streams-per-principal", 0, fmt.Sprintf("MACP: relayed calls one principal holds open at once (default %d)", macp.DefaultStreamsPerPrincipal))
	fs.Int64Var(&streams.QueuedBytes, "max-queued-bytes", 0, fmt.Sprintf("MACP: bytes of messages waiting for the clients of all relayed calls together; a call holding more than 64 KiB when it is taken up is ended (default %d)", macp.DefaultQueuedBytes))
	fs.IntVar(&streams.Anonymous, "max-anonymous-streams", 0, fmt.Sprintf("MACP: relayed calls without credentials (pass-through services such as gRPC health, public discovery) open at once (default %d)", macp.DefaultAnonymousStreams))
	fs.IntVar(&streams.Watches, "max-watches", 0, fmt.Sprintf("MACP: how many of --max-streams the watches (WatchSignals, WatchSessions) may hold, all callers together; the rest stays for StreamSession and the other relayed calls (default min(%d, max-streams / 3))", macp.DefaultWatches))
	fs.IntVar(&streams.WatchesPerPrincipal, "max-watches-per-principal", 0, fmt.Sprintf("MACP: watches one principal holds open at once (default %d)", macp.DefaultWatchesPerPrincipal))
	fs.DurationVar(&streams.WatchIdle, "watch-idle", 0, fmt.Sprintf("MACP: end a watch that passed its client nothing for this long, UNAVAILABLE (default %v)", macp.DefaultWatchIdle))
	var sideStreams listener.StreamLimits
	fs.IntVar(&sideStreams.Max, "sidecar-max-streams", 0, "MCP and A2A: requests forwarded and held open at once (answers, SSE streams), all callers together; also caps the upstream connections (mcp.streams.max, a2a.streams.max; default: the listener's connection cap)")
	fs.IntVar(&sideStreams.PerPrincipal, "sidecar-max-streams-per-principal", 0, fmt.Sprintf("MCP and A2A: requests one principal holds open at once; one more gets 429 with Retry-After and a JSON-RPC error (mcp.streams.per_principal, a2a.streams.per_principal; default %d)", listener.DefaultStreamsPerPrincipal))
	fs.Int64Var(&sideStreams.AnswerBytes, "sidecar-answer-bytes", 0, fmt.Sprintf("MCP and A2A: bytes of answers read whole to check them that the requests in flight hold together; one answer alone always fits, one more past the budget gets 503 with Retry-After and a JSON-RPC error (mcp.streams.answer_bytes, a2a.streams.answer_bytes; default %d)", listener.DefaultAnswerBytes))
	var lim listener.Limits
	fs.IntVar(&lim.MaxConnections, "max-connections", 0, "connections each listener holds open at once; more are closed at accept (default min(4096, (file limit - 256) / 4))")
	fs.DurationVar(&lim.HeaderTimeout, "header-timeout", 0, "HTTP: time for TLS handshake, request line and headers (default 10s)")
	fs.DurationVar(&lim.BodyTimeout, "body-timeout", 0, "HTTP: time to read a whole request, body included; gRPC: to receive a call's request message; responses are not bounded (default 60s)")
	fs.DurationVar(&lim.IdleTimeout, "idle-timeout", 0, "close an HTTP keep-alive connection without a request, or a gRPC connection without a call, after this long (default 75s)")
	fs.DurationVar(&lim.GRPCConnectionTimeout, "grpc-connection-timeout", 0, "gRPC: time for TLS handshake and HTTP/2 preface of a new connection (default 10s)")
	fs.DurationVar(&lim.GRPCKeepaliveTime, "grpc-keepalive-time", 0, "gRPC: ping a connection silent this long (default 60s)")
	fs.DurationVar(&lim.GRPCKeepaliveTimeout, "grpc-keepalive-timeout", 0, "gRPC: close a connection whose ping is unanswered this long (default 20s)")
	fs.DurationVar(&lim.GRPCKeepaliveMinTime, "grpc-keepalive-min-time", 0, "gRPC: shortest interval at which clients may ping (default 10s)")
	fs.DurationVar(&lim.UpstreamBackoffMax, "upstream-backoff-max", 0, "longest delay between reconnects to the MACP runtime (default 1s)")
	fs.DurationVar(&lim.UpstreamConnectTimeout, "upstream-connect-timeout", 0, "time one connection attempt to an upstream may take (default 2s)")
	fs.DurationVar(&lim.TLSReloadInterval, "tls-reload-interval", 0, "how often the listeners' certificate, key and client CA files are read again; a change applies to new handshakes and closes connections whose client certificate no longer verifies (default 10s; SIGHUP reloads at once)")
	var extra multi
	fs.Var(&extra, "policy", "an extra Rego policy file (repeatable)")
	gcFloor := fs.Int64("gc-min-heap-bytes", 0, "floor under the garbage collector's heap goal: no collection before the heap reaches it; -1 for none (default 64 MiB)")
	gcPercent := fs.Int("gc-percent", 0, "GOGC above the floor; -1 for off but for the memory limit (default: GOGC's, 100)")
	gcLimit := fs.Int64("gc-memory-limit-bytes", 0, "the runtime's soft memory limit, GOMEMLIMIT (default: GOMEMLIMIT's, none)")
	if err := parseFlags(fs, serveSynopsis, args, stdout, false); err != nil {
		return err
	}
	// apply puts the flags over a configuration read from the file; a reload
	// reads the file again and applies the same flags.
	apply := func(c *Config) {
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		// listenTLS puts the listener flags (plaintext, certificate, key,
		// client CA) over one listener's section.
		listenTLS := func(plain *bool, cert, key, clientCAFile *string) {
			*plain = *plain || *plaintext || *listenPlaintext
			set(cert, *certFile)
			set(key, *keyFile)
			set(clientCAFile, *clientCA)
		}
		set(&c.MACP.Listen, *listen)
		set(&c.MACP.Upstream, *upstream)
		set(&c.MACP.Transport, *transport)
		set(&c.Authn.Static.TokensFile, *tokens)
		set(&c.Authn.JWT.JWKSURL, *jwksURL)
		set(&c.Authn.JWT.JWKSFile, *jwksFile)
		set(&c.Authn.JWT.Issuer, *issuer)
		set(&c.Log.Level, *logLevel)
		set(&c.Admin.Listen, *adminListen)
		set(&c.Tracing.OTLPEndpoint, *otlp)
		set(&c.ExtAuthz.Listen, *extListen)
		set(&c.MACP.UpstreamTokensFile, *upTokens)
		set(&c.DecisionLog.Path, *decisionLog)
		c.DecisionLog.IncludeInput = c.DecisionLog.IncludeInput || *decisionInput
		set(&c.ExtAuthz.UpstreamTokensFile, *upTokens)
		c.ExtAuthz.MCP = c.ExtAuthz.MCP || *extMCP
		c.ExtAuthz.A2A = c.ExtAuthz.A2A || *extA2A
		if *extStarts != 0 {
			c.ExtAuthz.MaxUnconfirmedStarts = *extStarts
		}
		c.ExtAuthz.A2AWebhookAllow = append(c.ExtAuthz.A2AWebhookAllow, a2aAllow...)
		set(&c.ExtAuthz.A2APath, *extA2APath)
		set(&c.ExtAuthz.MCPPath, *extMCPPath)
		if *extMaxBody != 0 {
			c.ExtAuthz.MaxBodyBytes = *extMaxBody
		}
		set(&c.MCP.Listen, *mcpListen)
		set(&c.MCP.Upstream, *mcpUpstream)
		set(&c.MCP.HandleKeyFile, *mcpKey)
		set(&c.State.URL, *stateURL)
		set(&c.A2A.Listen, *a2aListen)
		set(&c.A2A.Upstream, *a2aUpstream)
		set(&c.A2A.HandleKeyFile, *a2aKey)
		c.A2A.WebhookAllow = append(c.A2A.WebhookAllow, a2aAllow...)
		c.A2A.WebhookAllowOnly = c.A2A.WebhookAllowOnly || *a2aAllowOnly
		c.ExtAuthz.A2AWebhookAllowOnly = c.ExtAuthz.A2AWebhookAllowOnly || *a2aAllowOnly
		set(&c.A2A.PushRelay.Listen, *a2aRelayListen)
		set(&c.A2A.PushRelay.URL, *a2aRelayURL)
		if *a2aRelayTimeout != 0 {
			c.A2A.PushRelay.Timeout = *a2aRelayTimeout
		}
		if *a2aMaxBody != 0 {
			c.A2A.MaxBodyBytes = *a2aMaxBody
		}
		if *a2aMaxResp != 0 {
			c.A2A.MaxResponseBytes = *a2aMaxResp
		}
		listenTLS(&c.A2A.Plaintext, &c.A2A.CertFile, &c.A2A.KeyFile, &c.A2A.ClientCAFile)
		for _, st := range []*listener.StreamLimits{&c.MCP.Streams, &c.A2A.Streams} {
			if sideStreams.Max != 0 {
				st.Max = sideStreams.Max
			}
			if sideStreams.PerPrincipal != 0 {
				st.PerPrincipal = sideStreams.PerPrincipal
			}
			if sideStreams.AnswerBytes != 0 {
				st.AnswerBytes = sideStreams.AnswerBytes
			}
		}
		if *mcpMaxBody != 0 {
			c.MCP.MaxBodyBytes = *mcpMaxBody
		}
		if *mcpMaxResp != 0 {
			c.MCP.MaxResponseBytes = *mcpMaxResp
		}
		listenTLS(&c.MCP.Plaintext, &c.MCP.CertFile, &c.MCP.KeyFile, &c.MCP.ClientCAFile)
		if *audience != "" {
			c.Authn.JWT.Audience = authn.Audience{*audience}
		}
		if *auth != "" {
			c.Authn.Mode = nil
			for _, m := range strings.Split(*auth, ",") {
				c.Authn.Mode = append(c.Authn.Mode, authn.Method(strings.TrimSpace(m)))
			}
		}
		c.Authn.Insecure = c.Authn.Insecure || *insecureAuth
		listenTLS(&c.MACP.Plaintext, &c.MACP.CertFile, &c.MACP.KeyFile, &c.MACP.ClientCAFile)
		c.MACP.UpstreamPlaintext = c.MACP.UpstreamPlaintext || *plaintext || *upstreamPlaintext
		set(&c.MACP.UpstreamCAFile, *upstreamCA)
		if *maxMsg != 0 {
			c.MACP.MaxMessageBytes = *maxMsg
		}
		for _, f := range []struct {
			dst *int
			v   int
		}{{&c.MACP.Streams.Max, streams.Max}, {&c.MACP.Streams.PerPrincipal, streams.PerPrincipal}, {&c.MACP.Streams.Anonymous, streams.Anonymous},
			{&c.MACP.Streams.Watches, streams.Watches}, {&c.MACP.Streams.WatchesPerPrincipal, streams.WatchesPerPrincipal}} {
			if f.v != 0 {
				*f.dst = f.v
			}
		}
		if streams.QueuedBytes != 0 {
			c.MACP.Streams.QueuedBytes = streams.QueuedBytes
		}
		if streams.WatchIdle != 0 {
			c.MACP.Streams.WatchIdle = streams.WatchIdle
		}
		c.Enforcer.DryRun = c.Enforcer.DryRun || *dryRun
		if *sessions != 0 {
			c.Enforcer.Sessions = *sessions
		}
		if depth != nil {
			c.Enforcer.PipelineDepth = *depth
		}
		c.Policies.Files = append(c.Policies.Files, extra...)
		c.inheritLimits(lim)
		if *gcFloor != 0 {
			c.GC.MinHeapBytes = *gcFloor
		}
		if *gcPercent != 0 {
			c.GC.Percent = *gcPercent
		}
		if *gcLimit != 0 {
			c.GC.MemoryLimitBytes = *gcLimit
		}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	apply(&cfg)
	log, err := newLogger(stderr, cfg.Log.Level)
	if err != nil {
		return err
	}
	state.LogTo(log)
	tp, shutdownTracing, err := newTracerProvider(ctx, cfg.Tracing)
	if err != nil {
		return err
	}
	defer shutdownTracing()
	p, err := build(ctx, cfg, log, tp)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer p.Close()
	tuner, err := gc.New(cfg.GC)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return tuner.Run(gctx) })
	if p.dl != nil {
		g.Go(func() error { return p.dl.Run(gctx) })
	}
	if p.macp != nil {
		g.Go(func() error { return p.macp.Run(gctx) })
	}
	if p.mcp != nil {
		g.Go(func() error { return p.mcp.Run(gctx) })
	}
	if p.a2a != nil {
		g.Go(func() error { return p.a2a.Run(gctx) })
	}
	if p.ext != nil {
		g.Go(func() error { return p.ext.Run(gctx) })
	}
	g.Go(func() error { return reloadOnHUP(gctx, *cfgPath, apply, p, log) })
	if cfg.Admin.Listen != "" {
		ad := &admin{addr: cfg.Admin.Listen, reg: p.reg, log: log, ready: p.ready}
		g.Go(func() error { return ad.Run(gctx) })
	}
	return g.Wait()
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("log level %q: %w", level, err)
		}
	}
	if w == nil {
		w = os.Stderr
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// reloadOnHUP, on SIGHUP, reopens the decision log file (logrotate's
// move-then-signal), reads the listeners' TLS files again (the files named
// at start) and rebuilds the authenticator, the policies and the handle
// keyrings from the config file and swaps them in; when the new ones fail
// to build, the old ones stay and the error is logged.
func reloadOnHUP(ctx context.Context, cfgPath string, apply func(*Config), p *parts, log *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
		}
		if p.dl != nil {
			if err := p.dl.Reopen(); err != nil {
				log.Error("reload: the decision log goes on in the file open until now", "err", err)
			}
		}
		for _, t := range p.tls {
			if err := t.Reload(); err != nil {
				log.Error("reload: keeping the current TLS material", "err", err)
			}
		}
		if err := reload(ctx, cfgPath, apply, p, log); err != nil {
			log.Error("reload: keeping the current policies", "err", err)
		}
	}
}

// reload rebuilds the authenticator, the policies and the handle keyrings
// from the config file with the flags applied and swaps them into p; on any
// error p keeps everything it has.
func reload(ctx context.Context, cfgPath string, apply func(*Config), p *parts, log *slog.Logger) (err error) {
	defer func() { p.metrics.reloaded(err) }()
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	apply(&cfg)
	a, err := authn.New(cfg.Authn, authn.Options{Logger: log})
	if err != nil {
		return err
	}
	engine, err := policies.New(ctx, cfg.Policies)
	if err != nil {
		return err
	}
	mcpKeys, err := reloadKeyring(p.mcpKeys, "mcp", cfg.MCP.HandleKeyFile)
	if err != nil {
		return err
	}
	a2aKeys, err := reloadKeyring(p.a2aKeys, "a2a", cfg.A2A.HandleKeyFile)
	if err != nil {
		return err
	}
	p.enf.Swap(a, engine)
	if mcpKeys != nil {
		p.mcpKeys.Set(mcpKeys)
	}
	if a2aKeys != nil {
		p.a2aKeys.Set(a2aKeys)
	}
	log.Info("reload: authentication, policies and handle keys replaced", "policy_files", len(cfg.Policies.Files))
	return nil
}

// reloadKeyring reads the keyring of a running sidecar's ring from file; nil
// (keep the ring) when the sidecar is off or has no key file (its random key
// stays: a new one would break every handle).
func reloadKeyring(ring *handle.Ring, section, file string) (*handle.Keyring, error) {
	if ring == nil || file == "" {
		return nil, nil
	}
	k, err := handle.LoadKeyring(file)
	if err != nil {
		return nil, fmt.Errorf("%s.handle_key_file: %w", section, err)
	}
	return k, nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/gc"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/handle"
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
	flags := registerServeFlags(fs)
	if err := parseFlags(fs, serveSynopsis, args, stdout, false); err != nil {
		return err
	}
	flags.parsed(fs)
	apply := flags.apply
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
	tp, shutdownTracing, err := newTracerProvider(ctx, cfg.Tracing, os.Getenv)
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
		ad := &admin{addr: cfg.Admin.Listen, reg: p.reg, log: log, ready: p.ready, pprof: cfg.Admin.Pprof}
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

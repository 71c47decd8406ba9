// Command warden is the Warden sidecar: it enforces agent-protocol rules
// between agents and the service they coordinate through.
//
// Subcommands:
//
//	warden serve ...                 run the MACP sidecar, the MCP sidecar, the A2A sidecar and/or the Envoy ext_authz service
//	warden check [--config FILE] [--policy FILE...]   validate a configuration as serve would, compile and test policies
//	warden replay [--json] FILE...   decide conformance-format transcripts offline
//	warden what-if --policies DIR LOG...   decide a recorded decision log again under candidate policies
//	warden audit --protocol P --direct URL --warden URL --principal n=t...   play the attack catalogue against a target
//	warden version
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/decisionlog"
	"github.com/agentwarden/warden/gc"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/a2a/pushrelay"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/replay"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `usage: warden <command> [flags]

Warden enforces agent-protocol rules in front of the service agents talk to.
warden serve runs one or more of its modes at once:
  MACP sidecar  --macp-listen ADDR --macp-upstream RUNTIME   gRPC, in front of a MACP runtime
  MCP sidecar   --mcp-listen ADDR --mcp-upstream URL         Streamable HTTP, in front of an MCP server
  A2A sidecar   --a2a-listen ADDR --a2a-upstream URL         A2A JSON-RPC over HTTP+SSE, in front of an A2A server
  ext_authz     --extauthz-listen ADDR [--extauthz-mcp|--extauthz-a2a]  Envoy's external authorization service (MACP, MCP, A2A)

commands:
  serve    run the modes above (--auth dev|static|jwt|mtls, or --config FILE)
  check    validate a configuration as serve would, compile the policies and run their Rego tests
  replay   decide MACP transcripts (conformance-fixture format) offline and compare with their expectations
  what-if  decide a recorded decision log (or transcripts) again under candidate policies; exit 1 when decisions change
  audit    play Warden's attack catalogue against a running target, alone and through Warden, and report what each refused
  version  print the version

Run 'warden <command> -h' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command line that does not parse; run reports it in one
// line with a pointer to the command's -h.
type usageError struct {
	cmd string // "serve", ...; "" for warden itself
	err error
}

func (e usageError) Error() string { return e.err.Error() }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "replay":
		err = replayCmd(ctx, args[1:], stdout, stderr)
	case "check":
		err = checkCmd(ctx, args[1:], stdout)
	case "what-if":
		err = whatIfCmd(ctx, args[1:], stdout)
	case "audit":
		err = auditCmd(ctx, args[1:], stdout, stderr)
	case "serve":
		err = serveCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		err = versionCmd(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usageError{err: fmt.Errorf("unknown command %q", args[0])}
	}
	var ue usageError
	var we whatIfError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errChanged), errors.Is(err, errBreached):
		return 1
	case errors.As(err, &we):
		fmt.Fprintln(stderr, "warden:", err)
		return 2
	case errors.As(err, &ue):
		name := strings.TrimSpace("warden " + ue.cmd)
		fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", name, ue.err, name)
		return 2
	default:
		fmt.Fprintln(stderr, "warden:", err)
		return 1
	}
}

// parseFlags parses a command's flags. -h prints the command's usage to
// stdout and returns flag.ErrHelp; a bad flag or an unexpected argument is a
// usageError. The flag package itself prints nothing.
func parseFlags(fs *flag.FlagSet, synopsis string, args []string, stdout io.Writer, positional bool) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, strings.Replace("usage: warden "+fs.Name()+" "+synopsis, " \n", "\n", 1))
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(stdout, "\nflags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return flag.ErrHelp
	}
	if err != nil {
		return usageError{cmd: fs.Name(), err: err}
	}
	if !positional && fs.NArg() > 0 {
		return usageError{cmd: fs.Name(), err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

func versionCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fs, "\n\nPrint the version.", args, stdout, false); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "warden", versionString())
	return nil
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return "dev-" + s.Value[:min(12, len(s.Value))]
			}
		}
		if bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "dev"
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object per message instead of text lines")
	var extra multi
	fs.Var(&extra, "policy", "an extra Rego policy file (repeatable)")
	if err := parseFlags(fs, `[--json] [--policy FILE]... FILE...

Run MACP transcripts (conformance-fixture format) through Warden's rules and
policies offline and print each decision; exit 0 only when every outcome
matches the transcript's expectations.`, args, stdout, true); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{cmd: "replay", err: errors.New("no transcript files given")}
	}
	engine, err := policies.New(ctx, policies.Config{Files: extra})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	enc := json.NewEncoder(stdout)
	failed, files := 0, 0
	for _, f := range fs.Args() {
		res, err := replay.Run(ctx, engine, f)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		files++
		for _, l := range res.Lines {
			if *asJSON {
				_ = enc.Encode(l)
			} else {
				fmt.Fprintln(stdout, l.String())
			}
		}
		for _, msg := range res.Failures {
			fmt.Fprintln(stderr, "MISMATCH", msg)
		}
		if !res.OK() {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("replay: %d of %d transcripts did not match their expectations", failed, files)
	}
	if !*asJSON {
		fmt.Fprintf(stderr, "warden replay: all %d transcripts matched their expectations\n", files)
	}
	return nil
}

// checkCmd validates what serve would run: with --config, the whole
// configuration exactly as serve builds it (every section, every file it
// names); without, the policies alone.
func checkCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file (YAML), checked as serve --config FILE would build it")
	var extra multi
	fs.Var(&extra, "policy", "an extra Rego policy file (repeatable)")
	if err := parseFlags(fs, `[--config FILE] [--policy FILE]...

Validate the configuration as serve would (every section, every file it
names: tokens, JWKS, TLS certificates, keys and CAs, the MCP and A2A handle keys,
upstream tokens, policies), compile the policies (embedded defaults plus
operator files) and run their Rego unit tests.`, args, stdout, false); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	cfg.Policies.Files = append(cfg.Policies.Files, extra...)
	var engine *policies.Engine
	var packages []policies.FilePackage
	if *cfgPath != "" {
		cfg.inheritLimits(listener.Limits{})
		p, err := build(ctx, cfg, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			return fmt.Errorf("config %s: %w", *cfgPath, err)
		}
		p.Close()
		engine, packages = p.engine, p.packages
		fmt.Fprintln(stdout, "config: ok")
		for _, m := range p.modes {
			fmt.Fprintln(stdout, "  serves:", m)
		}
		if p.dl != nil && p.dl.Shipper() != nil {
			fmt.Fprintln(stdout, "  decision log shipped to", p.dl.Shipper())
		}
		fmt.Fprintln(stdout, "  gc:", gc.Describe(cfg.GC))
		if line := authn.DescribeMTLS(cfg.Authn); line != "" {
			fmt.Fprintln(stdout, "  mtls:", line)
		}
		if p.a2a != nil {
			fmt.Fprintln(stdout, "  a2a push relay:", pushrelay.Describe(cfg.A2A.PushRelay))
		}
	} else {
		if packages, err = policies.Packages(cfg.Policies); err != nil {
			return err
		}
		if engine, err = policies.New(ctx, cfg.Policies); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "config: none given (--config FILE checks one as serve would run it)")
	}
	fmt.Fprintf(stdout, "policies: compiled (%d operator files)\n", len(cfg.Policies.Files))
	for _, fp := range packages {
		switch {
		case fp.Test:
			fmt.Fprintf(stdout, "  %s: tests, package %s\n", fp.File, fp.Package)
		case fp.Sub:
			fmt.Fprintf(stdout, "  %s: extends %s (a sub-package: its rules count where warden.macp, warden.mcp or warden.a2a refers to them)\n", fp.File, fp.Package)
		default:
			fmt.Fprintf(stdout, "  %s: extends %s\n", fp.File, fp.Package)
		}
	}
	sessions, share := cfg.Enforcer.OwnerTable()
	fmt.Fprintf(stdout, "owner table: %d entries, at most %d a principal (its own least recently used go first)\n", sessions, share)
	if d := cfg.Enforcer.PipelineDepth; d > 1 {
		fmt.Fprintf(stdout, "pipelining: up to %d record-only MACP messages (TaskUpdate, Progress, HandoffContext) of one session in flight; state-changing ones wait for them\n", d)
	} else {
		fmt.Fprintf(stdout, "pipelining: off (pipeline_depth %d): one message of a session at a time across the runtime's round trip\n", d)
	}
	if dl := cfg.DecisionLog; dl.IncludeInput && dl.Path != "" {
		fmt.Fprintf(stdout, "decision log: include_input on: every record holds what was decided (MACP envelopes, MCP and A2A policy inputs: message content, sensitive), up to %d bytes a decision\n",
			cmp.Or(dl.MaxInputBytes, decisionlog.DefaultMaxInputBytes))
	}
	if ok, why := engine.Memoized(); ok {
		fmt.Fprintf(stdout, "memoization: on, keyed on %s\n", strings.Join(engine.Reads(), ", "))
	} else {
		fmt.Fprintf(stdout, "memoization: off (%s)\n", why)
	}
	results, err := policies.Test(ctx, cfg.Policies)
	if err != nil {
		return err
	}
	for _, r := range results {
		if !r.Passed {
			fmt.Fprintf(stdout, "FAIL %s: %s\n", r.Name, r.Detail)
		}
	}
	fmt.Fprintln(stdout, "policy tests:", policies.Summary(results))
	for _, r := range results {
		if !r.Passed {
			return errors.New("policy tests failed")
		}
	}
	return nil
}

// Command warden is the Warden sidecar: it enforces agent-protocol rules
// between agents and the service they coordinate through.
//
// Subcommands:
//
//	warden serve ...                 the MACP sidecar in front of a runtime
//	warden replay [--json] FILE...   decide conformance-format transcripts offline
//	warden check [--config FILE] [--policy FILE...]   validate config, compile and test policies
//	warden version
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/replay"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `usage: warden <command> [flags]

commands:
  serve --macp-listen ADDR --macp-upstream ADDR --auth dev|static|jwt|mtls [--config FILE] ...
        run the MACP sidecar in front of a runtime (warden serve -h lists every flag)
  replay [--json] [--policy FILE]... FILE...
        run MACP transcripts (conformance-fixture format) through Warden's
        rules and policies offline and print each decision; exit 0 only when
        every outcome matches the transcript's expectations
  check [--config FILE] [--policy FILE]...
        validate the configuration, compile the policies (embedded defaults
        plus operator files) and run their Rego unit tests
  version
        print the version
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "replay":
		return replayCmd(ctx, args[1:], stdout, stderr)
	case "check":
		err = checkCmd(ctx, args[1:], stdout, stderr)
	case "serve":
		err = serveCmd(ctx, args[1:], stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "warden", versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "warden: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "warden:", err)
		return 1
	}
	return 0
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

func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per message instead of text lines")
	var extra multi
	fs.Var(&extra, "policy", "an extra Rego policy file (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "warden replay: no transcript files given")
		return 2
	}
	engine, err := policies.New(ctx, policies.Config{Files: extra})
	if err != nil {
		fmt.Fprintln(stderr, "warden replay:", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	failed, files := 0, 0
	for _, f := range fs.Args() {
		res, err := replay.Run(ctx, engine, f)
		if err != nil {
			fmt.Fprintln(stderr, "warden replay:", err)
			return 1
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
		fmt.Fprintf(stderr, "warden replay: %d of %d transcripts did not match their expectations\n", failed, files)
		return 1
	}
	if !*asJSON {
		fmt.Fprintf(stderr, "warden replay: all %d transcripts matched their expectations\n", files)
	}
	return 0
}

func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	var extra multi
	fs.Var(&extra, "policy", "an extra Rego policy file (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	cfg.Policies.Files = append(cfg.Policies.Files, extra...)
	engine, err := policies.New(ctx, cfg.Policies)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "config: ok")
	fmt.Fprintf(stdout, "policies: compiled (%d operator files)\n", len(cfg.Policies.Files))
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

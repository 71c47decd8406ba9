package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/replay/whatif"
)

// errChanged is what-if's answer when decisions change: exit 1, like diff.
var errChanged = errors.New("decisions change")

func whatIfCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("what-if", flag.ContinueOnError)
	dir := fs.String("policies", "", "directory of candidate operator Rego policies (*.rego; *_test.rego are tests and not loaded)")
	cfgPath := fs.String("config", "", "candidate configuration (YAML): its policies.files and enforcer section")
	format := fs.String("format", "text", "text or json")
	if err := parseFlags(fs, `--policies DIR [--config FILE] [--format text|json] LOG...

Decide a recorded decision log (written with decision_log.include_input) or
MACP transcripts again under candidate policies and configuration, in order,
MACP session state rebuilt as the runtime saw it, and report every decision
that changes. Exit 0 when none changes, 1 when some do, 2 on error.`, args, stdout, true); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{cmd: "what-if", err: errors.New("no decision log given")}
	}
	if *format != "text" && *format != "json" {
		return usageError{cmd: "what-if", err: fmt.Errorf("--format %q: want text or json", *format)}
	}
	if *dir == "" && *cfgPath == "" {
		return usageError{cmd: "what-if", err: errors.New("no candidate: give --policies DIR or --config FILE")}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return whatIfError{err}
	}
	if *dir != "" {
		files, err := filepath.Glob(filepath.Join(*dir, "*.rego"))
		if err != nil {
			return whatIfError{err}
		}
		if len(files) == 0 {
			return whatIfError{fmt.Errorf("--policies %s: no .rego file", *dir)}
		}
		cfg.Policies.Files = append(cfg.Policies.Files, files...)
	}
	candidate, err := policies.New(ctx, cfg.Policies)
	if err != nil {
		return whatIfError{fmt.Errorf("candidate policies: %w", err)}
	}
	base, err := policies.New(ctx, policies.Config{MemoSize: cfg.Policies.MemoSize})
	if err != nil {
		return whatIfError{err}
	}
	var streams []whatif.Stream
	for _, f := range fs.Args() {
		s, err := whatif.Open(ctx, base, f)
		if err != nil {
			return whatIfError{err}
		}
		streams = append(streams, s)
	}
	rep, err := whatif.Run(ctx, whatif.Options{Candidate: candidate, Base: base, Enforcer: cfg.Enforcer}, streams)
	if err != nil {
		return whatIfError{err}
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return whatIfError{err}
	}
	if rep.Changed() > 0 {
		return errChanged
	}
	return nil
}

// whatIfError is an error of what-if itself: exit 2, as 1 means "changed".
type whatIfError struct{ err error }

func (e whatIfError) Error() string { return "what-if: " + e.err.Error() }
func (e whatIfError) Unwrap() error { return e.err }

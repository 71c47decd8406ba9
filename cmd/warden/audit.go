package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentwarden/warden/replay/audit"
)

// errBreached is audit's answer when an attack succeeded through Warden:
// exit 1, the report written all the same.
var errBreached = errors.New("an attack succeeded through Warden")

// principals is a repeatable --principal name=token flag.
type principals []audit.Principal

func (p *principals) String() string {
	var s []string
	for _, x := range *p {
		s = append(s, x.Name)
	}
	return strings.Join(s, ",")
}

func (p *principals) Set(v string) error {
	name, token, ok := strings.Cut(v, "=")
	if !ok || name == "" || token == "" {
		return fmt.Errorf("%q: want name=token", v)
	}
	*p = append(*p, audit.Principal{Name: name, Token: token})
	return nil
}

func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	protocol := fs.String("protocol", "", "the target's protocol: mcp, a2a or macp (required)")
	direct := fs.String("direct", "", "the target alone: its MCP endpoint URL, A2A JSON-RPC URL, or MACP runtime as http://host:port")
	warden := fs.String("warden", "", "the same target through Warden, in the same form")
	var both, onDirect, onWarden principals
	fs.Var(&both, "principal", "name=token: a principal and its bearer credential on both endpoints (repeat; the first is the victim, the second the attacker)")
	fs.Var(&onDirect, "direct-principal", "name=token for the target alone, when its credentials differ from Warden's (repeat; replaces --principal there)")
	fs.Var(&onWarden, "warden-principal", "name=token for Warden, when its credentials differ from the target's (repeat; replaces --principal there)")
	maxRequests := fs.Int("max-requests", 200, "the most requests sent to each endpoint; an attack past it is reported as not tested")
	out := fs.String("out", "", "write audit.md, audit.json and audit.html into this directory (created if missing)")
	format := fs.String("format", "md", "the report written to stdout when --out is not given: md, json or html")
	if err := parseFlags(fs, `--protocol mcp|a2a|macp [--direct URL] [--warden URL] --principal name=token --principal name=token [--out DIR | --format md|json|html]

Play Warden's attack catalogue of a protocol against a running target, alone
(--direct) and through a Warden in front of it (--warden), and report per
attack whether it was blocked, succeeded or could not be tested, and why.
The first principal is the victim, the second the attacker.

Safe by default: the attacks create their own sessions, tasks and contexts
with the credentials given and touch only those (never another client's),
and send at most --max-requests requests to each endpoint.
Exit 0 when no attack succeeded through Warden, 1 when one did (the report
is written all the same), 2 on error.`, args, stdout, false); err != nil {
		return err
	}
	usage := func(format string, a ...any) error {
		return usageError{cmd: "audit", err: fmt.Errorf(format, a...)}
	}
	attacks, err := audit.Catalogue(*protocol)
	if err != nil {
		return usage("--protocol: %w", err)
	}
	if *direct == "" && *warden == "" {
		return usage("nothing to audit: give --direct URL, --warden URL or both")
	}
	if *maxRequests < 1 {
		return usage("--max-requests %d: want at least 1", *maxRequests)
	}
	if *out == "" && *format != "md" && *format != "json" && *format != "html" {
		return usage("--format %q: want md, json or html", *format)
	}
	endpoint := func(name, raw string, specific principals) (*audit.Endpoint, error) {
		if raw == "" {
			return nil, nil
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usage("--%s %q: want an http:// or https:// URL", name, raw)
		}
		ps := specific
		if len(ps) == 0 {
			ps = both
		}
		if len(ps) < 2 {
			return nil, usage("--%s: %d principal(s); give two with --principal name=token (or --%s-principal): a victim and an attacker", name, len(ps), name)
		}
		return &audit.Endpoint{Name: name, URL: raw, Principals: ps, Budget: audit.NewBudget(*maxRequests)}, nil
	}
	d, err := endpoint("direct", *direct, onDirect)
	if err != nil {
		return err
	}
	w, err := endpoint("warden", *warden, onWarden)
	if err != nil {
		return err
	}
	rep, err := audit.Run(ctx, *protocol, attacks, d, w)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	rep.Direct, rep.Warden = *direct, *warden
	if *out != "" {
		if err := writeReports(rep, *out); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		fmt.Fprintf(stderr, "warden audit: wrote %s\n", strings.Join([]string{
			filepath.Join(*out, "audit.md"), filepath.Join(*out, "audit.json"), filepath.Join(*out, "audit.html")}, ", "))
	} else {
		write := map[string]func(io.Writer) error{"md": rep.WriteMarkdown, "json": rep.WriteJSON, "html": rep.WriteHTML}[*format]
		if err := write(stdout); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	for _, row := range rep.Rows {
		if row.Warden != nil && row.Warden.Result == audit.Succeeded {
			return errBreached
		}
	}
	return nil
}

// writeReports writes the report's three forms into dir.
func writeReports(rep audit.Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"audit.md": rep.WriteMarkdown, "audit.json": rep.WriteJSON, "audit.html": rep.WriteHTML,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

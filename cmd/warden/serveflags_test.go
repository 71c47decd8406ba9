package main

import (
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
)

var updateServeFlags = flag.Bool("update-serve-flags", false, "rewrite testdata/serve-flags.golden from what each serve flag changes")

// serveFlagsGolden lists, for every serve flag, the configuration keys
// setting it changes; it was first written from the hand-written overlay
// the flag table replaced, so a row moved to another key changes it.
const serveFlagsGolden = "testdata/serve-flags.golden"

// TestServeFlags: setting one serve flag on the command line changes
// exactly the configuration keys its row names (no other, none missing),
// and those are the keys the flag has always set (serve-flags.golden).
// A row naming the wrong key, a flag whose value lands on two keys where
// it should one, or an overlay writing a flag left unset fails here.
func TestServeFlags(t *testing.T) {
	var got strings.Builder
	for _, f := range serveFlags {
		t.Run(f.name, func(t *testing.T) {
			base, err := loadConfig("")
			if err != nil {
				t.Fatal(err)
			}
			c := base
			args := []string{"--" + f.name + "=" + sampleFlagValue(t, f)}
			overlayFlags(t, args, &c)
			changed := changedKeys(reflect.ValueOf(base), reflect.ValueOf(c), "")
			if want := strings.Fields(f.keys); !slices.Equal(changed, sortedCopy(want)) {
				t.Errorf("%v changed %v, the table names %v", args, changed, want)
			}
			got.WriteString("--" + f.name + " " + strings.Join(changed, " ") + "\n")
			unset := base
			overlayFlags(t, nil, &unset)
			if !reflect.DeepEqual(unset, base) {
				t.Errorf("no flag given changed the configuration")
			}
		})
	}
	if *updateServeFlags {
		if err := os.WriteFile(serveFlagsGolden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(serveFlagsGolden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("the serve flags set other keys than %s:\n%s", serveFlagsGolden, lineDiff(string(want), got.String()))
	}
}

// TestServeFlagsOverFile: a flag the command line sets wins over the
// file's value; one it does not set, or sets to its zero value, leaves it.
func TestServeFlagsOverFile(t *testing.T) {
	file := func() Config {
		c, err := loadConfig("")
		if err != nil {
			t.Fatal(err)
		}
		c.MACP.Listen = "file:1"
		c.Enforcer.DryRun = true
		c.Enforcer.PipelineDepth = 8
		c.Policies.Files = []string{"file.rego"}
		c.MCP.Limits.HeaderTimeout = time.Second
		return c
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(Config) bool
	}{
		{"string flag wins", []string{"--macp-listen=flag:2"}, func(c Config) bool { return c.MACP.Listen == "flag:2" }},
		{"empty string leaves the file", []string{"--macp-listen="}, func(c Config) bool { return c.MACP.Listen == "file:1" }},
		{"false leaves true", []string{"--dry-run=false"}, func(c Config) bool { return c.Enforcer.DryRun }},
		{"pipeline depth 0 counts", []string{"--pipeline-depth=0"}, func(c Config) bool { return c.Enforcer.PipelineDepth == 0 }},
		{"policy appends", []string{"--policy=a.rego", "--policy=b.rego"}, func(c Config) bool {
			return slices.Equal(c.Policies.Files, []string{"file.rego", "a.rego", "b.rego"})
		}},
		{"limit flag over a listener's own", []string{"--header-timeout=3s"}, func(c Config) bool {
			return c.MCP.Limits.HeaderTimeout == 3*time.Second && c.Limits.HeaderTimeout == 3*time.Second
		}},
		{"listener's own over top-level", nil, func(c Config) bool {
			return c.MCP.Limits.HeaderTimeout == time.Second && c.Limits.HeaderTimeout == 0
		}},
		{"auth list", []string{"--auth=jwt, mtls"}, func(c Config) bool { return reflect.DeepEqual(c.Authn.Mode, authn.Methods{"jwt", "mtls"}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := file()
			overlayFlags(t, tc.args, &c)
			if !tc.check(c) {
				t.Errorf("%v over the file gave %+v", tc.args, c)
			}
		})
	}
}

// overlayFlags parses args as serve does and applies them to c.
func overlayFlags(t *testing.T, args []string, c *Config) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o := registerServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o.parsed(fs)
	o.apply(c)
}

// sampleFlagValue is a value for f unlike every default.
func sampleFlagValue(t *testing.T, f serveFlag) string {
	t.Helper()
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	registerServeFlags(fl)
	switch v := fl.Lookup(f.name).Value.(type) {
	case interface{ IsBoolFlag() bool }:
		return "true"
	case flag.Getter:
		switch v.Get().(type) {
		case time.Duration:
			return "7s"
		case int, int64:
			return "7"
		}
		return "sample"
	}
	return "7" // a Func or repeatable flag: 7 reads as a number and as a string
}

// changedKeys lists, sorted, the YAML paths of the leaves where a and b
// differ; it descends structs, a duration or a slice is one leaf.
func changedKeys(a, b reflect.Value, prefix string) []string {
	if a.Kind() != reflect.Struct || a.Type() == reflect.TypeOf(time.Duration(0)) {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return nil
		}
		return []string{prefix}
	}
	var keys []string
	for i := range a.NumField() {
		f := a.Type().Field(i)
		if !f.IsExported() || f.Tag.Get("yaml") == "-" {
			continue
		}
		key := prefix
		if !strings.Contains(f.Tag.Get("yaml"), ",inline") && !(f.Anonymous && f.Tag.Get("yaml") == "") {
			key = strings.TrimPrefix(prefix+"."+yamlName(f), ".")
		}
		keys = append(keys, changedKeys(a.Field(i), b.Field(i), key)...)
	}
	slices.Sort(keys)
	return keys
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// lineDiff lists the lines only one of want and got has.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

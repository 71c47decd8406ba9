package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/decisionlog"
	"github.com/agentwarden/warden/gc"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a"
	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp"
	"github.com/agentwarden/warden/proxy/mcp"
	"github.com/agentwarden/warden/proxy/state"
)

// Config is the whole configuration file. Every section has defaults, so an
// empty file (or none) is a valid configuration.
type Config struct {
	Authn    authn.Config    `yaml:"authn"`
	Policies policies.Config `yaml:"policies"`
	Enforcer proxy.Config    `yaml:"enforcer"`
	MACP     macp.Config     `yaml:"macp"`
	MCP      mcp.Config      `yaml:"mcp"`
	A2A      a2a.Config      `yaml:"a2a"`
	ExtAuthz extauthz.Config `yaml:"extauthz"`
	// State shares the MCP task table, and for ext_authz the MACP
	// sessions, between replicas through Redis; without a URL each replica
	// keeps its own.
	State state.Config `yaml:"state"`
	// Limits bounds every listener's connections and the reconnects
	// upstream; a listener's own limits (macp.limits, ...) override it key
	// by key.
	Limits listener.Limits `yaml:"limits"`
	Log    LogConfig       `yaml:"log"`
	// DecisionLog writes one OPA-shaped record per decision.
	DecisionLog decisionlog.Config `yaml:"decision_log"`
	Admin       AdminConfig        `yaml:"admin"`
	// Tracing sends OpenTelemetry traces; without otlp_endpoint the
	// standard OTEL_* variables configure it (docs/operations.md, Traces).
	Tracing TracingConfig `yaml:"tracing"`
	// GC puts a floor under the collector's heap goal (see package gc).
	GC gc.Config `yaml:"gc"`
}

// TracingConfig sends OpenTelemetry traces to an OTLP/gRPC collector.
type TracingConfig struct {
	OTLPEndpoint string  `yaml:"otlp_endpoint"` // host:port of an OTLP/gRPC collector; empty: OTEL_EXPORTER_OTLP_ENDPOINT, else off
	Insecure     bool    `yaml:"insecure"`      // plaintext to the collector; default on for loopback endpoints
	SampleRatio  float64 `yaml:"sample_ratio"`  // of new traces, parent-based; 0: OTEL_TRACES_SAMPLER when set, else 1 (every call)
}

// AdminConfig places the admin port.
type AdminConfig struct {
	Listen string `yaml:"listen"` // host:port; empty turns it off
	// Pprof serves the Go profiler under /debug/pprof/ on the admin port;
	// off by default: whoever reaches the port could run CPU profiles and
	// execution traces of the process for as long as they ask, and force
	// collections (heap?gc=1).
	Pprof bool `yaml:"pprof"`
}

// LogConfig selects the log level.
type LogConfig struct {
	Level string `yaml:"level"` // debug, info (default), warn, error
}

// Validate checks every section of the file; serveValidate adds what serve
// needs once the flags are applied.
func (c Config) Validate() error {
	var errs []error
	if err := c.Authn.Validate(); err != nil && len(c.Authn.Mode) > 0 {
		errs = append(errs, fmt.Errorf("authn: %w", err))
	}
	if err := c.Policies.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Enforcer.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("enforcer: %w", err))
	}
	if err := c.MCP.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.A2A.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.State.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.GC.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := newLogger(io.Discard, c.Log.Level); err != nil {
		errs = append(errs, fmt.Errorf("log.level: %w", err))
	}
	if c.Admin.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Admin.Listen); err != nil {
			errs = append(errs, fmt.Errorf("admin.listen: %w", err))
		}
	}
	if c.Tracing.OTLPEndpoint != "" {
		if _, _, err := net.SplitHostPort(c.Tracing.OTLPEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("tracing.otlp_endpoint: %w", err))
		}
	}
	if c.Tracing.SampleRatio < 0 || c.Tracing.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("tracing.sample_ratio: %v is not between 0 and 1", c.Tracing.SampleRatio))
	}
	for _, l := range []struct {
		key string
		v   listener.Limits
	}{{"limits", c.Limits}, {"macp.limits", c.MACP.Limits}, {"extauthz.limits", c.ExtAuthz.Limits}} {
		if err := l.v.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.key, err))
		}
	}
	return errors.Join(errs...)
}

// inheritLimits gives each listener the top-level limits where its own leave
// a key unset, and over both the limits given as flags.
func (c *Config) inheritLimits(flags listener.Limits) {
	c.MACP.Limits = flags.Inherit(c.MACP.Limits.Inherit(c.Limits))
	c.MCP.Limits = flags.Inherit(c.MCP.Limits.Inherit(c.Limits))
	c.A2A.Limits = flags.Inherit(c.A2A.Limits.Inherit(c.Limits))
	c.ExtAuthz.Limits = flags.Inherit(c.ExtAuthz.Limits.Inherit(c.Limits))
	c.Limits = flags.Inherit(c.Limits)
}

// loadConfig decodes path strictly: an unknown key is an error naming it.
// Keys whose default is not their zero value are set before decoding.
func loadConfig(path string) (Config, error) {
	var cfg Config
	cfg.Enforcer.PipelineDepth = proxy.DefaultPipelineDepth
	cfg.Enforcer.MACPMaxPayloadBytes = proxy.DefaultMACPMaxPayloadBytes
	cfg.Enforcer.MACPMessageLimitPerMinute = proxy.DefaultMACPMessageLimitPerMinute
	cfg.Enforcer.MACPSessionStartLimitPerMinute = proxy.DefaultMACPSessionStartLimitPerMinute
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	resolvePaths(reflect.ValueOf(&cfg).Elem(), filepath.Dir(path))
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// resolvePaths makes every relative file path in v relative to dir, the
// configuration file's directory (Prometheus' convention), so that a file
// and what it names can be moved together and checked from anywhere. A
// file path is a string field whose YAML key ends in "_file" (or a []string
// whose key is "files" or ends in "_files", or the values of a map whose
// key ends in "_files"), and decision_log.path; "-"
// (standard output) and "" stay as they are. Flags are not touched: a path
// given on the command line is relative to the working directory.
func resolvePaths(v reflect.Value, dir string) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case fv.Kind() == reflect.Struct:
			resolvePaths(fv, dir)
		case fv.Kind() == reflect.Pointer && fv.Type().Elem().Kind() == reflect.Struct && !fv.IsNil():
			resolvePaths(fv.Elem(), dir)
		case fv.Kind() == reflect.String && (strings.HasSuffix(key, "_file") || t == reflect.TypeFor[decisionlog.Config]() && key == "path"):
			fv.SetString(resolvePath(fv.String(), dir))
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String && (key == "files" || strings.HasSuffix(key, "_files")):
			for j := range fv.Len() {
				fv.Index(j).SetString(resolvePath(fv.Index(j).String(), dir))
			}
		case fv.Kind() == reflect.Map && fv.Type().Elem().Kind() == reflect.String && strings.HasSuffix(key, "_files"):
			for _, k := range fv.MapKeys() {
				fv.SetMapIndex(k, reflect.ValueOf(resolvePath(fv.MapIndex(k).String(), dir)))
			}
		}
	}
}

func resolvePath(p, dir string) string {
	if p == "" || p == "-" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Package report turns the benchmark's measurements into figures, checks
// them against DESIGN.md §12's targets, and writes them out: the terminal
// table, its markdown copy, the JSON record and the latency chart.
package report

import (
	"fmt"
	"math"
)

// Op compares a figure with its target.
type Op string

// The comparisons a target uses.
const (
	AtMost  Op = "<="
	AtLeast Op = ">="
)

// Target is a bound a figure must respect (DESIGN.md §12).
type Target struct {
	Op    Op      `json:"op"`
	Limit float64 `json:"limit"`
	// Basis says how a limit relative to a baseline was derived
	// ("nginx + 25 µs"); empty for an absolute one.
	Basis string `json:"basis,omitempty"`
	// Kind is what the target bounds (KindCPU, ...), for the summary of
	// targets; empty in records before 2026-11-28.
	Kind string `json:"kind,omitempty"`
	// Of is the side a relative limit derives from, Ref that side's value
	// in the same run.
	Of  string  `json:"of,omitempty"`
	Ref float64 `json:"ref,omitempty"`
}

// The kinds of targets, in the order the summary lists them.
const (
	KindCPU        = "CPU per message"
	KindP50        = "added p50"
	KindP99        = "added p99"
	KindSaturation = "saturation"
)

// Kinds are the kinds in summary order.
var Kinds = []string{KindCPU, KindP50, KindP99, KindSaturation}

// Met reports whether v respects the target.
func (t Target) Met(v float64) bool {
	switch t.Op {
	case AtMost:
		return v <= t.Limit
	case AtLeast:
		return v >= t.Limit
	}
	return false
}

// Figure is one line of the table.
type Figure struct {
	// Group is the scenario or section the figure belongs to.
	Group string `json:"group"`
	// Name says what was measured.
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Unit is one of the units Format knows: "µs", "ratio", "msg/s",
	// "B/session", "MiB", "% core".
	Unit string `json:"unit"`
	// Target is nil for an informative figure.
	Target *Target `json:"target,omitempty"`
	// NotRun, when set, says why the figure could not be measured.
	NotRun string `json:"not_run,omitempty"`
	// Note qualifies the figure (how it was measured, a caveat).
	Note string `json:"note,omitempty"`
	// Baselines are the same figure for the other sides measured beside
	// Warden (WardenGRPC, NullGRPC, NullFrames, NullHTTP, Nginx), for the
	// table's side-by-side columns.
	Baselines []Baseline `json:"baselines,omitempty"`
}

// Baseline is one figure of a hop other than Warden.
type Baseline struct {
	Side  string  `json:"side"`
	Value float64 `json:"value"`
}

// The sides the table shows, by name: Warden as it ships (its default
// front doors: for MACP the HTTP/2 frame relay), Warden on the grpc-go MACP
// door (the oracle the tests compare the relay with; -warden-grpc), the null
// hops (bench/cmd/null: what a Go library costs before Warden's own work)
// and nginx. Records before 2026-11-28 used other names (see LegacyColumns).
const (
	Warden     = "Warden"
	WardenGRPC = "Warden grpc-go door (oracle)"
	NullGRPC   = "null grpc-go hop"
	NullFrames = "null frame relay hop"
	NullHTTP   = "null net/http hop"
	Nginx      = "nginx"
)

// sideOrder is the order of the table's columns after Warden's; sides it
// does not know (older records) follow in the order they appear.
var sideOrder = []string{WardenGRPC, NullGRPC, NullFrames, NullHTTP, Nginx}

// Column says what one side of the table is, for the legend: records keep
// it so that a column reads the same in every record.
type Column struct {
	Side string `json:"side"`
	Is   string `json:"is"`
}

// LegacyColumns are the columns of records written before they carried
// their own (2026-11-28): the Warden column was the grpc-go MACP door.
var LegacyColumns = []Column{
	{Warden, "bin/warden; for MACP the grpc-go front door (--transport grpc, the default until 2026-11-27), for MCP and A2A net/http"},
	{"Warden relay", "bin/warden --transport relay: the MACP HTTP/2 frame relay front door"},
	{"null Go", "bench/cmd/null: a null grpc-go hop (MACP) or a null net/http httputil.ReverseProxy (MCP, A2A)"},
	{"null relay", "bench/cmd/null -relay: a null HTTP/2 frame relay (proxy/frames)"},
	{Nginx, "nginx, one process: grpc_pass (MACP) or proxy_pass (MCP, A2A)"},
}

// Baseline returns the figure's value for a side, and false when that side
// was not measured.
func (f Figure) Baseline(side string) (float64, bool) {
	for _, b := range f.Baselines {
		if b.Side == side {
			return b.Value, true
		}
	}
	return 0, false
}

// BaselineText prints the figure's value for a side, or "-".
func (f Figure) BaselineText(side string) string {
	if v, ok := f.Baseline(side); ok {
		return Format(v, f.Unit)
	}
	return "-"
}

// Verdict is what the table prints in its last column.
type Verdict string

// The verdicts.
const (
	Met         Verdict = "yes"
	Missed      Verdict = "NO"
	NoTarget    Verdict = "-"
	NotMeasured Verdict = "not run"
)

// Verdict compares the figure with its target.
func (f Figure) Verdict() Verdict {
	switch {
	case f.NotRun != "":
		return NotMeasured
	case f.Target == nil:
		return NoTarget
	case math.IsNaN(f.Value):
		return Missed
	case f.Target.Met(f.Value):
		return Met
	default:
		return Missed
	}
}

// DESIGN.md §12's absolute targets.
var (
	// EnforceMedian bounds the in-process decision, per message.
	EnforceMedian = &Target{Op: AtMost, Limit: 10}
	// SessionBytes bounds the memory of one tracked session.
	SessionBytes = &Target{Op: AtMost, Limit: 1024}
)

// The targets relative to another side, each built from that side's figure
// in the same run: DESIGN.md §12's, and issue 28's for the HTTP sidecars'
// CPU (against the null net/http hop, the floor of the library they stand
// on).

// AddedP50 bounds the sidecar's added median latency at a fixed rate.
func AddedP50(nginx float64) *Target {
	return &Target{Op: AtMost, Limit: nginx + 25, Basis: "nginx + 25 µs", Kind: KindP50, Of: Nginx, Ref: nginx}
}

// AddedP99 bounds the sidecar's added 99th-percentile latency at a fixed rate.
func AddedP99(nginx float64) *Target {
	return &Target{Op: AtMost, Limit: nginx + 150, Basis: "nginx + 150 µs", Kind: KindP99, Of: Nginx, Ref: nginx}
}

// CPUPer1000 bounds the MACP sidecar's CPU per 1,000 messages a second.
func CPUPer1000(nginx float64) *Target {
	return &Target{Op: AtMost, Limit: 1.25 * nginx, Basis: "1.25 × nginx", Kind: KindCPU, Of: Nginx, Ref: nginx}
}

// CPUPerNullHTTP bounds an HTTP sidecar's (MCP, A2A) CPU per 1,000 requests
// a second by the null net/http hop's.
func CPUPerNullHTTP(null float64) *Target {
	return &Target{Op: AtMost, Limit: 1.1 * null, Basis: "1.1 × " + NullHTTP, Kind: KindCPU, Of: NullHTTP, Ref: null}
}

// ThroughputRatio bounds the sidecar's throughput relative to direct at
// saturation with many sessions.
func ThroughputRatio(nginx float64) *Target {
	return &Target{Op: AtLeast, Limit: nginx, Basis: "nginx's", Kind: KindSaturation, Of: Nginx, Ref: nginx}
}

// HotSessionRatio bounds the same ratio on one hot session.
func HotSessionRatio(nginx float64) *Target {
	return &Target{Op: AtLeast, Limit: 0.8 * nginx, Basis: "0.8 × nginx", Kind: KindSaturation, Of: Nginx, Ref: nginx}
}

// Format prints a value in its unit.
func Format(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	switch unit {
	case "ratio":
		return fmt.Sprintf("%.2f", v)
	case "µs":
		if math.Abs(v) < 10 {
			return fmt.Sprintf("%.1f µs", v)
		}
		return fmt.Sprintf("%.0f µs", v)
	case "msg/s":
		return fmt.Sprintf("%.0f msg/s", v)
	case "B/session":
		return fmt.Sprintf("%.0f B/session", v)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case "% core":
		return fmt.Sprintf("%.1f%% of a core", v)
	default:
		return fmt.Sprintf("%.3g %s", v, unit)
	}
}

// TargetText prints the figure's target, or "-".
func (f Figure) TargetText() string {
	if f.Target == nil {
		return "-"
	}
	op := "≤"
	if f.Target.Op == AtLeast {
		op = "≥"
	}
	t := op + " " + Format(f.Target.Limit, f.Unit)
	if f.Target.Basis != "" {
		t += " (" + f.Target.Basis + ")"
	}
	return t
}

// ValueText prints the figure's value, or why it is missing.
func (f Figure) ValueText() string {
	if f.NotRun != "" {
		return "not run: " + f.NotRun
	}
	return Format(f.Value, f.Unit)
}

// MissedFigures lists the figures that have a target and miss it.
func MissedFigures(figs []Figure) []Figure {
	var out []Figure
	for _, f := range figs {
		if f.Verdict() == Missed {
			out = append(out, f)
		}
	}
	return out
}

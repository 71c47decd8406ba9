package report

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Micro holds `go test -bench` results: every value of every metric of every
// benchmark, across -count repetitions.
type Micro map[string]map[string][]float64

// procsSuffix is the -GOMAXPROCS suffix go test appends to a benchmark name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// ParseMicro reads `go test -bench` output; lines that are not benchmark
// results are skipped.
func ParseMicro(r io.Reader) (Micro, error) {
	m := Micro{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not "name iterations value unit ..."
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			if m[name] == nil {
				m[name] = map[string][]float64{}
			}
			m[name][f[i+1]] = append(m[name][f[i+1]], v)
		}
	}
	return m, sc.Err()
}

// Median is the median of a benchmark's metric, and false when it was not
// measured.
func (m Micro) Median(name, unit string) (float64, bool) {
	return median(m[name][unit])
}

// Names lists the benchmarks whose name starts with prefix, sorted.
func (m Micro) Names(prefix string) []string {
	var out []string
	for n := range m {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func median(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// MicroFigures picks the micro-benchmark figures the table shows: the
// Enforce medians (the representative TaskUpdate and the slowest message),
// ext_authz's Check, allocations and CPU per message through the sidecars,
// and the heap per tracked session.
func MicroFigures(m Micro) []Figure {
	const group = "micro (in process)"
	var figs []Figure
	us := func(name string) (float64, bool) {
		v, ok := m.Median(name, "ns/op")
		return v / 1e3, ok
	}
	if v, ok := us("BenchmarkEnforce/task/TaskUpdate/allow"); ok {
		figs = append(figs, Figure{Group: group, Name: "Enforce median, TaskUpdate allowed", Value: v, Unit: "µs", Target: EnforceMedian})
	}
	slowest, worst := "", 0.0
	names := m.Names("BenchmarkEnforce/")
	for _, n := range names {
		if v, ok := us(n); ok && v > worst {
			slowest, worst = n, v
		}
	}
	if slowest != "" {
		figs = append(figs, Figure{Group: group, Name: fmt.Sprintf("Enforce median, slowest of %d messages (%s)", len(names), strings.TrimPrefix(slowest, "BenchmarkEnforce/")),
			Value: worst, Unit: "µs", Target: EnforceMedian})
	}
	for _, n := range m.Names("BenchmarkCheck/") {
		if v, ok := us(n); ok {
			figs = append(figs, Figure{Group: group, Name: "ext_authz Check median, " + strings.TrimPrefix(n, "BenchmarkCheck/"), Value: v, Unit: "µs"})
		}
	}
	// Whole messages through a sidecar in one process (a real client, Warden,
	// a lean upstream): every allocation and CPU nanosecond of the three.
	sidecars := append(m.Names("BenchmarkSidecarSend"), m.Names("BenchmarkSidecar/")...)
	sidecars = append(sidecars, m.Names("BenchmarkA2ASidecar/")...)
	for _, n := range sidecars {
		var what string
		switch rest, mcp := strings.CutPrefix(n, "BenchmarkSidecar/"); {
		case mcp:
			what = "MCP " + rest
		case strings.HasPrefix(n, "BenchmarkA2ASidecar/"):
			what = "A2A " + strings.TrimPrefix(n, "BenchmarkA2ASidecar/")
		case n == "BenchmarkSidecarSendRelay":
			what = "MACP Send" // the relay: the MACP front door as it ships
		case n == "BenchmarkSidecarSend":
			what = "MACP Send, grpc-go door (the test oracle)"
		default:
			continue // BenchmarkSidecarSendParallel
		}
		if v, ok := m.Median(n, "allocs/op"); ok {
			figs = append(figs, Figure{Group: group, Name: "allocations per message through the sidecar, " + what, Value: v, Unit: "allocs/op",
				Note: n + ": client, Warden and upstream in one process"})
		}
		if v, ok := m.Median(n, "cpu-ns/op"); ok {
			figs = append(figs, Figure{Group: group, Name: "CPU per message through the sidecar, " + what, Value: v / 1e3, Unit: "µs",
				Note: n + ": client, Warden and upstream in one process"})
		}
	}
	if v, ok := m.Median("BenchmarkSessionMemory", "B/session"); ok {
		figs = append(figs, Figure{Group: group, Name: "heap per tracked task session", Value: v, Unit: "B/session", Target: SessionBytes,
			Note: "BenchmarkSessionMemory: Go heap after GC per session (SessionStart, TaskRequest, TaskAccept, 3 TaskUpdates), 10,000 sessions in process"})
	}
	if len(figs) == 0 {
		figs = append(figs, Figure{Group: group, Name: "micro-benchmarks", NotRun: "no results in the micro output"})
	}
	return figs
}

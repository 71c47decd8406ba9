package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentwarden/warden/bench/report"
)

// record is everything one run measured, as written to <date>.json.
type record struct {
	Date        string            `json:"date"`
	Quick       bool              `json:"quick"`
	Machine     machine           `json:"machine"`
	Timing      timingRecord      `json:"timing"`
	WallSeconds float64           `json:"wall_seconds"`
	Figures     []report.Figure   `json:"figures"`
	Runs        []runRecord       `json:"runs"`
	Memory      []memoryPoint     `json:"memory,omitempty"`
	Micro       map[string]string `json:"micro_medians,omitempty"`
	NotRun      []string          `json:"not_run,omitempty"`
	// name is the files' name a measuring run chose (record.unused); a
	// rendered record's is its day's.
	name string
	// Columns say what each side is (absent before 2026-11-28: the Warden
	// column was then the grpc-go MACP door, see report.LegacyColumns).
	Columns []report.Column `json:"columns,omitempty"`
	// Profiles are Warden's CPU profiles, one per scenario at its measured
	// rate, summarized, each with the null hop's beside it (Baseline) where
	// the scenario has one; the files are in <date>-profiles/.
	Profiles []report.Profile `json:"profiles,omitempty"`
}

// timingRecord is how long each run lasted.
type timingRecord struct {
	Warmup  string `json:"warmup_per_run"`
	Measure string `json:"measured_per_run"`
	Rounds  int    `json:"rounds_per_side_and_load"`
	// Profile is how the CPU profiles were taken ("" : none).
	Profile string `json:"profile,omitempty"`
}

// readMicro reads the micro-benchmark output: the table's micro figures and
// every benchmark's medians for the record.
func readMicro(path string) ([]report.Figure, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("micro results: %w", err)
	}
	defer f.Close()
	m, err := report.ParseMicro(f)
	if err != nil {
		return nil, nil, fmt.Errorf("micro results %s: %w", path, err)
	}
	medians := map[string]string{}
	for _, name := range m.Names("") {
		var parts []string
		for _, unit := range []string{"ns/op", "B/op", "allocs/op", "B/session"} {
			if v, ok := m.Median(name, unit); ok {
				parts = append(parts, fmt.Sprintf("%g %s", v, unit))
			}
		}
		medians[name] = strings.Join(parts, ", ")
	}
	return report.MicroFigures(m), medians, nil
}

// heading says what the table is: when, where, how the cores were shared.
func (r record) heading() string {
	kind := "full run (`make bench`)"
	if r.Quick {
		kind = "quick run (`make bench QUICK=1`: fewer and shorter runs, 10,000 sessions only)"
	}
	h := fmt.Sprintf("%s, %s; %s, %d cores, %s; GOMAXPROCS: generator %s, Warden %s, runtime %s; each run %s warm-up + %s measured, %d round(s) per side, alternating which side goes first; %.0f s wall",
		r.Date, kind, r.Machine.CPU, r.Machine.Cores, r.Machine.Go, r.Machine.GOMAXPROCS["generator"], r.Machine.GOMAXPROCS["warden"],
		r.Machine.GOMAXPROCS["macp-runtime (Rust)"], r.Timing.Warmup, r.Timing.Measure, r.Timing.Rounds, r.WallSeconds)
	if r.Columns != nil {
		h += fmt.Sprintf("; beside Warden, in the same rounds, the hops the columns below name (the null hops at GOMAXPROCS %s)", r.Machine.GOMAXPROCS["null hops"])
	} else if r.Machine.Nginx != "" {
		h += fmt.Sprintf("; beside Warden: for MACP Warden on the frame relay front door (--transport relay), a null Go pass-through (bench/cmd/null, GOMAXPROCS %[1]s), for MACP a null HTTP/2 frame relay (bench/cmd/null -relay: proxy/frames, GOMAXPROCS %[1]s) and %[2]s (one process, master_process off), each in the same rounds", r.Machine.GOMAXPROCS["warden"], r.Machine.Nginx)
	}
	if r.Timing.Profile != "" {
		h += "; Warden's CPU profile per scenario at its measured rate, " + r.Timing.Profile
	}
	if mean, most := r.otherCPU(); most > 0 {
		h += fmt.Sprintf("; other work shared the machine: %.2f cores on average during the runs, %.2f at most (/proc/stat minus the benchmark's processes)", mean, most)
	}
	return h
}

// otherCPU is the CPU other work used during the runs, in cores: the mean
// over the runs and the largest.
func (r record) otherCPU() (mean, most float64) {
	for _, run := range r.Runs {
		o := run.CPU["other"]
		mean += o
		most = max(most, o)
	}
	if len(r.Runs) > 0 {
		mean /= float64(len(r.Runs))
	}
	return mean, most
}

// write prints the table and writes the JSON record, the markdown table and
// the chart. A quick run writes latest-quick.* so that it never replaces
// the full run's latest.*.
func (r record) write(dir string) error {
	stem, latest := r.stem(), "latest"
	if r.Quick {
		latest = "latest-quick"
	}
	rep := report.Report{Figures: r.Figures, Columns: r.Columns, Profiles: r.Profiles}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, stem+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "# Warden end-to-end benchmark\n\n%s\n\n", r.heading())
	if err := rep.WriteMarkdown(&md); err != nil {
		return err
	}
	fmt.Fprintf(&md, "\n![latency, direct versus through Warden](%s.png)\n", latest)
	if err := os.WriteFile(filepath.Join(dir, latest+".md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	if panels := chartPanels(r.Runs); len(panels) > 0 {
		for _, name := range []string{stem, latest} {
			if err := report.WriteChart(filepath.Join(dir, name+".png"), panels); err != nil {
				return err
			}
		}
	}
	fmt.Println()
	fmt.Println(r.heading())
	if err := rep.WriteText(os.Stdout); err != nil {
		return err
	}
	if missed := report.MissedFigures(r.Figures); len(missed) > 0 {
		fmt.Printf("\ntargets missed: %d\n", len(missed))
		for _, f := range missed {
			fmt.Printf("  %s: %s (target %s)\n", f.Group, f.ValueText(), f.TargetText())
		}
	}
	for _, f := range r.Figures {
		if f.Note != "" {
			fmt.Printf("note (%s, %s): %s\n", f.Group, f.Name, f.Note)
		}
	}
	fmt.Printf("\nwrote %s, %s and %s\n", filepath.Join(dir, stem+".json"), filepath.Join(dir, latest+".md"), filepath.Join(dir, latest+".png"))
	return nil
}

// stem is the name of the record's files: its day, "-quick" for a quick
// run, or the name a measuring run chose (unused).
func (r record) stem() string {
	if r.name != "" {
		return r.name
	}
	day, _ := time.Parse(time.RFC3339, r.Date)
	if r.Quick {
		return day.Format("2006-01-02") + "-quick"
	}
	return day.Format("2006-01-02")
}

// readRecord reads a JSON record written by an earlier run.
func readRecord(path string) (record, error) {
	var r record
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// chartPanels picks, for every scenario, its middle fixed rate and draws
// both sides' latency distributions there.
func chartPanels(runs []runRecord) []report.Panel {
	var order []string
	rates := map[string][]float64{}
	for _, r := range runs {
		if r.Rate <= 0 {
			continue
		}
		if _, ok := rates[r.Scenario]; !ok {
			order = append(order, r.Scenario)
		}
		if !slices.Contains(rates[r.Scenario], r.Rate) {
			rates[r.Scenario] = append(rates[r.Scenario], r.Rate)
		}
	}
	var panels []report.Panel
	for _, sc := range order {
		rs := rates[sc]
		slices.Sort(rs)
		rate := rs[len(rs)/2]
		p := report.Panel{}
		for _, r := range runs {
			if r.Scenario == sc && r.Rate == rate {
				p.Title = sc + ", " + r.Load
				p.Series = append(p.Series, report.Series{Name: r.Side, Points: r.Summary.Curve})
			}
		}
		panels = append(panels, p)
	}
	return panels
}

// unused names a measuring run's files: its stem, or when a record of that
// day is already in dir, the stem and the run's start time (-1504), so that
// a second run on one day never overwrites the first one's record.
func (r record) unused(dir string) string {
	stem := r.stem()
	if _, err := os.Stat(filepath.Join(dir, stem+".json")); err != nil {
		return stem
	}
	at, _ := time.Parse(time.RFC3339, r.Date)
	return stem + at.Format("-1504")
}

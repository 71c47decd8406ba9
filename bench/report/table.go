package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is what the table shows: the figures, what each column is, and
// the profiles of where Warden's time goes, each beside its scenario.
type Report struct {
	Figures []Figure
	// Columns say what each side is (the legend); nil: LegacyColumns.
	Columns  []Column
	Profiles []Profile
}

// section is one scenario's figures and the sides they were measured on.
type section struct {
	group   string
	figs    []Figure
	sides   []string // after Warden's, in column order
	profile *Profile
}

// sections groups the figures by scenario, in the order they come.
func (r Report) sections() []section {
	var out []section
	for _, f := range r.Figures {
		if len(out) == 0 || out[len(out)-1].group != f.Group {
			out = append(out, section{group: f.Group})
		}
		s := &out[len(out)-1]
		s.figs = append(s.figs, f)
		for _, b := range f.Baselines {
			if !slices.Contains(s.sides, b.Side) {
				s.sides = append(s.sides, b.Side)
			}
		}
	}
	for i := range out {
		s := &out[i]
		// the known sides in their order, then the others, nginx last
		rank := func(side string) int {
			switch k := slices.Index(sideOrder, side); {
			case side == Nginx:
				return 1 << 20
			case k >= 0:
				return k
			}
			return len(sideOrder) + slices.Index(s.sides, side)
		}
		s.sides = slices.Clone(s.sides)
		slices.SortStableFunc(s.sides, func(a, b string) int { return rank(a) - rank(b) })
		for j := range r.Profiles {
			if r.Profiles[j].Group == s.group {
				s.profile = &r.Profiles[j]
			}
		}
	}
	return out
}

// columns are the legend's entries for the sides the figures use.
func (r Report) columns() []Column {
	cols := r.Columns
	if cols == nil {
		cols = LegacyColumns
	}
	used := map[string]bool{Warden: true}
	for _, f := range r.Figures {
		for _, b := range f.Baselines {
			used[b.Side] = true
		}
	}
	var out []Column
	for _, c := range cols {
		if used[c.Side] {
			out = append(out, c)
		}
	}
	return out
}

// WriteText prints the figures as aligned tables, one per scenario with the
// columns it has, each followed by its profile's layers; then what each
// column is and the summary of targets.
func (r Report) WriteText(w io.Writer) error {
	for _, s := range r.sections() {
		fmt.Fprintf(w, "\n%s\n", strings.ToUpper(s.group))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  figure\t%s\ttarget\tmet\t\n", strings.Join(append([]string{Warden}, s.sides...), "\t"))
		for _, f := range s.figs {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", f.Name, strings.Join(append([]string{f.ValueText()}, f.baselineTexts(s.sides)...), "\t"), f.TargetText(), f.Verdict())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if p := s.profile; p != nil {
			fmt.Fprintf(w, "  where the time goes (%s: %s): %s\n", p.Side, p.describe(), p.layersText())
			if n := p.Baseline; n != nil {
				fmt.Fprintf(w, "  the same for the %s (%s): %s\n", n.Side, n.describe(), n.layersText())
				if extra := p.extraText(); extra != "" {
					fmt.Fprintf(w, "  extra over the %s by layer, core per 1,000/s: %s\n", n.Side, extra)
				}
			}
		}
	}
	fmt.Fprintln(w)
	for _, c := range r.columns() {
		fmt.Fprintf(w, "%s: %s\n", c.Side, c.Is)
	}
	if rows := r.targetRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\ntargets\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  scenario\t%s\t\n", strings.Join(rows[0].kinds, "\t"))
		for _, row := range rows {
			fmt.Fprintf(tw, "  %s\t%s\t\n", row.group, strings.Join(row.cells, "\t"))
		}
		return tw.Flush()
	}
	return nil
}

// WriteMarkdown prints what each column is, the summary of targets, then a
// section per scenario: its table (with the columns it has), the notes of
// its figures, and where Warden's time went in its profile.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("Columns:\n\n")
	for _, c := range r.columns() {
		fmt.Fprintf(&b, "- **%s**: %s\n", c.Side, c.Is)
	}
	if rows := r.targetRows(); len(rows) > 0 {
		b.WriteString("\n## Targets\n\nEach built from the other side's figure in the same run; the tables below have every figure.\n\n")
		fmt.Fprintf(&b, "| scenario | %s |\n|---|%s\n", strings.Join(rows[0].kinds, " | "), strings.Repeat("---|", len(rows[0].kinds)))
		for _, row := range rows {
			cells := make([]string, len(row.cells))
			for i, c := range row.cells {
				cells[i] = cell(c)
			}
			fmt.Fprintf(&b, "| %s | %s |\n", cell(row.group), strings.Join(cells, " | "))
		}
	}
	notes := 0
	for _, s := range r.sections() {
		fmt.Fprintf(&b, "\n## %s\n\n", s.group)
		cols := append([]string{Warden}, s.sides...)
		fmt.Fprintf(&b, "| figure | %s | target | met |\n|---|%s---|---|\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		var sn []string
		for _, f := range s.figs {
			name := f.Name
			if f.Note != "" {
				notes++
				sn = append(sn, fmt.Sprintf("%d. %s", notes, f.Note))
				name += fmt.Sprintf(" [%d]", notes)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(name), strings.Join(append([]string{cell(f.ValueText())}, f.baselineTexts(s.sides)...), " | "),
				cell(f.TargetText()), f.Verdict())
		}
		if len(sn) > 0 {
			// an ordered list starting at its first number
			fmt.Fprintf(&b, "\n%s\n", strings.Join(sn, "\n"))
		}
		if s.profile != nil {
			s.profile.markdown(&b)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// baselineTexts are the figure's values for the sides' columns (numbers or
// "-": nothing a markdown cell must escape).
func (f Figure) baselineTexts(sides []string) []string {
	out := make([]string, len(sides))
	for i, side := range sides {
		out[i] = f.BaselineText(side)
	}
	return out
}

// cell escapes a markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// targetRow is one scenario's line of the summary of targets.
type targetRow struct {
	group string
	kinds []string // the summary's columns, the same on every row
	cells []string
}

// targetRows summarize, per scenario, every kind of target: met or missed
// and by how much, the worst of its rates for latency.
func (r Report) targetRows() []targetRow {
	var kinds []string
	type key struct{ group, kind string }
	by := map[key][]Figure{}
	var groups []string
	for _, f := range r.Figures {
		kind := f.Target.kind()
		if kind == "" || f.NotRun != "" {
			continue
		}
		k := key{f.Group, kind}
		if !slices.Contains(groups, f.Group) {
			groups = append(groups, f.Group)
		}
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
		by[k] = append(by[k], f)
	}
	slices.SortStableFunc(kinds, func(a, b string) int { return slices.Index(Kinds, a) - slices.Index(Kinds, b) })
	var rows []targetRow
	for _, g := range groups {
		row := targetRow{group: g, kinds: kinds}
		for _, k := range kinds {
			row.cells = append(row.cells, summarize(by[key{g, k}]))
		}
		rows = append(rows, row)
	}
	return rows
}

// kind is the target's Kind, read from its Basis in records written
// before targets had one; "" for none.
func (t *Target) kind() string {
	switch {
	case t == nil:
		return ""
	case t.Kind != "":
		return t.Kind
	}
	return map[string]string{"nginx + 25 µs": KindP50, "nginx + 150 µs": KindP99, "1.25 × nginx": KindCPU,
		"nginx's": KindSaturation, "0.8 × nginx": KindSaturation}[t.Basis]
}

// summarize is one cell of the summary of targets: the verdict with the
// value against its limit, or for several figures (one per rate) how many
// met and the one furthest past its limit.
func summarize(figs []Figure) string {
	switch len(figs) {
	case 0:
		return "-"
	case 1:
		f := figs[0]
		t := f.Target
		v := f.ValueText()
		if t.kind() == KindCPU && t.Ref > 0 {
			v = fmt.Sprintf("%s (%.2f × %s)", v, f.Value/t.Ref, t.Of)
		}
		return fmt.Sprintf("%s: %s, target %s", f.Verdict(), v, f.TargetText())
	}
	met := 0
	worst := figs[0]
	for _, f := range figs {
		if f.Verdict() == Met {
			met++
		}
		if f.Value-f.Target.Limit > worst.Value-worst.Target.Limit {
			worst = f
		}
	}
	verdict := Met
	if met < len(figs) {
		verdict = Missed
	}
	return fmt.Sprintf("%s: met at %d of %d rates; worst %s, target %s (%s)", verdict, met, len(figs), worst.ValueText(), worst.TargetText(), rateOf(worst.Name))
}

// rateOf is the load a latency figure's name states ("added p50 at 500
// msg/s (direct 510 µs)" is at "500 msg/s").
func rateOf(name string) string {
	_, after, ok := strings.Cut(name, " at ")
	if !ok {
		return name
	}
	before, _, _ := strings.Cut(after, " (")
	return before
}

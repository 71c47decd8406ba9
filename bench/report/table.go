package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the figures as an aligned table, a group heading before
// each group's figures.
func WriteText(w io.Writer, figs []Figure) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tWarden\t"+strings.Join(Baselines, "\t")+"\ttarget\tmet\t")
	group := ""
	for _, f := range figs {
		if f.Group != group {
			group = f.Group
			fmt.Fprintf(tw, "%s%s\n", strings.ToUpper(group), strings.Repeat("\t", len(Baselines)+4))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", f.Name, f.ValueText(), strings.Join(f.baselineTexts(), "\t"), f.TargetText(), f.Verdict())
	}
	return tw.Flush()
}

// WriteMarkdown prints the figures as a markdown table, Warden's value
// beside the null Go pass-through's and nginx's, then the notes.
func WriteMarkdown(w io.Writer, figs []Figure) error {
	var b strings.Builder
	b.WriteString("| scenario | figure | Warden | " + WardenRelay + " | " + NullHop + " pass-through | " + NullRelay + " | " + Nginx + " | target | met |\n|---|---|---|---|---|---|---|---|---|\n")
	var notes []string
	for _, f := range figs {
		name := f.Name
		if f.Note != "" {
			notes = append(notes, f.Note)
			name += fmt.Sprintf(" [%d]", len(notes))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(f.Group), cell(name), cell(f.ValueText()),
			strings.Join(f.baselineTexts(), " | "), cell(f.TargetText()), f.Verdict())
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "%d. %s\n", i+1, n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// baselineTexts are the figure's values for the Baselines columns (numbers
// or "-": nothing a markdown cell must escape).
func (f Figure) baselineTexts() []string {
	out := make([]string, len(Baselines))
	for i, side := range Baselines {
		out[i] = f.BaselineText(side)
	}
	return out
}

// cell escapes a markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

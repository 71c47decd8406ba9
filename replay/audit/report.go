package audit

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strings"
)

// Report holds, per attack, the outcome against the server alone and
// through Warden.
type Report struct {
	Protocol string `json:"protocol"`
	Direct   string `json:"direct,omitempty"` // the target alone's URL, when audited
	Warden   string `json:"warden,omitempty"` // Warden's URL, when audited
	Rows     []Row  `json:"rows"`
}

// Row is one attack's outcomes; an endpoint not audited has none.
type Row struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Direct *Outcome `json:"direct,omitempty"`
	Warden *Outcome `json:"warden,omitempty"`
}

// Untested is one line of "not tested, and why".
type Untested struct {
	Title string // the attack's row text
	Where string // "target alone", "through Warden" or "both"
	Why   string
}

// Untested lists the attacks skipped on some endpoint, with the reason; an
// attack skipped on both for the same reason is listed once.
func (r Report) Untested() []Untested {
	var out []Untested
	for _, row := range r.Rows {
		d, w := skipped(row.Direct), skipped(row.Warden)
		switch {
		case d && w && row.Direct.Why == row.Warden.Why:
			out = append(out, Untested{row.Title, "both", row.Direct.Why})
		default:
			if d {
				out = append(out, Untested{row.Title, "target alone", row.Direct.Why})
			}
			if w {
				out = append(out, Untested{row.Title, "through Warden", row.Warden.Why})
			}
		}
	}
	return out
}

func skipped(o *Outcome) bool { return o != nil && o.Result == Skipped }

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report as a markdown page: a title, the targets,
// then the table (WriteTable).
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Warden audit: %s\n\n", protocolName(r.Protocol))
	fmt.Fprintf(&b, "Target alone: %s. Through Warden: %s.\n\n", orNone(r.Direct), orNone(r.Warden))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return r.WriteTable(w)
}

// WriteTable writes the markdown table (attack, target alone, through
// Warden, evidence) and the list of what was not tested, and why. It holds
// no address or identifier of the run, so the same target gives the same
// text: the documentation's attack tables are this output.
func (r Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| attack | target alone | through Warden | evidence |\n|---|---|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(row.Title), mdResult(row.Direct), mdResult(row.Warden), mdCell(evidence(row)))
	}
	if u := r.Untested(); len(u) > 0 {
		b.WriteString("\nNot tested, and why:\n\n")
		for _, x := range u {
			fmt.Fprintf(&b, "- %s (%s): %s\n", mdCell(x.Title), x.Where, mdCell(x.Why))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// evidence is one row's evidence cell: what each endpoint answered.
func evidence(row Row) string {
	var parts []string
	if o := row.Direct; o != nil && o.Evidence != "" {
		parts = append(parts, "alone: "+o.Evidence)
	}
	if o := row.Warden; o != nil && o.Evidence != "" {
		parts = append(parts, "Warden: "+o.Evidence)
	}
	return strings.Join(parts, "; ")
}

func mdResult(o *Outcome) string {
	switch {
	case o == nil:
		return "-"
	case o.Result == Succeeded:
		return "**succeeded**"
	}
	return string(o.Result)
}

// mdCell keeps a text on one table cell: no newline, pipes escaped.
func mdCell(s string) string {
	return strings.NewReplacer("\n", " ", "|", `\|`, "<", "&lt;").Replace(s)
}

func orNone(s string) string {
	if s == "" {
		return "not audited"
	}
	return s
}

func protocolName(p string) string {
	switch p {
	case "macp":
		return "MACP"
	case "mcp":
		return "MCP"
	case "a2a":
		return "A2A"
	}
	return p
}

// WriteHTML writes the report as one self-contained HTML page: inline CSS,
// no script, no external resource.
func (r Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	title := "Warden audit: " + protocolName(r.Protocol)
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>%s</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2}
td.blocked{background:#e6f4ea}
td.succeeded{background:#fce8e6;font-weight:bold}
td.skipped{background:#f1f3f4;color:#555}
code{font-family:ui-monospace,monospace}
</style>
</head>
<body>
<h1>%s</h1>
<p>Target alone: %s. Through Warden: %s.</p>
<table id="audit">
<thead><tr><th>attack</th><th>target alone</th><th>through Warden</th><th>evidence</th></tr></thead>
<tbody>
`, esc(title), esc(title), esc(orNone(r.Direct)), esc(orNone(r.Warden)))
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "<tr id=\"%s\"><td>%s</td>%s%s<td>%s</td></tr>\n",
			esc(row.ID), code(row.Title), htmlResult(row.Direct), htmlResult(row.Warden), code(evidence(row)))
	}
	b.WriteString("</tbody>\n</table>\n")
	if u := r.Untested(); len(u) > 0 {
		b.WriteString("<h2>Not tested, and why</h2>\n<ul id=\"untested\">\n")
		for _, x := range u {
			fmt.Fprintf(&b, "<li>%s (%s): %s</li>\n", code(x.Title), esc(x.Where), esc(x.Why))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func htmlResult(o *Outcome) string {
	if o == nil {
		return "<td>-</td>"
	}
	return fmt.Sprintf(`<td class="%s">%s</td>`, esc(string(o.Result)), esc(string(o.Result)))
}

func esc(s string) string { return html.EscapeString(s) }

// code escapes s and renders its `backquoted` spans as <code>.
func code(s string) string {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 { // an unpaired backquote: plain text
		return esc(s)
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString("<code>" + esc(p) + "</code>")
		} else {
			b.WriteString(esc(p))
		}
	}
	return b.String()
}

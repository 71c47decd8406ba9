// Command architecture draws docs/architecture.svg, the picture the README
// opens with: agents reach the MACP runtime, an MCP server or an A2A agent
// through Warden, standalone or as Envoy's ext_authz service. Its test fails
// when the committed SVG is not what it draws. Regenerate with
//
//	go run ./docs/architecture > docs/architecture.svg
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if _, err := io.WriteString(os.Stdout, draw()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// canvas collects SVG elements.
type canvas struct{ b strings.Builder }

func (c *canvas) box(x, y, w, h int, fill, stroke string, lines ...string) {
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="%d" height="%d" rx="8" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n", x, y, w, h, fill, stroke)
	top := y + h/2 - (len(lines)-1)*9
	for i, l := range lines {
		if i == 0 {
			c.text(x+w/2, top+i*18+5, "middle", "bold", l)
			continue
		}
		c.small(x+w/2, top+i*18+5, l)
	}
}

func (c *canvas) text(x, y int, anchor, weight, s string) {
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	fmt.Fprintf(&c.b, `<text x="%d" y="%d" text-anchor="%s" font-weight="%s">%s</text>`+"\n", x, y, anchor, weight, s)
}

// small writes a detail line, a size below the rest.
func (c *canvas) small(x, y int, s string) {
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	fmt.Fprintf(&c.b, `<text x="%d" y="%d" text-anchor="middle" font-size="11">%s</text>`+"\n", x, y, s)
}

func (c *canvas) arrow(x1, y1, x2, y2 int, label string) {
	fmt.Fprintf(&c.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333" stroke-width="1.5" marker-end="url(#head)"/>`+"\n", x1, y1, x2, y2)
	if label != "" {
		c.text((x1+x2)/2, (y1+y2)/2-6, "middle", "normal", label)
	}
}

const (
	agentFill  = "#eef3fb"
	wardenFill = "#fdf1d6"
	peerFill   = "#e9f6ec"
	envoyFill  = "#f1eaf7"
	line       = "#555"
)

func draw() string {
	var c canvas
	const width, height = 920, 540
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", width, height, width, height)
	c.b.WriteString(`<defs><marker id="head" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker></defs>` + "\n")
	fmt.Fprintf(&c.b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)

	// Standalone: one sidecar per upstream, every message in both directions.
	c.text(20, 28, "start", "bold", "Standalone sidecar: Warden sees every request and every answer, streams included")
	agents := []struct{ name, proto string }{
		{"MACP agents", "gRPC"},
		{"MCP clients", "Streamable HTTP"},
		{"A2A clients", "JSON-RPC + SSE"},
	}
	peers := []struct{ name, detail string }{
		{"MACP runtime", "unmodified, on loopback"},
		{"MCP server", "tasks: 2025-11-25, SEP-2663/2669"},
		{"A2A agent", "A2A 1.0 server"},
	}
	const rowH, top = 70, 50
	c.box(280, top, 280, 3*rowH-10, wardenFill, line,
		"Warden", "authenticate the sender", "decide: rules + Rego policies", "forward what was decided,", "filter what comes back")
	for i, a := range agents {
		y := top + i*rowH
		c.box(20, y+5, 180, 50, agentFill, line, a.name, a.proto)
		c.arrow(200, y+30, 278, y+30, "")
		p := peers[i]
		c.box(660, y+5, 240, 50, peerFill, line, p.name, p.detail)
		c.arrow(560, y+30, 658, y+30, "")
	}
	c.small(420, top+3*rowH+12, "refused: a protocol-native error to the sender (Ack FORBIDDEN, -32602, -32001, 401);")
	c.small(420, top+3*rowH+28, "nothing half-forwarded")

	// ext_authz: Envoy forwards, Warden decides each request.
	const y2 = 330
	c.text(20, y2-10, "start", "bold", "Envoy ext_authz: Envoy buffers each request and asks Warden's Check before forwarding it")
	c.box(20, y2+30, 180, 60, agentFill, line, "agents", "MACP, MCP or A2A")
	c.arrow(200, y2+60, 278, y2+60, "")
	c.box(280, y2+20, 280, 80, envoyFill, line, "Envoy", "ext_authz filter, body buffered", "failure_mode_allow: false")
	c.arrow(560, y2+60, 658, y2+60, "allowed")
	c.box(660, y2+30, 240, 60, peerFill, line, "upstream", "MACP runtime, MCP server, A2A agent")
	c.box(280, y2+140, 280, 56, wardenFill, line, "Warden (ext_authz)", "Authorization/Check: the same decision path")
	c.arrow(400, y2+100, 400, y2+138, "")
	c.arrow(440, y2+138, 440, y2+102, "")
	c.text(452, y2+124, "start", "normal", "allow / deny")
	c.text(388, y2+124, "end", "normal", "Check")
	c.small(730, y2+172, "replicas share state through Redis")

	c.b.WriteString("</svg>\n")
	return c.b.String()
}

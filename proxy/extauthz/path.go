package extauthz

import (
	"fmt"
	"path"
	"strings"
)

// Default JSON-RPC endpoint paths ext_authz accepts: the path of A2A's
// JSON-RPC binding and of MCP's Streamable HTTP endpoint.
const (
	DefaultA2APath = "/"
	DefaultMCPPath = "/mcp"
)

// A2A's agent card paths: 1.0's, and 0.3's which servers still serve.
var a2aCardPaths = []string{"/.well-known/agent-card.json", "/.well-known/agent.json"}

// validEndpointPath checks a configured endpoint path: absolute, in the one
// spelling a request must use (no escapes, dot segments, doubled slashes,
// query or fragment), so that comparing bytes is comparing paths.
func validEndpointPath(key, p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%s: %q must start with /", key, p)
	case strings.ContainsAny(p, "%?#\\ \t\r\n"):
		return fmt.Errorf("%s: %q must not hold %%, ?, #, \\ or blanks", key, p)
	case p != "/" && path.Clean(p) != strings.TrimSuffix(p, "/"):
		return fmt.Errorf("%s: %q must be a clean path (no //, . or .. segments)", key, p)
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f {
			return fmt.Errorf("%s: %q holds a control character", key, p)
		}
	}
	return nil
}

// pathIs reports whether an Envoy :path names the endpoint want: its query
// cut, it must equal want byte for byte. A percent-escape, a dot segment, a
// doubled slash or a fragment is not want, though an upstream may route it
// to want's handler or to another: Warden decides on the path the upstream
// is sent, never on its own reading of it.
func pathIs(p, want string) bool {
	p, _, _ = strings.Cut(p, "?")
	return p == want
}

// pathIn is pathIs for several endpoints.
func pathIn(p string, want []string) bool {
	for _, w := range want {
		if pathIs(p, w) {
			return true
		}
	}
	return false
}

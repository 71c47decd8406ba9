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

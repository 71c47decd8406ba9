package a2a

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentwarden/warden/proxy/relay"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// card serves the upstream's public agent card with the JSON-RPC interface
// pointing at Warden and the bindings Warden does not enforce left out.
func (s *Server) card(w http.ResponseWriter, r *http.Request) {
	u := *s.upstream
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, "", ""
	out, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "could not build the upstream request")
		return
	}
	out.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(out)
	if err != nil {
		s.enforcer.UpstreamFailed("a2a")
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the A2A server is unavailable")
		return
	}
	defer resp.Body.Close()
	b, err := relay.ReadBody(resp.Body, s.cfg.MaxResponseBytes)
	if err != nil {
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the agent card could not be read whole")
		return
	}
	var c map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if resp.StatusCode != http.StatusOK || d.Decode(&c) != nil || c == nil {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
		return
	}
	if !s.rewriteCard(c, s.public) {
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the agent card cannot be served: Warden has no public URL to write into it (set a2a.public_url)")
		return
	}
	b, err = jsonrpc.Encode(c)
	if err != nil {
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the agent card could not be rewritten")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// publicEndpoint is the JSON-RPC endpoint as clients reach Warden, written
// into the agent card: the configured public URL, else the listen address
// (a wildcard's as localhost) with the upstream's path, https unless the
// listener is plaintext; "" when neither is set. Never the request's Host,
// which the client chose (a card cached by a shared client or a gateway
// would send the next caller where the first named).
func publicEndpoint(cfg Config, path string) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	if o := cfg.ListenOrigin(); o != "" {
		return o + path
	}
	return ""
}

// rewriteCard points the card's interfaces at public, whatever host,
// address or spelling they name (the server may call itself localhost where
// Warden calls it 127.0.0.1, or list a mirror): every JSON-RPC interface
// becomes Warden's endpoint (one per protocol version), and every other
// interface (other bindings, interfaces routed by tenant) is left out, since
// Warden serves and enforces none of them. 0.3's main url becomes public and
// its preferred transport JSON-RPC. false when there is no public endpoint
// to point at: the card must not be served.
func (s *Server) rewriteCard(c map[string]any, public string) bool {
	if public == "" {
		return false
	}
	for _, k := range []string{"supportedInterfaces", "additionalInterfaces"} {
		list, ok := c[k].([]any)
		if !ok {
			delete(c, k) // absent, or not a list: nothing a client reads of it is checked
			continue
		}
		kept := list[:0]
		seen := map[string]bool{}
		for _, it := range list {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			binding, _ := m["protocolBinding"].(string)
			if binding == "" {
				binding, _ = m["transport"].(string) // 0.3
			}
			version, _ := m["protocolVersion"].(string)
			if !strings.EqualFold(binding, "JSONRPC") || m["tenant"] != nil && m["tenant"] != "" || seen[version] {
				continue
			}
			seen[version] = true
			m["url"] = public
			kept = append(kept, m)
		}
		c[k] = kept
	}
	if _, ok := c["url"]; ok {
		c["url"] = public // 0.3's main URL
	}
	if _, ok := c["preferredTransport"]; ok {
		c["preferredTransport"] = "JSONRPC"
	}
	return true
}

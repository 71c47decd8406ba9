package a2a

import (
	"errors"
	"net/http"
	"slices"
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
	if resp.StatusCode != http.StatusOK {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
		return
	}
	// One JSON object, read for splicing: a card followed by more (a
	// decoder reading the first value would read it unrewritten), or with
	// a member Warden rewrites given twice or in another case, is not
	// served.
	c, err := jsonrpc.ReadObject(b)
	if err == nil {
		err = rewriteCard(c, s.public)
	}
	if err == nil {
		err = c.Err()
	}
	switch {
	case errors.Is(err, errNoPublicURL):
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the agent card cannot be served: Warden has no public URL to write into it (set a2a.public_url)")
		return
	case err != nil:
		s.log.Warn("the A2A server's agent card cannot be rewritten; not served", "err", err)
		restError(w, http.StatusBadGateway, "UNAVAILABLE", "the agent card could not be rewritten: "+err.Error())
		return
	}
	b = c.AppendTo(make([]byte, 0, len(b)+64))
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

// cardNames are the members of a card rewriteCard reads, interfaceNames
// those of an interface: spelled in another case, a client matching names
// without case (Go's encoding/json, a2a-go) would read the one Warden did
// not point at itself (rewriteCard holds them: jsonrpc.Object.Hold).
var (
	cardNames      = []string{"supportedInterfaces", "additionalInterfaces", "url", "preferredTransport"}
	interfaceNames = []string{"protocolBinding", "transport", "protocolVersion", "tenant", "url"}
)

// rewriteCard points the card's interfaces at public, whatever host,
// address or spelling they name (the server may call itself localhost where
// Warden calls it 127.0.0.1, or list a mirror): every JSON-RPC interface
// becomes Warden's endpoint (one per protocol version), and every other
// interface (other bindings, interfaces routed by tenant) is left out, since
// Warden serves and enforces none of them. 0.3's main url becomes public and
// its preferred transport JSON-RPC. errNoPublicURL when there is no public
// endpoint to point at: the card must not be served. A name given twice, or
// two folding alike, in an object it reads, or one it reads spelled in
// another case, is c.Err: the card must not be served either.
func rewriteCard(c *jsonrpc.Object, public string) error {
	if public == "" {
		return errNoPublicURL
	}
	c.Hold(cardNames...)
	for _, k := range cardNames[:2] {
		list, ok := c.Arr(k)
		if !ok {
			c.Del(k) // absent, or not a list: nothing a client reads of it is checked
			continue
		}
		var seen []string // the protocol versions given an interface
		for i := range list.Len() {
			m, ok := list.Obj(i)
			if !ok {
				list.Drop(i)
				continue
			}
			m.Hold(interfaceNames...)
			binding, _ := m.Str("protocolBinding")
			if binding == "" {
				binding, _ = m.Str("transport") // 0.3
			}
			version, _ := m.Str("protocolVersion")
			if !strings.EqualFold(binding, "JSONRPC") || tenanted(m) || slices.Contains(seen, version) {
				list.Drop(i)
				continue
			}
			seen = append(seen, version)
			m.SetStr("url", public)
		}
	}
	if c.Has("url") {
		c.SetStr("url", public) // 0.3's main URL
	}
	if c.Has("preferredTransport") {
		c.SetStr("preferredTransport", "JSONRPC")
	}
	return nil
}

// tenanted reports whether an interface is routed by tenant: its tenant is
// given, neither null nor "".
func tenanted(m *jsonrpc.Object) bool {
	raw, has := m.Raw("tenant")
	t, isStr := m.Str("tenant")
	return has && string(raw) != "null" && !(isStr && t == "")
}

package a2a

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Allow is the webhook allowlist: networks (CIDR prefixes), host names and
// host:port pairs a push config may name even where CheckWebhook would
// refuse them. With Only set, a push config may name nothing else.
type Allow struct {
	Prefixes []netip.Prefix
	Hosts    []string // lower case, host or host:port
	Only     bool
}

// named reports whether host (lower case, no trailing dot) or host:port is
// one of the allowlist's names.
func (a Allow) named(host, port string) bool {
	for _, h := range a.Hosts {
		if h == host || h == host+":"+port || h == "["+host+"]:"+port {
			return true
		}
	}
	return false
}

// contains reports whether ip is in one of the allowlist's networks.
func (a Allow) contains(ip netip.Addr) bool {
	for _, p := range a.Prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParseAllow reads allowlist entries: "10.0.0.0/8", "192.0.2.7",
// "hooks.internal", "127.0.0.1:8080", "[::1]:9000".
func ParseAllow(entries []string) (Allow, error) {
	var a Allow
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		if p, err := netip.ParsePrefix(e); err == nil {
			a.Prefixes = append(a.Prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			a.Prefixes = append(a.Prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		if e == "" || strings.ContainsAny(e, "/?#@ ") {
			return Allow{}, fmt.Errorf("webhook allowlist entry %q: give a CIDR prefix, an address, a host or host:port", e)
		}
		a.Hosts = append(a.Hosts, e)
	}
	return a, nil
}

// CheckWebhook refuses a push-notification URL Warden must not let the
// server call (A2A §13.2, SSRF): anything but an absolute http(s) URL,
// userinfo, and hosts that are loopback, private, link-local, unspecified,
// multicast, shared (100.64/10) or "localhost", in every spelling an HTTP
// client accepts: IPv4 in dotted, decimal, octal and hex forms with 1 to 4
// parts, IPv6 with IPv4-mapped, -compatible and NAT64 addresses, zones,
// percent-escapes and trailing dots; with allow.Only, anything the
// allowlist does not name. Names are not resolved here: this is the early,
// clear refusal of a config, and the sidecar's push relay checks the
// address a name resolves to when it delivers (CheckDial). Operators who
// need a name that resolves inside list it, or a network, in allow.
func CheckWebhook(raw string, allow Allow) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("the webhook URL is not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("the webhook URL must be an absolute http(s) URL")
	}
	if u.User != nil {
		return fmt.Errorf("the webhook URL must not carry credentials")
	}
	// HTTP clients map an internationalized name to ASCII first (UTS #46:
	// "127。0。0。1" and "①②⑦.0.0.1" are 127.0.0.1): the check reads the
	// name they will connect to.
	host, ok := Host(u.Hostname())
	if !ok {
		return fmt.Errorf("the webhook host is not a valid host name")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if allow.named(host, port) {
		return nil
	}
	ip, isIP := Address(host)
	if !isIP {
		if host == "localhost" || strings.HasSuffix(host, ".localhost") || host == "" {
			return fmt.Errorf("the webhook host %s is loopback", host)
		}
		if allow.Only {
			return fmt.Errorf("the webhook host %s is not on the webhook allowlist", host)
		}
		return nil
	}
	return CheckDial(ip, false, allow)
}

// Host is the name a webhook URL's host is checked and allowed by: lower
// case, in ASCII (UTS #46, as HTTP clients map it), without trailing dots.
// ok is false for a host that is no valid name.
func Host(host string) (string, bool) {
	if !isASCII(host) {
		a, err := idna.Lookup.ToASCII(host)
		if err != nil {
			return "", false
		}
		host = a
	}
	return strings.TrimRight(strings.ToLower(host), "."), true
}

// Named reports whether a webhook host (as Host reads it) and port are
// named by the allowlist: an address it resolves to is then let through.
func (a Allow) Named(host, port string) bool {
	h, ok := Host(host)
	return ok && a.named(h, port)
}

// CheckDial refuses an address a webhook delivery is about to connect to
// (the address a name resolved to, the one actually dialled) unless the
// allowlist lets it through: named says the allowlist names the URL's host.
// Addresses embedded in IPv6 (IPv4-mapped, -compatible, NAT64) are read as
// the IPv4 address they carry. With allow.Only, only named hosts and the
// allowlist's networks pass.
func CheckDial(ip netip.Addr, named bool, allow Allow) error {
	ip = unwrap(ip)
	if named || allow.contains(ip) {
		return nil
	}
	if allow.Only {
		return fmt.Errorf("the webhook address %s is not on the webhook allowlist", ip)
	}
	if why := internal(ip); why != "" {
		return fmt.Errorf("the webhook address %s is %s", ip, why)
	}
	return nil
}

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// internal says why an address is not one a webhook may name, or "".
func internal(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return "reserved"
		}
	}
	return ""
}

// reserved are IPv4 ranges netip does not classify that reach inside: "this
// network", shared address space (carrier NAT), IETF protocol assignments,
// benchmarking and the class E and broadcast block.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// Address reads a URL host as an IP address the way HTTP clients do
// (inet_aton forms for IPv4; IPv6 with its zone dropped), unwrapping IPv4
// addresses embedded in IPv6 (mapped, compatible, NAT64 64:ff9b::/96).
func Address(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if i := strings.IndexByte(host, '%'); i >= 0 && strings.Contains(host, ":") {
		host = host[:i]
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return unwrap(ip), true
	}
	if ip, ok := inetAton(host); ok {
		return ip, true
	}
	return netip.Addr{}, false
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func unwrap(ip netip.Addr) netip.Addr {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		return ip.Unmap()
	}
	if ip.Is6() {
		b := ip.As16()
		compatible := true
		for _, x := range b[:12] {
			if x != 0 {
				compatible = false
				break
			}
		}
		if nat64.Contains(ip) || compatible && (b[12] != 0 || b[13] != 0) {
			return netip.AddrFrom4([4]byte(b[12:]))
		}
	}
	return ip
}

// inetAton reads the IPv4 forms of inet_aton: 1 to 4 parts, each decimal,
// octal (leading 0) or hex (0x), the last filling the remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n := last
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

package gate

import (
	"net/http"
	"testing"

	"github.com/agentwarden/warden/proxy"
)

// TestRequestIDCanonical: Stamp sets proxy.RequestIDHeader as a map key, so
// it must be the canonical spelling Header.Get looks up.
func TestRequestIDCanonical(t *testing.T) {
	if k := http.CanonicalHeaderKey(proxy.RequestIDHeader); k != proxy.RequestIDHeader {
		t.Fatalf("proxy.RequestIDHeader %q is not canonical (%q)", proxy.RequestIDHeader, k)
	}
}

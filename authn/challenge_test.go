package authn

import (
	"fmt"
	"testing"
)

// TestChallenge: every parameter is a quoted-string nothing can end early;
// a resource_metadata URL holding a quote, a backslash, a blank or a line
// break keeps them percent-encoded instead of adding a parameter (a scope
// the client would ask for) or a header line.
func TestChallenge(t *testing.T) {
	refused := fmt.Errorf("x: %w", ErrExpired)
	for _, tc := range []struct {
		metadata string
		err      error
		want     string
	}{
		{"", ErrNoCredentials, `Bearer`},
		{"", refused, `Bearer error="invalid_token", error_description="expired"`},
		{"https://h/.well-known/oauth-protected-resource/mcp", ErrNoCredentials, `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp"`},
		{`https://h/.well-known/oauth-protected-resource/x",scope="admin`, ErrNoCredentials, `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/x%22,scope=%22admin"`},
		{"https://h/a\\\" b\r\nX-Evil: 1", refused, `Bearer resource_metadata="https://h/a%5C%22%20b%0D%0AX-Evil:%201", error="invalid_token", error_description="expired"`},
		{"https://h/é", ErrNoCredentials, `Bearer resource_metadata="https://h/%C3%A9"`},
	} {
		if got := Challenge(tc.metadata, tc.err); got != tc.want {
			t.Errorf("Challenge(%q) = %s, want %s", tc.metadata, got, tc.want)
		}
	}
}

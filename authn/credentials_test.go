package authn

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFromHeaders(t *testing.T) {
	tests := []struct {
		name    string
		auth    []string
		token   []string
		want    string
		wantErr error
	}{
		{name: "none"},
		{name: "bearer", auth: []string{"Bearer abc"}, want: "abc"},
		{name: "scheme is case-insensitive", auth: []string{"bearer abc"}, want: "abc"},
		{name: "upper-case scheme", auth: []string{"BEARER abc"}, want: "abc"},
		{name: "extra spaces", auth: []string{"  Bearer   abc "}, want: "abc"},
		{name: "x-macp-token", token: []string{"abc"}, want: "abc"},
		{name: "both, same token", auth: []string{"Bearer abc"}, token: []string{"abc"}, want: "abc"},
		{name: "both, different tokens", auth: []string{"bearer bob"}, token: []string{"alice"}, wantErr: ErrAmbiguousCredentials},
		{name: "two authorization headers", auth: []string{"Bearer a", "Bearer b"}, wantErr: ErrAmbiguousCredentials},
		{name: "two authorization headers, same value", auth: []string{"Bearer a", "Bearer a"}, wantErr: ErrAmbiguousCredentials},
		{name: "two tokens", token: []string{"a", "b"}, wantErr: ErrAmbiguousCredentials},
		{name: "comma-joined list", auth: []string{"Bearer a, Bearer b"}, wantErr: ErrAmbiguousCredentials},
		{name: "basic scheme", auth: []string{"Basic YTpi"}, wantErr: ErrAmbiguousCredentials},
		{name: "scheme without token", auth: []string{"Bearer"}, wantErr: ErrAmbiguousCredentials},
		{name: "scheme without token, trailing space", auth: []string{"Bearer "}, wantErr: ErrAmbiguousCredentials},
		{name: "empty x-macp-token", token: []string{" "}, wantErr: ErrAmbiguousCredentials},
		{name: "token with a space", auth: []string{"Bearer a b"}, wantErr: ErrAmbiguousCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			get := func(name string) []string {
				switch name {
				case HeaderAuthorization:
					return tt.auth
				case HeaderMACPToken:
					return tt.token
				}
				return nil
			}
			c, err := FromHeaders(get, nil)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && c.Bearer != tt.want {
				t.Fatalf("bearer = %q, want %q", c.Bearer, tt.want)
			}
			if tt.wantErr != nil && !errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("an ambiguous credential must be an invalid one: %v", err)
			}
		})
	}
}

func TestFromHTTP(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "http://x/mcp", nil)
	r.Header.Add("Authorization", "bearer one")
	if c, err := FromHTTP(r); err != nil || c.Bearer != "one" {
		t.Fatalf("one header: %q, %v", c.Bearer, err)
	}
	r.Header.Add("Authorization", "Bearer two")
	if _, err := FromHTTP(r); !errors.Is(err, ErrAmbiguousCredentials) {
		t.Fatalf("two headers: err = %v", err)
	}
	r.Header.Del("Authorization")
	r.Header.Set("Authorization", "Bearer one,Bearer two")
	if _, err := FromHTTP(r); !errors.Is(err, ErrAmbiguousCredentials) {
		t.Fatalf("a comma-joined list: err = %v", err)
	}
}

func TestLoadUpstreamTokens(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	_ = os.WriteFile(good, []byte(`[{"token":"t-planner","sender":"planner"},{"token":"t-eve","sender":"eve"}]`), 0o600)
	m, err := LoadUpstreamTokens(good)
	if err != nil || m["planner"] != "t-planner" || m["eve"] != "t-eve" || len(m) != 2 {
		t.Fatalf("got %v, %v", m, err)
	}
	dup := filepath.Join(dir, "dup.json")
	_ = os.WriteFile(dup, []byte(`[{"token":"a","sender":"eve"},{"token":"b","sender":"eve"}]`), 0o600)
	if _, err := LoadUpstreamTokens(dup); err == nil {
		t.Fatal("a sender with two tokens must be refused")
	}
}

// FuzzFromHeaders: whatever the headers, the parser either refuses them or
// returns one token that the upstream reads the same way (no separators).
func FuzzFromHeaders(f *testing.F) {
	f.Add("Bearer abc", "", false)
	f.Add("bearer a, Bearer b", "x", true)
	f.Add("Basic xyz", "", false)
	f.Add("", "tok", true)
	f.Fuzz(func(t *testing.T, auth, token string, withToken bool) {
		get := func(name string) []string {
			switch {
			case name == HeaderAuthorization && auth != "":
				return []string{auth}
			case name == HeaderMACPToken && withToken:
				return []string{token}
			}
			return nil
		}
		c, err := FromHeaders(get, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("a refusal that is not invalid_credentials: %v", err)
			}
			return
		}
		if strings.ContainsFunc(c.Bearer, func(r rune) bool { return r <= ' ' || r == ',' || r >= 0x7f }) {
			t.Fatalf("token %q holds a separator", c.Bearer)
		}
		if auth != "" && c.Bearer == "" {
			t.Fatalf("an Authorization header %q gave no token and no error", auth)
		}
	})
}

// TestFromHTTPKeys: the credential headers are read under the keys
// http.Header holds them by (httpName is CanonicalHeaderKey), and reading
// them builds no key: FromHTTP allocates no more than FromHeaders does
// with the values at hand.
func TestFromHTTPKeys(t *testing.T) {
	for _, name := range []string{HeaderAuthorization, HeaderMACPToken} {
		if got := httpName(name); got != http.CanonicalHeaderKey(name) {
			t.Errorf("httpName(%s) = %s", name, got)
		}
	}
	r, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	r.Header.Set("Authorization", "Bearer t")
	direct := testing.AllocsPerRun(100, func() {
		_, _ = FromHeaders(func(name string) []string {
			if name == HeaderAuthorization {
				return r.Header["Authorization"]
			}
			return nil
		}, nil)
	})
	if n := testing.AllocsPerRun(100, func() { _, _ = FromHTTP(r) }); n > direct {
		t.Errorf("FromHTTP allocates %v times, FromHeaders %v", n, direct)
	}
}

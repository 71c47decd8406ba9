package gate

import (
	"strings"
	"testing"
)

func TestCheckBodyEncoding(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		ok     bool
	}{
		{"none", nil, true},
		{"empty", []string{""}, true},
		{"identity", []string{"identity"}, true},
		{"identity in capitals", []string{" IDENTITY "}, true},
		{"identity twice", []string{"identity, identity"}, true},
		{"gzip", []string{"gzip"}, false},
		{"br", []string{"br"}, false},
		{"deflate", []string{"deflate"}, false},
		{"identity then gzip", []string{"identity, gzip"}, false},
		{"gzip in a second field line", []string{"identity", "gzip"}, false},
		{"unknown coding", []string{"x-made-up"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBodyEncoding(tc.values...)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckBodyEncoding(%q) = %v, want ok %v", tc.values, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "Content-Encoding") {
				t.Fatalf("error %q does not name the header", err)
			}
		})
	}
}

// FuzzCheckBodyEncoding: only codings that are all identity (or empty)
// pass.
func FuzzCheckBodyEncoding(f *testing.F) {
	for _, s := range []string{"", "identity", "gzip", "identity,gzip", " , identity ,", "IdEnTiTy"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		err := CheckBodyEncoding(v)
		all := true
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				all = false
			}
		}
		if (err == nil) != all {
			t.Fatalf("CheckBodyEncoding(%q) = %v", v, err)
		}
	})
}

package relay

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestAhead: the read-ahead gives the token only when one of the caller's
// items follows it within the bound, "" when only others' follow to the
// end, and fails with a page that cannot be read. list is the server's
// items after the token, a page each letter ('a' the caller's, 'b'
// another's, 'x' a page that fails), "|" between pages.
func TestAhead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		list  string
		bound int
		want  string // the token, "" or "error"
		reads int
	}{
		{"the caller's next", "a|b", 16, "t", 1},
		{"others then the caller's", "b|bb|ab", 16, "t", 3},
		{"only others", "b|bb|b", 16, "", 3},
		{"only others past the bound", "b|b|b|a", 2, "t", 2},
		{"no page may be read", "b", 0, "t", 0},
		{"a page that fails", "b|x", 16, "error", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pages := strings.Split(tc.list, "|")
			reads := 0
			got, err := Ahead("t", func() bool { return reads < tc.bound }, func(at string, first bool) (bool, string, error) {
				i, _ := strconv.Atoi(strings.TrimPrefix(at, "p"))
				if at == "t" {
					i = 0
				}
				if first != (reads == 0) {
					t.Errorf("read %d: first %v", reads, first)
				}
				reads++
				if pages[i] == "x" {
					return false, "", errors.New("unreadable")
				}
				next := ""
				if i+1 < len(pages) {
					next = "p" + strconv.Itoa(i+1)
				}
				return strings.Contains(pages[i], "a"), next, nil
			})
			if err != nil {
				got = "error"
			}
			if got != tc.want || reads != tc.reads {
				t.Errorf("Ahead = %q after %d reads, want %q after %d", got, reads, tc.want, tc.reads)
			}
		})
	}
}

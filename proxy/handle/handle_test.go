package handle

import (
	"encoding/base64"
	"strings"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func testHandles(t testing.TB, key []byte) Sealer {
	t.Helper()
	h, err := New(key, "mcp", kinds[:])
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// flipBit flips one bit of a handle's decoded bytes and re-encodes it.
func flipBit(t *testing.T, handle string, bit int) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(handle, Prefix))
	if err != nil {
		t.Fatal(err)
	}
	b[bit/8%len(b)] ^= 1 << (bit % 8)
	return Prefix + base64.RawURLEncoding.EncodeToString(b)
}

func TestHandles(t *testing.T) {
	h := testHandles(t, testKey)
	ids := []string{"task-1", "", "0c5e2d5a-9d3e-4a8e-b0b1-3d4f5a6b7c8d", "tâche/é?=.&", "a.b.c", "wt2.x.y", strings.Repeat("z", 300)}
	for _, id := range ids {
		for _, kind := range kinds {
			t.Run(string(kind)+"/"+id[:min(len(id), 20)], func(t *testing.T) {
				s := h.SealIn(kind, "alice", "sess", id)
				if !strings.HasPrefix(s, Prefix) {
					t.Fatalf("handle %q lacks the prefix", s)
				}
				if strings.ContainsAny(s, " \t\r\n\"\\=+/") || strings.Count(s, ".") != 1 {
					t.Fatalf("handle %q is not a plain token", s)
				}
				if id != "" && strings.Contains(s, base64.RawURLEncoding.EncodeToString([]byte(id))[:min(len(id), 8)]) {
					t.Fatalf("handle %q shows the id in base64", s)
				}
				if s != h.SealIn(kind, "alice", "sess", id) {
					t.Fatal("sealing is not deterministic")
				}
				got, ok := h.OpenIn(kind, "alice", "sess", s)
				if !ok || got != id {
					t.Fatalf("open = %q, %v; want %q", got, ok, id)
				}
			})
		}
	}
	if h.Seal(kindTask, "alice", "a") == h.Seal(kindTask, "bob", "a") {
		t.Error("two principals get the same handle for one task")
	}
	if h.Seal(kindTask, "alice", "a") == h.Seal(kindTask, "alice", "b") {
		t.Error("two tasks get the same handle")
	}
}

func TestHandlesRefused(t *testing.T) {
	h := testHandles(t, testKey)
	task := h.Seal(kindTask, "alice", "task-1")
	session := h.Seal(kindSession, "alice", "task-1")
	event := h.SealIn(kindEvent, "alice", "s1", "ev-1")
	other := testHandles(t, []byte("fedcba9876543210fedcba9876543210"))
	// The same bytes sealed under another nonce: authentic ciphertext, but
	// not the one spelling of the handle.
	a := h.derived().seal.aead[kindTask]
	nonce := make([]byte, 24)
	ad := additional(kindTask, "alice", "")
	forged := Prefix + base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, []byte("task-1"), ad))
	tests := []struct {
		name            string
		h               Sealer
		kind            byte
		principal, sess string
		handle          string
	}{
		{"another principal", h, kindTask, "bob", "", task},
		{"principal is case sensitive", h, kindTask, "Alice", "", task},
		{"empty principal", h, kindTask, "", "", task},
		{"principal and session run together", h, kindTask, "alic", "e", task},
		{"a session handle as a task's", h, kindTask, "alice", "", session},
		{"a task handle as a session's", h, kindSession, "alice", "", task},
		{"an event id of another session", h, kindEvent, "alice", "s2", event},
		{"an event id of another principal", h, kindEvent, "bob", "s1", event},
		{"an event id as a cursor", h, kindCursor, "alice", "s1", event},
		{"another key", other, kindTask, "alice", "", task},
		{"flipped bit in the nonce", h, kindTask, "alice", "", flipBit(t, task, 0)},
		{"flipped bit in the ciphertext", h, kindTask, "alice", "", flipBit(t, task, 24*8+1)},
		{"flipped bit in the tag", h, kindTask, "alice", "", flipBit(t, task, 8*(24+6+15))},
		{"another nonce for the same id", h, kindTask, "alice", "", forged},
		{"truncated", h, kindTask, "alice", "", task[:len(task)-4]},
		{"shorter than nonce and tag", h, kindTask, "alice", "", Prefix + base64.RawURLEncoding.EncodeToString(make([]byte, 39))},
		{"extra part", h, kindTask, "alice", "", task + ".x"},
		{"missing prefix", h, kindTask, "alice", "", strings.TrimPrefix(task, Prefix)},
		{"version 1 prefix", h, kindTask, "alice", "", "wt1." + strings.TrimPrefix(task, Prefix)},
		{"version 1 handle", h, kindTask, "alice", "", "wt1.dGFzay0x.AAAAAAAAAAAAAAAAAAAAAA"},
		{"raw upstream id", h, kindTask, "alice", "", "task-1"},
		{"empty", h, kindTask, "alice", "", ""},
		{"prefix only", h, kindTask, "alice", "", Prefix},
		{"bad base64", h, kindTask, "alice", "", Prefix + "!!!!" + task[len(Prefix)+4:]},
		{"padded base64", h, kindTask, "alice", "", task + "=="},
		{"standard base64 alphabet", h, kindTask, "alice", "", strings.NewReplacer("-", "+", "_", "/").Replace(task)},
		{"unknown kind", h, 'x', "alice", "", task},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.handle == task && tc.name == "standard base64 alphabet" && !strings.ContainsAny(task, "-_") {
				t.Skip("this handle has no - or _")
			}
			if id, ok := tc.h.OpenIn(tc.kind, tc.principal, tc.sess, tc.handle); ok {
				t.Fatalf("opened %q as %q", tc.handle, id)
			}
		})
	}
}

func FuzzHandleOpen(f *testing.F) {
	h := testHandles(f, testKey)
	f.Add(h.Seal(kindTask, "alice", "task-1"), "alice")
	f.Add(h.Seal(kindSession, "bob", "s"), "bob")
	f.Add("wt2.", "")
	f.Add("wt2.AAAABBBB", "x")
	f.Fuzz(func(t *testing.T, handle, principal string) {
		id, ok := h.Open(kindTask, principal, handle)
		if !ok {
			return
		}
		// Only a handle Warden sealed opens, it opens to what it sealed,
		// and it is the one spelling of that id's handle.
		if again, ok := h.Open(kindSession, principal, handle); ok {
			t.Fatalf("opened as both kinds: %q", again)
		}
		if h.Seal(kindTask, principal, id) != handle {
			t.Fatalf("%q opened, but the handle of %q is %q", handle, id, h.Seal(kindTask, principal, id))
		}
	})
}

func BenchmarkHandleSeal(b *testing.B) {
	h := testHandles(b, testKey)
	for b.Loop() {
		h.Seal(kindTask, "alice", "0c5e2d5a9d3e4a8eb0b13d4f5a6b7c8d")
	}
}

func BenchmarkHandleOpen(b *testing.B) {
	h := testHandles(b, testKey)
	s := h.Seal(kindTask, "alice", "0c5e2d5a9d3e4a8eb0b13d4f5a6b7c8d")
	for b.Loop() {
		h.Open(kindTask, "alice", s)
	}
}

// The kinds the tests use (the MCP adapter's).
var kinds = [...]byte{'t', 's', 'e', 'c'}

const (
	kindTask    = 't'
	kindSession = 's'
	kindEvent   = 'e'
	kindCursor  = 'c'
)

func TestDomains(t *testing.T) {
	mcp := testHandles(t, testKey)
	a2a, err := New(testKey, "a2a", kinds[:])
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.Seal(kindTask, "alice", "task-1")
	if id, ok := a2a.Open(kindTask, "alice", h); ok {
		t.Fatalf("an mcp handle opened in the a2a domain as %q", id)
	}
	if a2a.Seal(kindTask, "alice", "task-1") == h {
		t.Fatal("two domains give the same handle")
	}
}

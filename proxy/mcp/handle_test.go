package mcp

import (
	"encoding/base64"
	"strings"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// flipBit flips one bit of the decoded part (0: the id, 1: the tag) of a
// handle and re-encodes it.
func flipBit(t *testing.T, handle string, part, bit int) string {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(handle, handlePrefix), ".")
	if len(parts) != 2 {
		t.Fatalf("handle %q has %d parts", handle, len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[part])
	if err != nil {
		t.Fatal(err)
	}
	b[bit/8%len(b)] ^= 1 << (bit % 8)
	parts[part] = base64.RawURLEncoding.EncodeToString(b)
	return handlePrefix + parts[0] + "." + parts[1]
}

func TestHandles(t *testing.T) {
	h := handles{key: testKey}
	ids := []string{"task-1", "", "0c5e2d5a-9d3e-4a8e-b0b1-3d4f5a6b7c8d", "tâche/é?=.&", "a.b.c", "wt1.x.y", strings.Repeat("z", 300)}
	for _, id := range ids {
		for _, kind := range []byte{kindTask, kindSession} {
			t.Run(string(kind)+"/"+id[:min(len(id), 20)], func(t *testing.T) {
				s := h.seal(kind, "alice", id)
				if !strings.HasPrefix(s, handlePrefix) {
					t.Fatalf("handle %q lacks the prefix", s)
				}
				if strings.ContainsAny(s, " \t\r\n\"\\") || strings.Count(s, ".") != 2 {
					t.Fatalf("handle %q is not a plain token", s)
				}
				if s != h.seal(kind, "alice", id) {
					t.Fatal("sealing is not deterministic")
				}
				got, ok := h.open(kind, "alice", s)
				if !ok || got != id {
					t.Fatalf("open = %q, %v; want %q", got, ok, id)
				}
			})
		}
	}
}

func TestHandlesRefused(t *testing.T) {
	h := handles{key: testKey}
	task := h.seal(kindTask, "alice", "task-1")
	session := h.seal(kindSession, "alice", "task-1")
	task7 := h.seal(kindTask, "alice", "task-12") // 7 bytes: padded in base64
	other := handles{key: []byte("fedcba9876543210fedcba9876543210")}
	tests := []struct {
		name      string
		h         handles
		kind      byte
		principal string
		handle    string
	}{
		{"another principal", h, kindTask, "bob", task},
		{"principal is case sensitive", h, kindTask, "Alice", task},
		{"empty principal", h, kindTask, "", task},
		{"a session handle as a task's", h, kindTask, "alice", session},
		{"a task handle as a session's", h, kindSession, "alice", task},
		{"another key", other, kindTask, "alice", task},
		{"flipped bit in the tag, first byte", h, kindTask, "alice", flipBit(t, task, 1, 0)},
		{"flipped bit in the tag, last byte", h, kindTask, "alice", flipBit(t, task, 1, 127)},
		{"flipped bit in the id", h, kindTask, "alice", flipBit(t, task, 0, 3)},
		{"another id, same tag", h, kindTask, "alice", handlePrefix + base64.RawURLEncoding.EncodeToString([]byte("task-2")) + task[strings.LastIndex(task, "."):]},
		{"truncated tag", h, kindTask, "alice", task[:len(task)-4]},
		{"tag removed", h, kindTask, "alice", task[:strings.LastIndex(task, ".")+1]},
		{"no tag separator", h, kindTask, "alice", task[:strings.LastIndex(task, ".")]},
		{"extra part", h, kindTask, "alice", task + ".x"},
		{"missing prefix", h, kindTask, "alice", strings.TrimPrefix(task, handlePrefix)},
		{"other prefix", h, kindTask, "alice", "wt2." + strings.TrimPrefix(task, handlePrefix)},
		{"raw upstream id", h, kindTask, "alice", "task-1"},
		{"empty", h, kindTask, "alice", ""},
		{"prefix only", h, kindTask, "alice", handlePrefix},
		{"bad base64 in the id", h, kindTask, "alice", handlePrefix + "!!!!" + task[strings.LastIndex(task, "."):]},
		{"bad base64 in the tag", h, kindTask, "alice", task[:strings.LastIndex(task, ".")+1] + "!!!!"},
		{"padded base64", h, kindTask, "alice", handlePrefix + base64.URLEncoding.EncodeToString([]byte("task-12")) + task7[strings.LastIndex(task7, "."):]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if id, ok := tc.h.open(tc.kind, tc.principal, tc.handle); ok {
				t.Fatalf("opened %q as %q", tc.handle, id)
			}
		})
	}
}

func FuzzHandleOpen(f *testing.F) {
	h := handles{key: testKey}
	f.Add(h.seal(kindTask, "alice", "task-1"), "alice")
	f.Add(h.seal(kindSession, "bob", "s"), "bob")
	f.Add("wt1..", "")
	f.Add("wt1.AAAA.BBBB", "x")
	f.Fuzz(func(t *testing.T, handle, principal string) {
		id, ok := h.open(kindTask, principal, handle)
		if !ok {
			return
		}
		// Only a handle Warden sealed opens, and it opens to what it sealed.
		if again, ok := h.open(kindSession, principal, handle); ok {
			t.Fatalf("opened as both kinds: %q", again)
		}
		if h.seal(kindTask, principal, id) != handle {
			// Base64 without strict decoding accepts other spellings of the
			// same bytes; they must still carry the right tag.
			if _, ok := h.open(kindTask, principal, h.seal(kindTask, principal, id)); !ok {
				t.Fatal("the canonical handle does not open")
			}
		}
	})
}

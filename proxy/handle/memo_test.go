package handle

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMemoIsTheCiphers: a handle sealed or opened through the memo is what
// the ciphers give, a value that does not open keeps not opening (and is
// not remembered), and a handle remembered as open under a key stops
// opening the moment a reload drops that key (the memo is the keyring's,
// not the Sealer's: without that the retired key's handles kept opening).
func TestMemoIsTheCiphers(t *testing.T) {
	old := Key{ID: "old", Secret: []byte("0123456789abcdef0123456789abcdef")}
	next := Key{ID: "next", Secret: []byte("fedcba9876543210fedcba9876543210")}
	kr, err := NewKeyring(old)
	if err != nil {
		t.Fatal(err)
	}
	ring := NewRing(kr)
	h, err := NewSealer(ring, "mcp", kinds[:])
	if err != nil {
		t.Fatal(err)
	}
	handle := h.Seal(kindTask, "alice", "task-1")
	if cold := h.derived().seal.seal(kindTask, "alice", "", "task-1"); handle != cold || h.Seal(kindTask, "alice", "task-1") != cold {
		t.Fatalf("sealed %q, then %q; the ciphers give %q", handle, h.Seal(kindTask, "alice", "task-1"), cold)
	}
	for range 2 {
		if id, err := h.Unseal(kindTask, "alice", "", handle); err != nil || id != "task-1" {
			t.Fatalf("Unseal = %q, %v", id, err)
		}
		if _, err := h.Unseal(kindTask, "bob", "", handle); !errors.Is(err, ErrForeign) {
			t.Fatalf("bob opened alice's handle: %v", err)
		}
		if _, err := h.Unseal(kindSession, "alice", "", handle); err == nil {
			t.Fatal("a task handle opened as a session")
		}
	}
	// A reload that keeps the old key: its handles still open, new ones
	// are sealed under the next key.
	both, _ := NewKeyring(next, old)
	ring.Set(both)
	if id, err := h.Unseal(kindTask, "alice", "", handle); err != nil || id != "task-1" {
		t.Fatalf("after adding a key: Unseal = %q, %v", id, err)
	}
	if again := h.Seal(kindTask, "alice", "task-1"); again == handle {
		t.Fatalf("sealed under the retired key after the reload: %q", again)
	}
	// A reload that drops it: the handle remembered as open no longer is.
	only, _ := NewKeyring(next)
	ring.Set(only)
	if _, err := h.Unseal(kindTask, "alice", "", handle); !errors.Is(err, ErrRetiredKey) {
		t.Fatalf("a handle of a dropped key opened: %v", err)
	}
}

// TestMemoBounded: the memo holds at most two generations of its size.
func TestMemoBounded(t *testing.T) {
	m := newMemo(8)
	for i := range 100 {
		m.put(memoKey{kind: 't', v: fmt.Sprint(i)}, "h")
	}
	if n := len(m.cur) + len(m.prev); n > 16 {
		t.Fatalf("%d remembered, bound 16", n)
	}
	if _, ok := m.get(memoKey{kind: 't', v: "99"}); !ok {
		t.Fatal("the latest is forgotten")
	}
	if _, ok := m.get(memoKey{kind: 't', v: "0"}); ok {
		t.Fatal("the first of 100 is still remembered")
	}
}

// TestMemoBytesBounded: a handle of an upstream id (or principal, or
// session) longer than maxMemoID bytes is sealed and opened as ever but
// not remembered, so what a memo holds is bounded in bytes, not only in
// entries (before, 8,192 ids of any length were kept: an upstream naming
// its tasks with megabyte ids made each keyring hold gigabytes).
func TestMemoBytesBounded(t *testing.T) {
	h := testHandles(t, testKey)
	long := strings.Repeat("x", maxMemoID+1)
	fits := strings.Repeat("y", maxMemoID)
	tests := []struct {
		name               string
		principal, session string
		id                 string
		remembered         bool
	}{
		{"an id of the cap", "alice", "s1", fits, true},
		{"an id over the cap", "alice", "s1", long, false},
		{"a principal over the cap", long, "s1", "task-1", false},
		{"a session over the cap", "alice", long, "task-1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := h.derived()
			v := h.SealIn(kindCursor, tc.principal, tc.session, tc.id)
			_, sealed := d.memo.get(memoKey{kind: kindCursor, principal: tc.principal, session: tc.session, v: tc.id})
			id, err := h.Unseal(kindCursor, tc.principal, tc.session, v)
			if err != nil || id != tc.id {
				t.Fatalf("Unseal = %.20q, %v", id, err)
			}
			_, opened := d.memo.get(memoKey{kind: kindCursor, open: true, principal: tc.principal, session: tc.session, v: v})
			if sealed != tc.remembered || opened != tc.remembered {
				t.Fatalf("seal remembered %v, open remembered %v; want %v", sealed, opened, tc.remembered)
			}
			if again := h.SealIn(kindCursor, tc.principal, tc.session, tc.id); again != v {
				t.Fatal("sealed twice, two handles")
			}
		})
	}
}

// BenchmarkHandleSealCold is one seal without the memo: the HMAC and the
// AEAD.
func BenchmarkHandleSealCold(b *testing.B) {
	h := testHandles(b, testKey)
	x := h.derived().seal
	for b.Loop() {
		x.seal(kindTask, "alice", "", "0c5e2d5a9d3e4a8eb0b13d4f5a6b7c8d")
	}
}

// BenchmarkHandleOpenCold is one open without the memo.
func BenchmarkHandleOpenCold(b *testing.B) {
	h := testHandles(b, testKey)
	s := h.Seal(kindTask, "alice", "0c5e2d5a9d3e4a8eb0b13d4f5a6b7c8d")
	d := h.derived()
	for b.Loop() {
		if _, err := d.open(kindTask, "alice", "", s); err != nil {
			b.Fatal(err)
		}
	}
}

package handle

import (
	"errors"
	"fmt"
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

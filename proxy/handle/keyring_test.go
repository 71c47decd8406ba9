package handle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	secret1 = strings.Repeat("1", 32)
	secret2 = strings.Repeat("2", 40)
)

func writeKeyFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "handle.key")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func loadRing(t *testing.T, content string) *Keyring {
	t.Helper()
	k, err := LoadKeyring(writeKeyFile(t, content))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyringRotation: a handle sealed under key 1 still opens after the
// ring rotates to {2, 1} (new handles then name key 2), and after key 1 is
// removed it is refused as sealed under a key Warden no longer has. Before
// the keyring, a handle key had no id: rotating it broke every handle, and
// the refusal could not say why.
func TestKeyringRotation(t *testing.T) {
	ring := NewRing(loadRing(t, `{"keys":[{"id":"1","secret":"`+secret1+`"}]}`))
	h, err := NewSealer(ring, "mcp", kinds[:])
	if err != nil {
		t.Fatal(err)
	}
	old := h.Seal(kindTask, "alice", "task-1")
	if !strings.HasPrefix(old, Prefix+"1.") {
		t.Fatalf("handle %q does not name key 1", old)
	}

	ring.Set(loadRing(t, `{"keys":[{"id":"2","secret":"`+secret2+`"},{"id":"1","secret":"`+secret1+`"}]}`))
	if id, err := h.Unseal(kindTask, "alice", "", old); err != nil || id != "task-1" {
		t.Fatalf("after rotating to {2,1}: %q, %v", id, err)
	}
	fresh := h.Seal(kindTask, "alice", "task-1")
	if !strings.HasPrefix(fresh, Prefix+"2.") {
		t.Fatalf("new handle %q is not sealed under key 2", fresh)
	}
	if _, err := h.Unseal(kindTask, "bob", "", old); !errors.Is(err, ErrForeign) {
		t.Fatalf("bob with alice's handle: %v", err)
	}

	ring.Set(loadRing(t, `{"keys":[{"id":"2","secret":"`+secret2+`"}]}`))
	_, err = h.Unseal(kindTask, "alice", "", old)
	var he *Error
	if !errors.As(err, &he) || he.Reason != ReasonRetiredKey || err.Error() != "handle sealed under a key Warden no longer has" {
		t.Fatalf("after removing key 1: %v", err)
	}
	if id, err := h.Unseal(kindTask, "alice", "", fresh); err != nil || id != "task-1" {
		t.Fatalf("key 2's handle: %q, %v", id, err)
	}
}

// TestSingleKeyFileUnchanged: today's single-key file is a one-key ring
// whose handles are the same strings as before (wt2., no id), and listing
// that key with id "" in a keyring keeps them opening after a rotation.
func TestSingleKeyFileUnchanged(t *testing.T) {
	before := testHandles(t, []byte(secret1)).Seal(kindTask, "alice", "task-1")
	ring := NewRing(loadRing(t, "  "+secret1+"\n"))
	h, err := NewSealer(ring, "mcp", kinds[:])
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Seal(kindTask, "alice", "task-1"); got != before {
		t.Fatalf("single-key handle changed: %q, was %q", got, before)
	}
	ring.Set(loadRing(t, `{"keys":[{"id":"2","secret":"`+secret2+`"},{"id":"","secret":"`+secret1+`"}]}`))
	if id, err := h.Unseal(kindTask, "alice", "", before); err != nil || id != "task-1" {
		t.Fatalf("old single-key handle after rotation: %q, %v", id, err)
	}
	ring.Set(loadRing(t, `{"keys":[{"id":"2","secret":"`+secret2+`"}]}`))
	if _, err := h.Unseal(kindTask, "alice", "", before); !errors.Is(err, ErrRetiredKey) {
		t.Fatalf("single-key handle after its key is removed: %v", err)
	}
}

// TestUnsealReasons: each kind of value that is not the principal's handle
// gets its own reason.
func TestUnsealReasons(t *testing.T) {
	h := testHandles(t, testKey)
	task := h.Seal(kindTask, "alice", "task-1")
	random, err := LoadKeyring("")
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := NewSealer(NewRing(random), "mcp", kinds[:])
	if err != nil {
		t.Fatal(err)
	}
	beforeRestart := restarted.Seal(kindTask, "alice", "task-1")
	again, _ := LoadKeyring("")
	afterRestart, _ := NewSealer(NewRing(again), "mcp", kinds[:])
	for _, tc := range []struct {
		name   string
		h      Sealer
		handle string
		who    string
		want   *Error
	}{
		{"raw id", h, "task-1", "alice", ErrRawID},
		{"made-up id", h, "00000000-0000-0000-0000-000000000000", "alice", ErrRawID},
		{"foreign", h, task, "bob", ErrForeign},
		{"malformed", h, Prefix + "!!", "alice", ErrMalformed},
		{"keyed, bad id", h, Prefix + "a/b." + strings.TrimPrefix(task, Prefix), "alice", ErrMalformed},
		{"id-less, key removed", restarted, task, "alice", ErrRetiredKey},
		{"unknown key id", h, Prefix + "9." + strings.TrimPrefix(task, Prefix), "alice", ErrRetiredKey},
		{"random key before a restart", afterRestart, beforeRestart, "alice", ErrRetiredKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.h.Unseal(kindTask, tc.who, "", tc.handle); err != tc.want {
				t.Fatalf("Unseal = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestLoadKeyring(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		ids           []string
	}{
		{"single key", "  " + secret1 + "\n", []string{""}},
		{"keyring", `{"keys":[{"id":"b-2","secret":"` + secret2 + `"},{"id":"a_1","secret":"` + secret1 + `"}]}`, []string{"b-2", "a_1"}},
		{"short single key", strings.Repeat("k", 31), nil},
		{"no keys", `{"keys":[]}`, nil},
		{"short secret", `{"keys":[{"id":"1","secret":"short"}]}`, nil},
		{"duplicate id", `{"keys":[{"id":"1","secret":"` + secret1 + `"},{"id":"1","secret":"` + secret2 + `"}]}`, nil},
		{"same secret twice", `{"keys":[{"id":"1","secret":"` + secret1 + `"},{"id":"2","secret":"` + secret1 + `"}]}`, nil},
		{"id with a dot", `{"keys":[{"id":"a.b","secret":"` + secret1 + `"}]}`, nil},
		{"unknown field", `{"keys":[{"id":"1","key":"` + secret1 + `"}]}`, nil},
		{"not JSON", `{"keys":`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := LoadKeyring(writeKeyFile(t, tc.content))
			if tc.ids == nil {
				if err == nil {
					t.Fatalf("loaded %v", k.IDs())
				}
				return
			}
			if err != nil || strings.Join(k.IDs(), ",") != strings.Join(tc.ids, ",") {
				t.Fatalf("ids %v, %v", k, err)
			}
		})
	}
	if _, err := LoadKeyring(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file loaded")
	}
	a, err := LoadKeyring("")
	b, _ := LoadKeyring("")
	if err != nil || a.IDs()[0] == b.IDs()[0] || a.IDs()[0] == "" {
		t.Fatalf("random keyrings %v %v %v", a.IDs(), b.IDs(), err)
	}
}

// TestRingSwapConcurrent: sealing and opening while a reload swaps the
// keyring (run with -race): a handle sealed under a key the ring keeps
// always opens.
func TestRingSwapConcurrent(t *testing.T) {
	one := loadRing(t, `{"keys":[{"id":"1","secret":"`+secret1+`"}]}`)
	both := loadRing(t, `{"keys":[{"id":"2","secret":"`+secret2+`"},{"id":"1","secret":"`+secret1+`"}]}`)
	ring := NewRing(one)
	h, err := NewSealer(ring, "mcp", kinds[:])
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 500 {
			if i%2 == 0 {
				ring.Set(both)
			} else {
				ring.Set(one)
			}
		}
	}()
	for i := 0; ; i++ {
		s := h.Seal(kindTask, "alice", "task-1")
		if strings.HasPrefix(s, Prefix+"2.") {
			// sealed under 2: open only while 2 is in the ring
			if _, err := h.Unseal(kindTask, "alice", "", s); err != nil && !errors.Is(err, ErrRetiredKey) {
				t.Fatalf("handle under key 2: %v", err)
			}
		} else if id, err := h.Unseal(kindTask, "alice", "", s); err != nil || id != "task-1" {
			t.Fatalf("handle under key 1: %q %v", id, err)
		}
		select {
		case <-done:
			return
		default:
		}
	}
}

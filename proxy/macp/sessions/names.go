package sessions

import (
	"encoding/binary"
	"slices"
	"sync"
)

// maxLists bounds how many distinct participant lists names keeps, and
// maxListKey the length of a list's key (its names, each after its length):
// a longer list is not shared, so that what names keeps past the sessions
// that used it stays within a few megabytes (a key of maxListKey bytes holds
// at most maxListKey/2 names, 16 bytes each in the list) whatever the lists
// sessions are started with.
const (
	maxLists   = 1024
	maxListKey = 256
)

// names shares the participant lists of sessions started alike: the same
// agents start session after session, and each session held its own array
// of the same names (48 bytes for three). A list is shared only when equal,
// name for name and in order; sessions never change their list. The
// zero value is ready; it is safe for concurrent use. Once maxLists
// distinct lists are kept it starts over, so that lists nobody repeats
// cost a bounded amount.
type names struct {
	mu    sync.Mutex
	lists map[string][]string // by key (see share)
}

// share returns a list equal to parts that sessions share, parts itself the
// first time.
func (n *names) share(parts []string) []string {
	if len(parts) == 0 {
		return parts
	}
	var buf [maxListKey]byte
	key := buf[:0]
	for _, p := range parts { // each name after its length: no two lists alike
		if len(key)+binary.MaxVarintLen64+len(p) > maxListKey {
			return parts
		}
		key = binary.AppendUvarint(key, uint64(len(p)))
		key = append(key, p...)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.lists[string(key)]; ok && slices.Equal(l, parts) {
		return l
	}
	if n.lists == nil || len(n.lists) >= maxLists {
		n.lists = make(map[string][]string)
	}
	n.lists[string(key)] = parts
	return parts
}

package sessions

import (
	"encoding/binary"
	"slices"
	"sync"
)

// maxLists bounds how many distinct participant lists names keeps.
const maxLists = 1024

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
	var buf [256]byte
	key := buf[:0]
	for _, p := range parts { // each name after its length: no two lists alike
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

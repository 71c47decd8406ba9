package a2a

import (
	"fmt"
	"testing"

	"github.com/agentwarden/warden/rules/a2a"
)

// TestIDMap: what is set is got back, in place or past the few held in
// place (a ListTasks page), and setting again replaces; a task and a
// context of the same id are two keys.
func TestIDMap(t *testing.T) {
	for _, n := range []int{0, 1, 4, 5, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var m idMap[string]
			for i := range n {
				m.set(idKey{a2a.KindTask, fmt.Sprint(i)}, "h")
				m.set(idKey{a2a.KindTask, fmt.Sprint(i)}, fmt.Sprint("t", i))
				m.set(idKey{a2a.KindContext, fmt.Sprint(i)}, fmt.Sprint("c", i))
			}
			for i := range n + 2 {
				for kind, want := range map[a2a.Kind]string{a2a.KindTask: fmt.Sprint("t", i), a2a.KindContext: fmt.Sprint("c", i)} {
					got, ok := m.get(idKey{kind, fmt.Sprint(i)})
					if in := i < n; ok != in || ok && got != want || ok != m.has(idKey{kind, fmt.Sprint(i)}) {
						t.Errorf("get(%v, %d) = %q, %v; want %q, %v", kind, i, got, ok, want, in)
					}
				}
			}
		})
	}
}

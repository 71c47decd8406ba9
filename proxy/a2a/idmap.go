package a2a

// idMap maps upstream ids to what an exchange knows of them (mine, sealed).
// Most answers name one task and one context: those few are held in place,
// which a map would allocate for twice per exchange; past them (a ListTasks
// page) a map holds the rest. The zero value is empty and ready to use.
type idMap[V any] struct {
	n    int
	few  [4]idEntry[V]
	many map[idKey]V
}

type idEntry[V any] struct {
	k idKey
	v V
}

// get returns the value of k and whether it is set.
func (m *idMap[V]) get(k idKey) (V, bool) {
	for i := range m.n {
		if m.few[i].k == k {
			return m.few[i].v, true
		}
	}
	v, ok := m.many[k]
	return v, ok
}

// set sets the value of k.
func (m *idMap[V]) set(k idKey, v V) {
	for i := range m.n {
		if m.few[i].k == k {
			m.few[i].v = v
			return
		}
	}
	if m.n < len(m.few) && m.many == nil {
		m.few[m.n] = idEntry[V]{k, v}
		m.n++
		return
	}
	if m.many == nil {
		m.many = map[idKey]V{}
	}
	m.many[k] = v
}

// has reports whether k is set.
func (m *idMap[V]) has(k idKey) bool {
	_, ok := m.get(k)
	return ok
}

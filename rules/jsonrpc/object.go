package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Object is a JSON object read for splicing: its members are byte ranges of
// the message, an object or array member is read when asked for (one level
// at a time: what nobody asks for is skipped, never decoded), and the
// changes made (a value replaced, a member left out or added) are written
// back around the bytes left as they were.
//
// Every name is read from an object through one rule (find), so that no
// reader of the message reads it otherwise than Warden: readers take either
// of a name given twice (first or last wins), and match names without case
// (Go's encoding/json: ASCII case, the Kelvin sign K and the long s ſ; Fold
// is a superset), after decoding escapes ("task\u0049d" is taskId). A
// protocol object (one read by name: the envelope, params, result and every
// object the protocol's schema gives a place to) is held to the exact
// spelling of each name read from it: the name given twice, or a member
// folding to it without being it (alone or beside it), is a refusal (Err).
// An object reached only by Walk (a tool's output, a message part's data:
// not the protocol's) is loose: a name read from it is refused only when
// two of its members read as it; one spelled otherwise alone is not that
// name. The refused name reads as absent.
type Object struct {
	doc        *doc
	start, end int // the object's bytes, braces included
	members    []member
	changed    bool
	loose      bool // reached by Walk only: not a protocol object
}

// Array is an array member of an Object, read for splicing likewise; the
// objects read from it by index are held as the array is.
type Array struct {
	doc        *doc
	start, end int
	elems      []elem
	changed    bool
	loose      bool
}

// doc is the message the objects of one ReadObject are read from, and the
// first refusal met while reading them.
type doc struct {
	raw []byte
	err error
	// spans are where the message's objects and arrays lie, as the one
	// pass that checked it found them (index.go); nil for a message nested
	// deeper than it reads, whose values are walked to find their ends.
	spans []span
	// The members and elements of every object and array read: each
	// object's (array's) are a run of these, read whole before any other
	// is, so one growing slice holds them all in few allocations. The
	// first run of each, and the first objects, live in the doc itself: a
	// small message is read in one allocation.
	members []member
	elems   []elem
	objects []Object
	repls   [][]byte // the replacements set (member.repl, elem.repl)
	lits    []byte   // the strings set (SetStr), written one after another
	mbuf    [6]member
	ebuf    [2]elem // with the rest, the doc fits the 896-byte size class (TestDocSize)
	obuf    [4]Object
	sbuf    [11]span // where the objects and arrays of a small message lie
}

// Offsets are int32: a message Warden reads is bounded far below 2 GiB.
type member struct {
	keyStart, keyEnd int32 // the name's literal, quotes included; -1 for a member added
	start, end       int32 // the value's bytes
	repl             int32 // 1 + the index in doc.repls of the value's replacement (a JSON literal); 0: none
	plain            bool
	under            bool // a plain name holds an underscore
	drop             bool
	name             string // the name decoded, when the literal is not plain ASCII (or the member was added)
	obj              *Object
	arr              *Array
}

type elem struct {
	start, end int32
	repl       int32
	drop       bool
	obj        *Object
	arr        *Array // read by Walk, spliced back
}

// replace records a replacement and returns its reference (member.repl):
// the first few in one allocation, not grown one by one (an A2A task's id,
// contextId and its messages' taskIds).
func (d *doc) replace(lit []byte) int32 {
	if d.repls == nil {
		d.repls = make([][]byte, 0, 4)
	}
	d.repls = append(d.repls, lit)
	return int32(len(d.repls))
}

// literal is v as a JSON string, written after the doc's other strings
// set: a few ids set in one message share one buffer, made at once with
// room for four plain ones the size of the first (an A2A task's handle,
// 66 bytes, its context's, 104, and a message's taskId) instead of one
// each. A buffer
// outgrown stays as it is: the literals written in it keep their bytes.
func (d *doc) literal(v string) []byte {
	if need := len(v) + 2; cap(d.lits)-len(d.lits) < need { // a plain string's size; AppendString grows it for escapes
		d.lits = make([]byte, 0, max(2*cap(d.lits), 4*need))
	}
	start := len(d.lits)
	d.lits = AppendString(d.lits, v)
	return d.lits[start:len(d.lits):len(d.lits)]
}

// newObject is a fresh Object of the doc, from its slab: the slab's
// chunks never move, so the pointer stays valid.
func (d *doc) newObject(start int, loose bool) *Object {
	if len(d.objects) == cap(d.objects) {
		d.objects = make([]Object, 0, min(2*cap(d.objects), maxChunk))
	}
	d.objects = d.objects[:len(d.objects)+1]
	o := &d.objects[len(d.objects)-1]
	o.doc, o.start, o.loose = d, start, loose
	return o
}

// maxPairwise is the most members whose plain names Check compares
// pairwise; a larger object's names are folded into a map.
const maxPairwise = 16

// ReadObject's refusals of what is no object at all.
var (
	ErrNotJSON   = errors.New("not JSON")
	ErrNotObject = errors.New("not an object")
)

// ReadObject reads raw, one JSON value that must be an object, for
// splicing: a protocol object. The error is a refusal: not JSON, or not an
// object. Names read from it, and from the objects read from it, may meet a
// refusal: Err reports it.
func ReadObject(raw []byte) (*Object, error) {
	if len(raw) > math.MaxInt32 {
		if !Valid(raw) {
			return nil, ErrNotJSON
		}
		return nil, errors.New("too large")
	}
	i := SkipSpace(raw, 0)
	if i < len(raw) && raw[i] != '{' {
		if !Valid(raw) {
			return nil, ErrNotJSON
		}
		return nil, ErrNotObject
	}
	// One pass checks raw and finds where every value lies.
	d := &doc{raw: raw}
	st := scanState{indexing: true}
	st.ix.spans = d.sbuf[:0]
	switch scan(raw, &st, nil) {
	case scanned:
		d.spans = st.ix.spans
	case tooDeep:
		if !json.Valid(raw) {
			return nil, ErrNotJSON
		}
	default:
		return nil, ErrNotJSON
	}
	d.members, d.elems, d.objects = d.mbuf[:0], d.ebuf[:0], d.obuf[:0]
	return d.object(i, false), nil
}

// Err is the first refusal met in reading names from the message's objects
// so far (find): a message with one must not pass.
func (o *Object) Err() error { return o.doc.err }

// object reads the members of the object at raw[i] ('{').
func (d *doc) object(i int, loose bool) *Object {
	raw := d.raw
	o := d.newObject(i, loose)
	first := len(d.members)
	i = SkipSpace(raw, i+1)
	for raw[i] != '}' {
		ks := i
		ke, escaped := StringEnd(raw, i)
		ascii, under := asciiUnder(raw[ks+1 : ke-1])
		m := member{keyStart: int32(ks), keyEnd: int32(ke), plain: !escaped && ascii, under: under}
		if !m.plain {
			m.name, _ = String(raw[ks:ke]) // invalid UTF-8 reads as U+FFFD, as decoders read it
		}
		i = SkipSpace(raw, SkipSpace(raw, ke)+1) // past the colon
		end := d.valueEnd(i)
		m.start, m.end = int32(i), int32(end)
		d.members, first = grow(d.members, first)
		d.members = append(d.members, m)
		if i = SkipSpace(raw, end); raw[i] == ',' {
			i = SkipSpace(raw, i+1)
		}
	}
	o.end = i + 1
	o.members = d.members[first:len(d.members):len(d.members)] // a member added copies them
	return o
}

// maxChunk is the most members (elements) one allocation of a message's
// holds.
const maxChunk = 1024

// grow makes room for one more in run, whose items from first on are those
// of the object (array) being read: when it is full, they move to a new
// chunk, twice as large up to maxChunk; the chunks before stay as they are
// (the objects read hold them). It returns the run and where those items
// start in it.
func grow[T any](run []T, first int) ([]T, int) {
	if len(run) < cap(run) {
		return run, first
	}
	n := len(run) - first
	c := max(min(2*cap(run), maxChunk), 8, 2*n)
	next := make([]T, n, c)
	copy(next, run[first:])
	return next, 0
}

func namesError(a, b string) error {
	if a == b {
		return fmt.Errorf("member %q appears twice", a)
	}
	return fmt.Errorf("members %q and %q differ only in case", a, b)
}

// key is a plain member's name as written.
func (o *Object) key(m member) []byte { return o.doc.raw[m.keyStart+1 : m.keyEnd-1] }

// text is a member's name.
func (o *Object) text(m member) string {
	if m.plain {
		return string(o.key(m))
	}
	return m.name
}

// find returns the member named name, nil when there is none (or it was
// left out). Every name read from the object is read here, and held to the
// one rule (Object): when more than one member reads as name (it, or
// folding like it), or the object is a protocol object and one member
// folds to name without being it, the message is refused (Err) and the
// name reads as absent.
func (o *Object) find(name string) *member {
	var found, odd *member
	n := 0 // members a reader reads as name
	for i := range o.members {
		m := &o.members[i]
		if m.drop {
			continue
		}
		switch o.reads(m, name) {
		case spelled:
			if found == nil {
				found = m
			}
			n++
		case folded:
			odd = m
			n++
		}
	}
	if n > 1 || odd != nil && !o.loose {
		if o.doc.err == nil {
			o.doc.err = o.misread(name, n, odd)
		}
		return nil
	}
	return found
}

// How a reader reads a member's name as a name Warden reads.
const (
	other   = iota
	spelled // the name, as written or decoded
	folded  // folding like it without being it
)

// reads tells whether m's name is name, folds like it, or neither.
func (o *Object) reads(m *member, name string) int {
	if m.plain {
		k := o.key(*m)
		switch {
		case string(k) == name:
			return spelled
		case len(k) != len(name) && !m.under && !hasUnderscore(name):
			// what Misspells answers without its calls: names of
			// different lengths read alike only through underscores
			return other
		case Misspells(k, name):
			return folded
		}
		return other
	}
	switch {
	case m.name == name:
		return spelled
	case foldEqualString(m.name, name), foldEqualString(Unscored(m.name), Unscored(name)):
		return folded
	}
	return other
}

// misread is the refusal of a name read two ways.
func (o *Object) misread(name string, n int, odd *member) error {
	if odd == nil {
		return fmt.Errorf("member %q appears twice", name)
	}
	if n > 1 {
		return fmt.Errorf("members %q and %q differ only in case", name, o.text(*odd))
	}
	return fmt.Errorf("member %q must be spelled %q", o.text(*odd), name)
}

// Hold reads names from o for the rule alone (find): a protocol object's
// names Warden reads on some path, held to their spelling on every path.
func (o *Object) Hold(names ...string) {
	for _, n := range names {
		o.find(n)
	}
}

// Len is the number of the object's members.
func (o *Object) Len() int {
	n := 0
	for _, m := range o.members {
		if !m.drop {
			n++
		}
	}
	return n
}

// Check is a request's stricter reading of an object (a request is refused
// whole where any two of its names could be read as one): taking the
// members as they come, the first whose name is an earlier one's (decoded:
// "a" and "\u0061" are one name) or folds like an earlier one's (Fold), or
// folds to one of known without being it ("Method" for "method"), is
// refused. It reports the same refusal, with the same text, as decoding the
// object member by member would.
func (o *Object) Check(known []string) error {
	ms := o.members
	var seen map[string]string // folded name: the name, for a large object
	if len(ms) > maxPairwise {
		seen = make(map[string]string, len(ms))
	}
	for j, m := range ms {
		switch {
		case seen == nil:
			for k := range j {
				if o.folds(ms[k], m) {
					return namesError(o.text(ms[k]), o.text(m))
				}
			}
		default:
			n := o.text(m)
			f := Fold(n)
			if prev, dup := seen[f]; dup {
				return namesError(prev, n)
			}
			seen[f] = n
		}
		for _, n := range known {
			if o.misspells(m, n) {
				return fmt.Errorf("member %q must be spelled %q", o.text(m), n)
			}
		}
	}
	return nil
}

// folds reports whether two members' names are equal under Fold.
func (o *Object) folds(a, b member) bool {
	if a.plain && b.plain {
		return foldEqual(o.key(a), o.key(b))
	}
	return Fold(o.text(a)) == Fold(o.text(b))
}

// misspells reports whether a member's name folds to name without being it.
func (o *Object) misspells(m member, name string) bool { return o.reads(&m, name) == folded }

// Names returns the names of the object's members.
func (o *Object) Names() []string {
	names := make([]string, 0, len(o.members))
	for _, m := range o.members {
		if !m.drop {
			names = append(names, o.text(m))
		}
	}
	return names
}

// Keep leaves out every member whose name is none of names: what the
// object's Names, each not one of names, given to Del leave out, without
// making the names (a request's envelope kept, in place).
func (o *Object) Keep(names ...string) {
	for i := range o.members {
		m := &o.members[i]
		if m.drop || o.named(*m, names) {
			continue
		}
		m.drop, o.changed = true, true
	}
}

// named reports whether m's name is one of names.
func (o *Object) named(m member, names []string) bool {
	for _, n := range names {
		if m.plain && string(o.key(m)) == n || !m.plain && m.name == n {
			return true
		}
	}
	return false
}

// Has reports whether the object has a member name.
func (o *Object) Has(name string) bool { return o.find(name) != nil }

// Raw returns a member's value as it came (a replacement is not shown),
// capped: appending to it copies it.
func (o *Object) Raw(name string) ([]byte, bool) {
	m := o.find(name)
	if m == nil {
		return nil, false
	}
	return o.doc.raw[m.start:m.end:m.end], true
}

// Str returns a member's value when it is a string, decoded.
func (o *Object) Str(name string) (string, bool) {
	m := o.find(name)
	if m == nil || m.repl != 0 {
		return "", false
	}
	return o.doc.str(int(m.start), int(m.end))
}

// StrOf is Str for a member whose value is most often one of known (a
// method name, an id the reader knows already): a literal spelling one of
// them byte for byte is that string, not a copy of the bytes, when the
// literal decodes to itself (no backslash, valid UTF-8: a literal holds no
// quote or control character unescaped); any other value, and a match that
// does not decode to itself (known may hold anything, an upstream's id),
// is read as Str reads it.
func (o *Object) StrOf(name string, known []string) (string, bool) {
	m := o.find(name)
	if m == nil || m.repl != 0 {
		return "", false
	}
	return StrOf(o.doc.raw[m.start:m.end], known)
}

// StrOf is Object.StrOf for a value v already found (a member's Raw, not
// replaced): the string v holds, known's own when v spells it, false when v
// is no string. v must be one valid JSON value (a Raw of a message
// ReadObject read is: it checked the message whole), as PlainString's is.
func StrOf(v []byte, known []string) (string, bool) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		in := v[1 : len(v)-1]
		for _, k := range known {
			if string(in) == k {
				if selfDecoding(k) {
					return k, true
				}
				break
			}
		}
	}
	return strValue(v)
}

// selfDecoding reports whether the inside of a JSON string literal, s,
// decodes to itself: no escape, valid UTF-8.
func selfDecoding(s string) bool {
	return strings.IndexByte(s, '\\') < 0 && utf8.ValidString(s)
}

// str decodes the string literal raw[start:end]; false for another value.
func (d *doc) str(start, end int) (string, bool) { return strValue(d.raw[start:end]) }

// strValue decodes the string literal v; false for another value.
func strValue(v []byte) (string, bool) {
	if s, ok := PlainString(v); ok {
		return s, true
	}
	return String(v)
}

// Obj returns a member's value when it is an object, read.
func (o *Object) Obj(name string) (*Object, bool) {
	m := o.find(name)
	if m == nil || m.repl != 0 || o.doc.raw[m.start] != '{' {
		return nil, false
	}
	if m.obj == nil {
		m.obj = o.doc.object(int(m.start), o.loose)
	}
	m.obj.loose = m.obj.loose && o.loose // walked first, read by name now
	return m.obj, true
}

// Arr returns a member's value when it is an array, read.
func (o *Object) Arr(name string) (*Array, bool) {
	m := o.find(name)
	if m == nil || m.repl != 0 || o.doc.raw[m.start] != '[' {
		return nil, false
	}
	if m.arr == nil {
		m.arr = o.doc.array(int(m.start), o.loose)
	}
	m.arr.loose = m.arr.loose && o.loose
	return m.arr, true
}

// SetStr sets a member to a string, adding it when absent.
func (o *Object) SetStr(name, v string) { o.SetRaw(name, o.doc.literal(v)) }

// SetRaw sets a member to a JSON literal, adding it when absent.
func (o *Object) SetRaw(name string, lit []byte) {
	o.changed = true
	if m := o.find(name); m != nil {
		m.repl, m.obj, m.arr = o.doc.replace(lit), nil, nil
		return
	}
	o.members = append(o.members, member{keyStart: -1, name: name, repl: o.doc.replace(lit)})
}

// Walk calls fn on o and on every object within it, at any depth, depth
// first (an object Walk reads first is loose: see Object): the values of every member (those of names given twice too) and
// of every array element, an array within an array included. What fn
// changes in them is written back by AppendTo. A value replaced or left
// out is not walked.
func (o *Object) Walk(fn func(*Object)) {
	fn(o)
	for i := range o.members {
		m := &o.members[i]
		if !m.drop && m.repl == 0 && m.keyStart >= 0 {
			o.doc.walk(m.start, &m.obj, &m.arr, fn)
		}
	}
}

func (a *Array) walk(fn func(*Object)) {
	for i := range a.elems {
		e := &a.elems[i]
		if !e.drop && e.repl == 0 {
			a.doc.walk(e.start, &e.obj, &e.arr, fn)
		}
	}
}

// walk walks the value at raw[start] when it is an object or an array,
// reading it into *obj or *arr when it was not read yet: loose, unless
// read by name before.
func (d *doc) walk(start int32, obj **Object, arr **Array, fn func(*Object)) {
	switch d.raw[start] {
	case '{':
		if *obj == nil {
			*obj = d.object(int(start), true)
		}
		(*obj).Walk(fn)
	case '[':
		if *arr == nil {
			*arr = d.array(int(start), true)
		}
		(*arr).walk(fn)
	}
}

// Del leaves a member out.
func (o *Object) Del(name string) {
	if m := o.find(name); m != nil {
		m.drop, o.changed = true, true
	}
}

// array reads the elements of the array at raw[i] ('[').
func (d *doc) array(i int, loose bool) *Array {
	raw := d.raw
	a := &Array{doc: d, start: i, loose: loose}
	first := len(d.elems)
	i = SkipSpace(raw, i+1)
	for raw[i] != ']' {
		end := d.valueEnd(i)
		e := elem{start: int32(i), end: int32(end)}
		d.elems, first = grow(d.elems, first)
		d.elems = append(d.elems, e)
		if i = SkipSpace(raw, end); raw[i] == ',' {
			i = SkipSpace(raw, i+1)
		}
	}
	a.end = i + 1
	a.elems = d.elems[first:len(d.elems):len(d.elems)]
	return a
}

// Len is the number of the array's elements (those left out too).
func (a *Array) Len() int { return len(a.elems) }

// Obj returns element i when it is an object, read.
func (a *Array) Obj(i int) (*Object, bool) {
	e := &a.elems[i]
	if e.drop || e.repl != 0 || a.doc.raw[e.start] != '{' {
		return nil, false
	}
	if e.obj == nil {
		e.obj = a.doc.object(int(e.start), a.loose)
	}
	e.obj.loose = e.obj.loose && a.loose
	return e.obj, true
}

// Arr returns element i when it is an array, read.
func (a *Array) Arr(i int) (*Array, bool) {
	e := &a.elems[i]
	if e.drop || e.repl != 0 || a.doc.raw[e.start] != '[' {
		return nil, false
	}
	if e.arr == nil {
		e.arr = a.doc.array(int(e.start), a.loose)
	}
	e.arr.loose = e.arr.loose && a.loose
	return e.arr, true
}

// Str returns element i when it is a string, decoded.
func (a *Array) Str(i int) (string, bool) {
	e := &a.elems[i]
	if e.drop || e.repl != 0 {
		return "", false
	}
	return a.doc.str(int(e.start), int(e.end))
}

// SetStr replaces element i with a string.
func (a *Array) SetStr(i int, v string) {
	a.elems[i].repl, a.elems[i].obj, a.changed = a.doc.replace(a.doc.literal(v)), nil, true
}

// AppendRaw adds an element, a JSON literal, at the end.
func (a *Array) AppendRaw(lit []byte) {
	a.elems = append(a.elems, elem{start: -1, repl: a.doc.replace(lit)})
	a.changed = true
}

// Drop leaves element i out.
func (a *Array) Drop(i int) { a.elems[i].drop, a.changed = true, true }

// dirty reports whether the object or anything read in it changed.
func (o *Object) dirty() bool {
	if o.changed {
		return true
	}
	for _, m := range o.members {
		if m.obj != nil && m.obj.dirty() || m.arr != nil && m.arr.dirty() {
			return true
		}
	}
	return false
}

func (a *Array) dirty() bool {
	if a.changed {
		return true
	}
	for _, e := range a.elems {
		if e.obj != nil && e.obj.dirty() || e.arr != nil && e.arr.dirty() {
			return true
		}
	}
	return false
}

// Source is the object's bytes as they came (changes not shown).
func (o *Object) Source() []byte { return o.doc.raw[o.start:o.end:o.end] }

// Size is how many bytes the object takes as it came.
func (o *Object) Size() int { return o.end - o.start }

// AppendTo appends the object, with its changes, to dst: what did not
// change is copied as it came (spacing included); a changed object or array
// is written without spacing between its members.
func (o *Object) AppendTo(dst []byte) []byte {
	raw := o.doc.raw
	if !o.dirty() {
		return append(dst, raw[o.start:o.end]...)
	}
	dst = append(dst, '{')
	n := 0
	for _, m := range o.members {
		if m.drop {
			continue
		}
		if n++; n > 1 {
			dst = append(dst, ',')
		}
		if m.keyStart < 0 {
			dst = AppendString(dst, m.name)
		} else {
			dst = append(dst, raw[m.keyStart:m.keyEnd]...)
		}
		dst = append(dst, ':')
		dst = o.doc.value(dst, m.start, m.end, m.obj, m.arr, m.repl)
	}
	return append(dst, '}')
}

// AppendTo appends the array, with its changes, to dst.
func (a *Array) AppendTo(dst []byte) []byte {
	if !a.dirty() {
		return append(dst, a.doc.raw[a.start:a.end]...)
	}
	dst = append(dst, '[')
	n := 0
	for _, e := range a.elems {
		if e.drop {
			continue
		}
		if n++; n > 1 {
			dst = append(dst, ',')
		}
		dst = a.doc.value(dst, e.start, e.end, e.obj, e.arr, e.repl)
	}
	return append(dst, ']')
}

func (d *doc) value(dst []byte, start, end int32, obj *Object, arr *Array, repl int32) []byte {
	switch {
	case repl != 0:
		return append(dst, d.repls[repl-1]...)
	case obj != nil:
		return obj.AppendTo(dst)
	case arr != nil:
		return arr.AppendTo(dst)
	}
	return append(dst, d.raw[start:end]...)
}

// AppendString appends s as a JSON string literal, without HTML escaping
// (as Encode writes it).
func AppendString(dst []byte, s string) []byte {
	plain := utf8.ValidString(s)
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := Encode(s) // a string always encodes
	return append(dst, b...)
}

// Unique reports whether no object in raw, at any depth, has a member named
// twice (names compared decoded: "a" and "\u0061" are one name). raw must be
// valid JSON. A message where one is may be read differently by its
// readers (first or last wins); a decoder and an encoder that rewrite it
// whole keep one of them, splicing would pass both.
func Unique(raw []byte) bool {
	// On the stack for a message of a few dozen names nested a few deep
	// (a request): growing past them moves them to the heap.
	var namesBuf [32][]byte
	var framesBuf [16]int
	var inObjectBuf [16]bool
	names := namesBuf[:0]   // the names of the objects open, innermost last
	frames := framesBuf[:0] // where each open object's names start in names
	inObject := inObjectBuf[:0]
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{':
			frames = append(frames, len(names))
			inObject = append(inObject, true)
		case '[':
			inObject = append(inObject, false)
		case '}':
			f := frames[len(frames)-1]
			if !distinct(names[f:]) {
				return false
			}
			names, frames = names[:f], frames[:len(frames)-1]
			inObject = inObject[:len(inObject)-1]
		case ']':
			inObject = inObject[:len(inObject)-1]
		case '"':
			end, escaped := StringEnd(raw, i)
			j := SkipSpace(raw, end)
			if len(inObject) > 0 && inObject[len(inObject)-1] && j < len(raw) && raw[j] == ':' {
				name := raw[i+1 : end-1]
				if escaped || !utf8.Valid(name) {
					// As a decoder reads it: invalid UTF-8 is U+FFFD,
					// so "\x93" and "\xa1" are one name.
					s, _ := String(raw[i:end])
					name = []byte(s)
				}
				names = append(names, name)
			}
			i = end - 1
		}
	}
	return true
}

// distinct reports whether no two names are equal.
func distinct(names [][]byte) bool {
	if len(names) <= maxPairwise {
		for j := range names {
			for k := range j {
				if string(names[j]) == string(names[k]) {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[string(n)] {
			return false
		}
		seen[string(n)] = true
	}
	return true
}

package jsonrpc

// span is where one object or array of a message lies: raw[start:end].
type span struct{ start, end int32 }

// indexer is what the pass that checks a message (scan) keeps, for
// ReadObject, of where its objects and arrays end: the objects it reads
// then find each member's value's end there instead of walking the value
// again (a member at depth d was walked d times). Scalars are read where
// they are, once.
type indexer struct {
	spans []span                // in the order they begin
	open  [validDepth + 1]int32 // the span of the container open at depth d
}

// container notes an object or an array begun at start, to be open at
// depth.
func (x *indexer) container(start, depth int) {
	x.open[depth] = int32(len(x.spans))
	x.spans = append(x.spans, span{start: int32(start), end: -1})
}

// close notes the end (past its bracket) of the container open at depth.
func (x *indexer) close(end, depth int) { x.spans[x.open[depth]].end = int32(end) }

// valueEnd is where the value at raw[i] ends: an object's or an array's
// as the pass found it, a scalar's read.
func (d *doc) valueEnd(i int) int {
	if c := d.raw[i]; d.spans == nil || c != '{' && c != '[' {
		return ValueEnd(d.raw, i)
	}
	lo, hi := 0, len(d.spans)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if int(d.spans[h].start) < i {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return int(d.spans[lo].end)
}

package relay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrEventTooLarge ends a stream whose event exceeds the bound when the
// caller gave no way to answer for it: forwarding half an event is never an
// option.
var ErrEventTooLarge = errors.New("server-sent event exceeds the size limit")

// ErrBareCR means an event line holds a carriage return that is not part of
// its end. SSE clients end a line at a lone CR as well, so they would read
// lines (data, id) Warden did not check: the stream ends instead.
var ErrBareCR = errors.New("server-sent event line holds a bare carriage return")

// errInsideEvent ends a stream that stops before its last event's end: an
// unterminated event is incomplete and never passes.
var errInsideEvent = fmt.Errorf("stream ended inside an event: %w", io.ErrUnexpectedEOF)

// Event is one server-sent event as read: its lines other than data (id,
// event, retry, comments), in order and without their line ends, and the
// values of its data lines joined with "\n".
type Event struct {
	Fields  [][]byte
	Data    []byte
	HasData bool
	// Over marks an event over the reader's bound, read to its end without
	// being held: Data is the first bound bytes of its data at most, Fields
	// the short non-data lines that fit in the bound.
	Over bool
}

// Reader reads a text/event-stream event by event, each held whole (within
// a bound) so that it can be checked before any of it is sent. It reads what
// an SSE client reads: lines end at "\n" or "\r\n" (a line holding any other
// carriage return ends the stream with ErrBareCR), a leading byte order mark
// is not part of the first line, blank lines outside an event are no event.
type Reader struct {
	br *bufio.Reader
	// max bounds one event, its line ends included (<= 0: no bound).
	max int
	// skip reads an event over max to its end (Event.Over) instead of
	// ending the stream with ErrEventTooLarge.
	skip  bool
	start bool   // nothing read yet: a BOM may come
	line  []byte // the line being read, as much of it as is held
}

// NewReader reads events from r, each within max bytes (<= 0: no bound). An
// event over the bound ends the stream with ErrEventTooLarge, or with skip is
// read to its end and returned with Over set.
func NewReader(r io.Reader, max int, skip bool) *Reader {
	return newReader(bufio.NewReaderSize(r, readerSize), max, skip)
}

// newReader is NewReader through br.
func newReader(br *bufio.Reader, max int, skip bool) *Reader {
	return &Reader{br: br, max: max, skip: skip, start: true}
}

// readLine reads one line into r.line, holding at most hold bytes of it
// and its end (hold < 0: all of it). raw is the line's length on the wire;
// err is io.EOF when the stream ends before the line's end, and
// ErrEventTooLarge when the line is longer than hold and the reader does not
// skip: then it is not read to its end.
func (r *Reader) readLine(hold int) (raw int, err error) {
	r.line = r.line[:0]
	for {
		s, err := r.br.ReadSlice('\n')
		if r.start {
			// A leading BOM is not part of the first line to a client:
			// nor to Warden, or that line would pass unread.
			s = bytes.TrimPrefix(s, bom)
			r.start = false
		}
		raw += len(s)
		room := len(s)
		if hold >= 0 {
			room = min(room, max(0, hold+2-len(r.line))) // +2: its end, to tell where it is
		}
		r.line = append(r.line, s[:room]...)
		if hold >= 0 && !r.skip && raw > hold+2 {
			return raw, ErrEventTooLarge // no need to read the rest
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return raw, err
		}
	}
}

// lineOf returns a line without its end ("\n" or "\r\n"), and false when
// it still holds a carriage return.
func lineOf(line []byte) ([]byte, bool) {
	l := bytes.TrimSuffix(line, []byte("\n"))
	l = bytes.TrimSuffix(l, []byte("\r"))
	return l, bytes.IndexByte(l, '\r') < 0
}

// bom is the byte order mark an event stream may start with; SSE clients
// strip it before reading the first line.
var bom = []byte("\xEF\xBB\xBF")

// Next returns the next event: io.EOF when the stream ends between events,
// an error wrapping io.ErrUnexpectedEOF when it ends inside one.
func (r *Reader) Next() (Event, error) {
	var p pending
	for {
		raw, err := r.readLine(r.hold(&p))
		switch {
		case err == io.EOF && (raw > 0 || p.size > 0):
			return Event{}, errInsideEvent
		case err != nil:
			return Event{}, err // a read error, the end between events, or ErrEventTooLarge
		}
		whole := raw == len(r.line)
		l, ok := lineOf(r.line)
		switch {
		case whole && !ok:
			return Event{}, ErrBareCR
		case whole && len(l) == 0 && p.size == 0:
			continue // a blank line between events (a keep-alive)
		case whole && len(l) == 0:
			return p.Event, r.end(&p, raw)
		}
		p.size += raw
		if err := r.add(&p, l, whole); err != nil {
			return Event{}, err
		}
	}
}

// pending is the event being read.
type pending struct {
	Event
	size int // its bytes on the wire so far
	held int // over the bound: the bytes of Fields held
}

// hold is how much of the next line of p to hold.
func (r *Reader) hold(p *pending) int {
	switch {
	case p.Over:
		return max(0, r.max-p.held) // fields only
	case r.max > 0 && r.skip:
		return r.max + len("data: ") // a line over the bound gives its first data
	case r.max > 0:
		return r.max - p.size
	}
	return -1
}

// end is p's blank line, of raw bytes, which may take it over the bound.
func (r *Reader) end(p *pending, raw int) error {
	if p.Over || r.max <= 0 || p.size+raw <= r.max {
		return nil
	}
	if !r.skip {
		return ErrEventTooLarge
	}
	p.Over = true
	return nil
}

// add adds line l (held whole or not) to p.
func (r *Reader) add(p *pending, l []byte, whole bool) error {
	v, isData := dataValue(l)
	switch {
	case p.Over:
		// Read to the event's end: keep its short non-data lines (the
		// id), drop the rest.
		if whole && !isData {
			p.Fields = append(p.Fields, append([]byte(nil), l...))
			p.held += len(l)
		}
		return nil
	case r.max > 0 && p.size > r.max && !r.skip:
		return ErrEventTooLarge
	case r.max > 0 && p.size > r.max:
		// The event goes over the bound with this line: its data is
		// held up to the bound, its fields are counted.
		if isData {
			p.addData(v)
		}
		p.Data = p.Data[:min(len(p.Data), r.max)]
		for _, f := range p.Fields {
			p.held += len(f)
		}
		p.Over = true
	case isData: // within the bound, so held whole
		p.addData(v)
	default:
		p.Fields = append(p.Fields, append([]byte(nil), l...))
	}
	return nil
}

// addData adds a data line's value to the event's data.
func (e *Event) addData(v []byte) {
	if e.HasData {
		e.Data = append(e.Data, '\n')
	}
	e.Data, e.HasData = append(e.Data, v...), true
}

// dataValue returns the value of a data line: "data:" and an optional space
// before it, or a bare "data" (a field without a colon has an empty value).
func dataValue(l []byte) ([]byte, bool) {
	if string(l) == "data" {
		return []byte{}, true
	}
	v, ok := bytes.CutPrefix(l, []byte("data:"))
	return bytes.TrimPrefix(v, []byte(" ")), ok
}

// idValue returns the value of an id line, as dataValue does for data.
func idValue(l []byte) ([]byte, bool) {
	if string(l) == "id" {
		return []byte{}, true
	}
	v, ok := bytes.CutPrefix(l, []byte("id:"))
	return bytes.TrimPrefix(v, []byte(" ")), ok
}

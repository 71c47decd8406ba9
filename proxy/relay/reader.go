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
	return &Reader{br: bufio.NewReaderSize(r, 32<<10), max: max, skip: skip, start: true}
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
	var e Event
	size := 0 // the event's bytes on the wire so far
	held := 0 // over: the bytes of Fields held
	for {
		hold := -1 // how much of the line to hold
		switch {
		case e.Over:
			hold = max(0, r.max-held) // fields only
		case r.max > 0 && r.skip:
			hold = r.max + len("data: ") // a line over the bound gives its first data
		case r.max > 0:
			hold = r.max - size
		}
		raw, err := r.readLine(hold)
		if err != nil && (err != io.EOF || raw == 0 && size == 0) {
			return Event{}, err // a read error, or the end between events
		}
		if err == io.EOF {
			return Event{}, errInsideEvent
		}
		whole := raw == len(r.line)
		l, ok := lineOf(r.line)
		if whole && !ok {
			return Event{}, ErrBareCR
		}
		if len(l) == 0 && whole {
			if size == 0 {
				continue // a blank line between events (a keep-alive)
			}
			if !e.Over && r.max > 0 && size+raw > r.max {
				if !r.skip {
					return Event{}, ErrEventTooLarge
				}
				e.Over = true
			}
			return e, nil
		}
		size += raw
		if e.Over {
			// Read to the event's end: keep its short non-data lines (the
			// id), drop the rest.
			if _, isData := dataValue(l); whole && !isData {
				e.Fields = append(e.Fields, append([]byte(nil), l...))
				held += len(l)
			}
			continue
		}
		v, isData := dataValue(l)
		if r.max <= 0 || size <= r.max { // then the line is held whole
			if !isData {
				e.Fields = append(e.Fields, append([]byte(nil), l...))
				continue
			}
			e.addData(v)
			continue
		}
		// The event goes over the bound with this line.
		if !r.skip {
			return Event{}, ErrEventTooLarge
		}
		if isData {
			e.addData(v)
		}
		e.Data = e.Data[:min(len(e.Data), r.max)]
		for _, f := range e.Fields {
			held += len(f)
		}
		e.Over = true
	}
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

// Package relay is what Warden's HTTP adapters share to relay an exchange:
// server-sent events copied event by event (each one read whole by a Reader,
// checked or rewritten, then sent by a Writer), the hop-by-hop header filter
// and the bounded read of an answer body.
package relay

import (
	"bytes"
	"io"
	"time"
)

// Events says what CopyEvents does with each event.
type Events struct {
	// Data gets each event's data and returns the data to send and whether
	// to keep the event at all.
	Data func([]byte) ([]byte, bool)
	// ID gets each id line's value and returns the value to send, or false
	// to leave the line out (nil: kept as it is).
	ID func([]byte) ([]byte, bool)
	// Max bounds one event (<= 0: no bound). An event over it is read to
	// its end without being held; TooBig gets the part held (max bytes of
	// data at most) and returns the data to send instead, nil to drop the
	// event. With TooBig nil, the stream ends with ErrEventTooLarge.
	Max    int
	TooBig func(prefix []byte) []byte
	// HeaderWait is how long Stream holds the headers for the first event
	// (<= 0: the package's HeaderWait).
	HeaderWait time.Duration
	// Readers pools the buffer the stream is read through (nil: none).
	Readers *Readers
}

// CopyEvents copies a text/event-stream from r to w event by event, as ev
// says. Other lines (event, retry, comments) pass unchanged. A dropped event
// leaves no trace: nothing is written for it (no blank event, no id line,
// so neither the timing nor the count of what was removed shows), except
// that its retry field, a setting of the stream, comes with the next event
// sent when it changes the setting. A client resuming with Last-Event-ID then resumes from the last
// event it got. Every event is flushed as soon as it is written.
func CopyEvents(w io.Writer, flush func(), r io.Reader, ev Events) error {
	br := ev.Readers.get(r)
	defer ev.Readers.put(br)
	rd := newReader(br, ev.Max, ev.TooBig != nil)
	wr := NewWriter(w, flush)
	// sent is the last retry field sent; held that of the events dropped
	// since, sent with the next event when it changes the setting and that
	// event has no retry of its own (never a second retry line that would
	// tell an event was dropped).
	var sent, held []byte
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		e, keep := ev.apply(e)
		if !keep {
			if l := lastRetry(e.Fields); l != nil {
				held = l
			}
			continue
		}
		own := lastRetry(e.Fields)
		if own == nil && held != nil && !bytes.Equal(held, sent) {
			e.Fields = append([][]byte{held}, e.Fields...)
			own = held
		}
		if own != nil {
			sent = own
		}
		held = nil
		if err := wr.Write(e); err != nil {
			return err
		}
	}
}

// lastRetry returns the last retry field of an event's fields, nil if none.
func lastRetry(fields [][]byte) []byte {
	var last []byte
	for _, f := range fields {
		if bytes.HasPrefix(f, []byte("retry:")) || string(f) == "retry" {
			last = f
		}
	}
	return last
}

// apply returns the event to send, and false when none is.
func (ev Events) apply(e Event) (Event, bool) {
	keep := true
	switch {
	case e.Over:
		e.Data = ev.TooBig(e.Data)
		e.HasData, keep = e.Data != nil, e.Data != nil
	case e.HasData:
		e.Data, keep = ev.Data(e.Data)
	}
	if !keep || ev.ID == nil {
		return e, keep
	}
	fields := e.Fields[:0]
	for _, l := range e.Fields {
		if v, isID := idValue(l); isID {
			nv, ok := ev.ID(v)
			if !ok {
				continue
			}
			l = append([]byte("id: "), nv...)
		}
		fields = append(fields, l)
	}
	e.Fields = fields
	return e, true
}

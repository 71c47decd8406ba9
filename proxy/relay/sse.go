// Package relay is what Warden's HTTP adapters share to relay an exchange:
// server-sent events copied event by event (each one read whole by a Reader,
// checked or rewritten, then sent by a Writer), the hop-by-hop header filter
// and the bounded read of an answer body.
package relay

import (
	"bytes"
	"io"
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
}

// CopyEvents copies a text/event-stream from r to w event by event, as ev
// says. Other lines (event, retry, comments) pass unchanged. A dropped event
// leaves no trace: nothing is written for it (no blank event, no id line,
// so neither the timing nor the count of what was removed shows), except
// that its retry field, a setting of the stream, comes with the next event
// sent. A client resuming with Last-Event-ID then resumes from the last
// event it got. Every event is flushed as soon as it is written.
func CopyEvents(w io.Writer, flush func(), r io.Reader, ev Events) error {
	rd := NewReader(r, ev.Max, ev.TooBig != nil)
	wr := NewWriter(w, flush)
	var retry []byte // the last retry field of the events dropped since the last one sent
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
			for _, f := range e.Fields {
				if isRetry(f) {
					retry = f
				}
			}
			continue
		}
		if retry != nil {
			e.Fields = append([][]byte{retry}, e.Fields...)
			retry = nil
		}
		if err := wr.Write(e); err != nil {
			return err
		}
	}
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

// isRetry reports whether a field line is a retry field.
func isRetry(l []byte) bool {
	return bytes.HasPrefix(l, []byte("retry:")) || string(l) == "retry"
}

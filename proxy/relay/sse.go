// Package relay is what Warden's HTTP adapters share to relay an exchange:
// server-sent events copied event by event (each one checked or rewritten
// before it is sent), the hop-by-hop header filter and the bounded read of an
// answer body.
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

// dataValue returns the value of a data line: "data:" and an optional space
// before it, or a bare "data" (a field without a colon has an empty value).
func dataValue(l []byte) ([]byte, bool) {
	if string(l) == "data" {
		return []byte{}, true
	}
	v, ok := bytes.CutPrefix(l, []byte("data:"))
	return bytes.TrimPrefix(v, []byte(" ")), ok
}

func isData(l []byte) bool { _, ok := dataValue(l); return ok }

// idValue returns the value of an id line, as dataValue does for data.
func idValue(l []byte) ([]byte, bool) {
	if string(l) == "id" {
		return []byte{}, true
	}
	v, ok := bytes.CutPrefix(l, []byte("id:"))
	return bytes.TrimPrefix(v, []byte(" ")), ok
}

// Events says what CopyEvents does with each event.
type Events struct {
	// Data gets each event's data and returns the data to send and whether
	// to keep the event at all.
	Data func([]byte) ([]byte, bool)
	// ID gets each id line's value (nil: kept).
	ID func([]byte) []byte
	// Max bounds one event (<= 0: no bound). An event over it is read to
	// its end without being held; TooBig gets the part held (max bytes of
	// data at most) and returns the data to send instead, nil to send none
	// (the event's id line is still sent, so a client resuming with
	// Last-Event-ID moves past it). With TooBig nil, the stream ends with
	// ErrEventTooLarge.
	Max    int
	TooBig func(prefix []byte) []byte
}

// CopyEvents copies a text/event-stream from r to w event by event, as ev
// says. Other lines (event, retry, comments) pass unchanged; a dropped event
// keeps its id line, so a client's Last-Event-ID stays right. Every event is
// flushed as soon as it is written.
func CopyEvents(w io.Writer, flush func(), r io.Reader, ev Events) error {
	br := bufio.NewReaderSize(r, 32<<10)
	var other [][]byte // non-data lines of the current event
	var data []byte
	hasData := false
	size := 0
	skipping := false // the event is over the bound: read to its end, not held
	var out bytes.Buffer
	emit := func() error {
		keep := true
		switch {
		case skipping:
			data = ev.TooBig(data)
			hasData, keep = data != nil, data != nil
		case hasData:
			data, keep = ev.Data(data)
		}
		out.Reset()
		for _, l := range other {
			v, isID := idValue(l)
			if !keep && !isID && !bytes.HasPrefix(l, []byte("retry:")) {
				continue
			}
			if isID && ev.ID != nil {
				out.WriteString("id: ")
				out.Write(ev.ID(v))
				out.WriteByte('\n')
				continue
			}
			out.Write(l)
			out.WriteByte('\n')
		}
		if hasData && keep {
			// Large data is written as it is, not copied once more.
			for more := true; more; {
				l := data
				if i := bytes.IndexByte(data, '\n'); i >= 0 {
					l, data = data[:i], data[i+1:]
				} else {
					more = false
				}
				out.WriteString("data: ")
				if len(l) < 4<<10 {
					out.Write(l)
				} else {
					if _, err := w.Write(out.Bytes()); err != nil {
						return err
					}
					out.Reset()
					if _, err := w.Write(l); err != nil {
						return err
					}
				}
				out.WriteByte('\n')
			}
		}
		out.WriteByte('\n')
		other, data, hasData, size, skipping = other[:0], nil, false, 0, false
		if _, err := w.Write(out.Bytes()); err != nil {
			return err
		}
		flush()
		return nil
	}
	over := func(n int) bool { return ev.Max > 0 && n > ev.Max }
	// startSkip is the event going over the bound; part is the data line
	// being read when it did.
	startSkip := func(part []byte) error {
		if ev.TooBig == nil {
			return ErrEventTooLarge
		}
		if v, ok := dataValue(part); ok {
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, v...)
			if len(data) > ev.Max {
				data = data[:ev.Max]
			}
		}
		skipping = true
		return nil
	}
	midLine := false // skipping: the rest of a long line follows
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if first {
			// A leading BOM is not part of the first line to a client:
			// nor to Warden, or that line would pass unread.
			line = bytes.TrimPrefix(line, bom)
		}
		if skipping {
			// Read to the event's end: keep its short non-data lines (the
			// id), drop everything else.
			complete := !errors.Is(err, bufio.ErrBufferFull)
			if !midLine {
				l, ok := lineOf(line)
				if complete && !ok {
					return ErrBareCR
				}
				switch {
				case complete && len(l) == 0:
					if err := emit(); err != nil {
						return err
					}
				case complete && !isData(l):
					other = append(other, append([]byte(nil), l...))
				}
			}
			midLine = !complete
			if err == io.EOF {
				return fmt.Errorf("stream ended inside an event: %w", io.ErrUnexpectedEOF)
			}
			if err != nil && complete {
				return err
			}
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole, within the bound.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && !over(size+len(long)) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				if err := startSkip(long); err != nil {
					return err
				}
				midLine = true
				continue
			}
			line = long
		}
		if len(line) > 0 {
			size += len(line)
			l, ok := lineOf(line)
			if !ok {
				return ErrBareCR
			}
			if over(size) {
				if err := startSkip(l); err != nil {
					return err
				}
				if len(l) == 0 {
					if err := emit(); err != nil {
						return err
					}
				}
				midLine = false
				if err == io.EOF {
					return fmt.Errorf("stream ended inside an event: %w", io.ErrUnexpectedEOF)
				}
				continue
			}
			switch {
			case len(l) == 0:
				if len(other) > 0 || hasData {
					if err := emit(); err != nil {
						return err
					}
				} else {
					size = 0 // a keep-alive newline between events
				}
			case isData(l):
				v, _ := dataValue(l)
				if hasData {
					data = append(data, '\n')
				}
				data = append(data, v...)
				hasData = true
			default:
				other = append(other, append([]byte(nil), l...))
			}
		}
		if err == io.EOF {
			if len(other) > 0 || hasData {
				// An unterminated last event is incomplete: drop it.
				return fmt.Errorf("stream ended inside an event: %w", io.ErrUnexpectedEOF)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

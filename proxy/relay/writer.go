package relay

import (
	"bytes"
	"io"
)

// Writer writes events to a client, each whole and flushed as soon as it is
// written.
type Writer struct {
	w     io.Writer
	flush func()
	out   bytes.Buffer
}

// NewWriter writes events to w, calling flush after each.
func NewWriter(w io.Writer, flush func()) *Writer {
	return &Writer{w: w, flush: flush}
}

// bigLine is the data line length from which a line is written as it is,
// not copied once more.
const bigLine = 4 << 10

// Write writes one event: its fields as they are, its data (when it has
// some) as data lines, one per line of the data, and the blank line that
// ends it; then flushes.
func (wr *Writer) Write(e Event) error {
	out := &wr.out
	out.Reset()
	for _, l := range e.Fields {
		if bytes.HasPrefix(l, bom) {
			// A field no client reads (its name starts with a BOM), but
			// as the stream's first line, where a client strips the BOM
			// and reads the rest (a data line) unchecked: never sent.
			continue
		}
		out.Write(l)
		out.WriteByte('\n')
	}
	if out.Len() == 0 && !e.HasData {
		return nil // nothing a client reads: not even a blank line
	}
	for data, more := e.Data, e.HasData; more; {
		l := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			more = false
		}
		out.WriteString("data: ")
		if len(l) < bigLine {
			out.Write(l)
		} else {
			if _, err := wr.w.Write(out.Bytes()); err != nil {
				return err
			}
			out.Reset()
			if _, err := wr.w.Write(l); err != nil {
				return err
			}
		}
		out.WriteByte('\n')
	}
	out.WriteByte('\n')
	if _, err := wr.w.Write(out.Bytes()); err != nil {
		return err
	}
	wr.flush()
	return nil
}

package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errEventTooLarge ends a stream whose event exceeds the bound: forwarding
// half an event is never an option.
var errEventTooLarge = errors.New("server-sent event exceeds the size limit")

// copyEvents copies a text/event-stream from r to w event by event: each
// event's data goes through fn, which returns the data to send and whether to
// keep the event at all, and each id line's value through idFn (nil: kept).
// Other lines (event, retry, comments) pass unchanged; a dropped event keeps
// its id line, so a client's Last-Event-ID stays right. Every event is
// flushed as soon as it is written.
func copyEvents(w io.Writer, flush func(), r io.Reader, maxEvent int, fn func([]byte) ([]byte, bool), idFn func([]byte) []byte) error {
	br := bufio.NewReaderSize(r, 32<<10)
	var other [][]byte // non-data lines of the current event
	var data []byte
	hasData := false
	size := 0
	emit := func() error {
		var out bytes.Buffer
		keep := true
		if hasData {
			data, keep = fn(data)
		}
		for _, l := range other {
			isID := bytes.HasPrefix(l, []byte("id:"))
			if !keep && !isID && !bytes.HasPrefix(l, []byte("retry:")) {
				continue
			}
			if isID && idFn != nil {
				v := bytes.TrimPrefix(l[len("id:"):], []byte(" "))
				out.WriteString("id: ")
				out.Write(idFn(v))
				out.WriteByte('\n')
				continue
			}
			out.Write(l)
			out.WriteByte('\n')
		}
		if hasData && keep {
			for _, l := range bytes.Split(data, []byte("\n")) {
				out.WriteString("data: ")
				out.Write(l)
				out.WriteByte('\n')
			}
		}
		out.WriteByte('\n')
		other, data, hasData, size = other[:0], nil, false, 0
		if _, err := w.Write(out.Bytes()); err != nil {
			return err
		}
		flush()
		return nil
	}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole, within the bound.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if size+len(long) > maxEvent {
					return errEventTooLarge
				}
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			size += len(line)
			if size > maxEvent {
				return errEventTooLarge
			}
			l := bytes.TrimRight(line, "\r\n")
			switch {
			case len(l) == 0:
				if len(other) > 0 || hasData {
					if err := emit(); err != nil {
						return err
					}
				} else {
					size = 0 // a keep-alive newline between events
				}
			case bytes.HasPrefix(l, []byte("data:")):
				v := bytes.TrimPrefix(l[len("data:"):], []byte(" "))
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

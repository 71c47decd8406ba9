package frames

import (
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerReader decodes the header block a HEADERS frame starts (and the
// CONTINUATION frames that end it) into a *http2.MetaHeadersFrame, with the
// checks and limits of x/net/http2's Framer.ReadMetaHeaders (v0.60.0,
// readMetaFrame and checkPseudos), which it replaces: that one allocates
// its emit closure, the variables it captures and the field list grown one
// append at a time for every header block; this one keeps its decoder and
// emit function for the connection and allocates one object per block,
// whose array holds a call's usual header list. It belongs to the
// connection's reader goroutine.
type headerReader struct {
	dec   *hpack.Decoder
	max   uint32 // the header list limit (Config.MaxHeaderListSize)
	conts int    // the most CONTINUATION frames a block may take (maxContinuations)

	// the block being decoded
	m                         *metaFrame
	headersLeft, trailersLeft uint32
	sawRegular                bool
	invalid                   error
}

// metaFrame is a decoded header block with room for its fields.
type metaFrame struct {
	http2.MetaHeadersFrame
	room [10]hpack.HeaderField
}

func newHeaderReader(max uint32) *headerReader {
	if max == 0 {
		max = 16 << 20 // x/net/http2's default
	}
	h := &headerReader{max: max, conts: maxContinuations(max)}
	h.dec = hpack.NewDecoder(4096, h.emit)
	return h
}

var (
	errPseudoAfterRegular = errors.New("pseudo header field after regular")
	errMixPseudo          = errors.New("mix of request and response pseudo header fields")
)

// headerFieldError names a field refused in a header block.
type headerFieldError struct {
	what, name string
}

func (e headerFieldError) Error() string { return e.what + " " + e.name }

// emit takes one decoded field, as readMetaFrame's closure does.
func (h *headerReader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		// the value is not in the error: it may be sensitive
		h.invalid = headerFieldError{"invalid header field value for", hf.Name}
	}
	if strings.HasPrefix(hf.Name, ":") {
		if h.sawRegular {
			h.invalid = errPseudoAfterRegular
		}
	} else {
		h.sawRegular = true
		if !validWireName(hf.Name) {
			h.invalid = headerFieldError{"invalid header field name", hf.Name}
		}
	}
	if h.invalid != nil {
		h.dec.SetEmitEnabled(false)
		return
	}
	left, size := &h.headersLeft, hf.Size()
	if hf.Name == "trailer" {
		left = &h.trailersLeft
		n := strings.Count(hf.Value, ",") + 1
		size = uint32(len(hf.Value)-n+1) + uint32(n)*hpack.HeaderField{}.Size()
	}
	if size > *left {
		h.dec.SetEmitEnabled(false)
		h.m.Truncated = true
		h.headersLeft, h.trailersLeft = 0, 0
		return
	}
	*left -= size
	h.m.Fields = append(h.m.Fields, hf)
}

// validWireName is x/net/http2's validWireHeaderFieldName: a token with
// no upper case.
func validWireName(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}

// maxContinuations is how many CONTINUATION frames a header block of a
// list limited to max may take: as many as a peer that fills 16 KiB frames
// needs for the most the reader decodes (twice the list), and eight more
// (nghttp2's limit for any block). x/net/http2 reads any number, empty
// ones included, so a peer could keep the reader busy with one block for
// as long as the connection lived (CVE-2024-27316's class, twelfth attack
// pass): past the limit the connection ends with ENHANCE_YOUR_CALM.
func maxContinuations(max uint32) int {
	return 8 + int(2*uint64(max)/maxReadFrame)
}

// maxReadFrame is the largest frame the relay reads from a peer (the
// protocol's default SETTINGS_MAX_FRAME_SIZE, which it never raises).
const maxReadFrame = 16384

// read decodes the header block hf starts, reading its CONTINUATION frames
// from fr (whose frame order check guarantees them). A block over the
// limit by far, or going on after an invalid field, or that HPACK cannot
// decode, is a connection error; an invalid field or pseudo-header list a
// stream error; a block over the limit is returned Truncated.
func (h *headerReader) read(fr *http2.Framer, hf *http2.HeadersFrame) (http2.Frame, error) {
	m := &metaFrame{}
	m.HeadersFrame = hf
	m.Fields = m.room[:0]
	h.m, h.headersLeft, h.trailersLeft, h.sawRegular, h.invalid = m, h.max, h.max, false, nil
	defer func() { h.m, h.invalid = nil, nil }()
	h.dec.SetEmitEnabled(true)
	h.dec.SetMaxStringLength(int(h.max))
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for conts := 0; ; conts++ {
		if conts > h.conts {
			return &m.MetaHeadersFrame, http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		// a fragment of more than twice what the list may still hold is
		// not decoded only to be thrown away
		if int64(len(frag)) > 2*int64(h.headersLeft+h.trailersLeft) {
			return &m.MetaHeadersFrame, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		// nor anything after an invalid field, which stopped the count
		if h.invalid != nil {
			return &m.MetaHeadersFrame, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := h.dec.Write(frag); err != nil {
			return &m.MetaHeadersFrame, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf := f.(*http2.ContinuationFrame) // guaranteed by the framer's frame order check
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := h.dec.Close(); err != nil {
		return &m.MetaHeadersFrame, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if h.invalid != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: h.invalid}
	}
	if err := checkPseudos(m.PseudoFields()); err != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return &m.MetaHeadersFrame, nil
}

// checkPseudos refuses an unknown or repeated pseudo-header field and a
// list mixing a request's and a response's.
func checkPseudos(pf []hpack.HeaderField) error {
	var isRequest, isResponse bool
	for i, hf := range pf {
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			isRequest = true
		case ":status":
			isResponse = true
		default:
			return headerFieldError{"invalid pseudo-header", hf.Name}
		}
		for _, hf2 := range pf[:i] {
			if hf.Name == hf2.Name {
				return headerFieldError{"duplicate pseudo-header", hf.Name}
			}
		}
	}
	if isRequest && isResponse {
		return errMixPseudo
	}
	return nil
}

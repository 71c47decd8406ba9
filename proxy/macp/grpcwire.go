package macp

// The gRPC wire as the relay front door writes and reads it itself: message
// framing, answers as grpc-go sends them, status messages and timeouts.

import (
	"encoding/binary"
	"strconv"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy/frames"
	"github.com/agentwarden/warden/proxy/macp/admission"
)

// grpcPrefix is the length of a gRPC message's prefix: a compression flag
// and a four-byte big-endian length.
const grpcPrefix = 5

// grpcFrame is b as one uncompressed gRPC message: prefix and bytes.
func grpcFrame(b []byte) []byte {
	body := make([]byte, grpcPrefix, grpcPrefix+len(b))
	binary.BigEndian.PutUint32(body[1:], uint32(len(b)))
	return append(body, b...)
}

// grpcMessage returns the one uncompressed message body holds, or false.
func grpcMessage(body []byte) ([]byte, bool) {
	if len(body) < grpcPrefix || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:grpcPrefix])) != len(body)-grpcPrefix {
		return nil, false
	}
	return body[grpcPrefix:], true
}

// encodeTimeout writes d as a grpc-timeout value, as grpc-go does: at most
// eight digits in the finest unit that holds it, rounded up.
func encodeTimeout(d time.Duration) string {
	const maxValue = 1e8 - 1
	if d <= 0 {
		return "0n"
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}} {
		if n := ceilDiv(d, u.unit); n <= maxValue {
			return strconv.FormatInt(n, 10) + u.name
		}
	}
	return strconv.FormatInt(min(ceilDiv(d, time.Hour), maxValue), 10) + "H"
}

// ceilDiv is d/u rounded up, without overflow.
func ceilDiv(d, u time.Duration) int64 {
	n := int64(d / u)
	if d%u > 0 {
		n++
	}
	return n
}

// statusAnswer is the Trailers-Only answer grpc-go sends for err.
func statusAnswer(ct string, err error) frames.Response {
	st := status.Convert(err)
	h := []hpack.HeaderField{
		{Name: ":status", Value: "200"}, {Name: "content-type", Value: ct},
		{Name: "grpc-status", Value: strconv.Itoa(int(st.Code()))},
		{Name: "grpc-message", Value: encodeGRPCMessage(st.Message())},
	}
	return frames.Response{Header: h}
}

// refusalAnswer is statusAnswer for a refusal, with its MACP code in
// macp-error-code as grpc-go's refuse sends it.
func refusalAnswer(ct string, r admission.Refusal) frames.Response {
	resp := statusAnswer(ct, status.Error(r.Status, r.Text))
	if r.Code != "" {
		resp.Header = append(resp.Header, hpack.HeaderField{Name: macpErrorCode, Value: string(r.Code)})
	}
	return resp
}

// messageAnswer is the answer grpc-go sends for a unary call that returned
// m: the header list, the message, and trailers with status OK.
func messageAnswer(ct string, m proto.Message) frames.Response {
	b, err := proto.Marshal(m)
	if err != nil {
		return statusAnswer(ct, status.Error(codes.Internal, "grpc: error while marshaling: "+err.Error()))
	}
	return frames.Response{
		Header:  []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: ct}},
		Body:    grpcFrame(b),
		Trailer: []hpack.HeaderField{{Name: "grpc-status", Value: "0"}, {Name: "grpc-message", Value: ""}},
	}
}

// encodeGRPCMessage percent-encodes a status message as gRPC's HTTP/2
// mapping asks (every byte outside printable ASCII, and '%').
func encodeGRPCMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(msg)+8), msg[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return msg
	}
	return string(b)
}

// decodeGRPCMessage undoes encodeGRPCMessage; a malformed escape is kept.
func decodeGRPCMessage(msg string) string {
	var b []byte
	for i := 0; i < len(msg); i++ {
		if msg[i] == '%' && i+2 < len(msg) {
			if v, err := strconv.ParseUint(msg[i+1:i+3], 16, 8); err == nil {
				if b == nil {
					b = append([]byte(nil), msg[:i]...)
				}
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		if b != nil {
			b = append(b, msg[i])
		}
	}
	if b == nil {
		return msg
	}
	return string(b)
}

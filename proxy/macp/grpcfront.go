package macp

// What grpc-go's server reads of a request before any handler of Warden's
// runs, written once for the relay front door, which answers every request
// itself: the header list (grpcHeader: the checks of grpc-go's transport and
// of its method routing, with grpc-go's answers) and the body of a call of
// one request message (oneMessage: grpc-go's rule for a call that is not
// client-streaming). The grpc-go door gets the same from grpc-go itself
// (recvOne holds the calls it serves as streams to the one-message rule).

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentwarden/warden/proxy/frames"
)

// grpcRequest is what grpcHeader read of a request's header list.
type grpcRequest struct {
	// ct is the content type of the answer, as grpc-go writes it for the
	// request's ("application/grpc", or with the request's subtype).
	ct string
	// timeout is the request's grpc-timeout, when it has one.
	timeout    time.Duration
	hasTimeout bool
	// comp decompresses the request's messages: its grpc-encoding's
	// compressor, as grpc-go finds it (encoding.GetCompressor); nil for
	// identity.
	comp encoding.Compressor
	// path is the request's :path.
	path string
	// md is the request's metadata as grpc-go gives it to a handler: its
	// regular header fields by name, in order. Its names (md.names), each
	// once, in the order they first came, are admission.Headers.Names;
	// non-nil.
	md relayMD
}

// grpcHeader reads a request's header list as grpc-go's server does before
// it calls a handler, and returns grpc-go's answer when it would answer the
// request itself: HTTP 415 for a content type that is not gRPC's, 400 for
// a malformed grpc-timeout or binary header or no :authority, 405 for a
// method other than POST, UNIMPLEMENTED for a malformed method name or a
// grpc-encoding with no decompressor, DEADLINE_EXCEEDED for a deadline
// already past. The order is grpc-go's (google.golang.org/grpc
// internal/transport http2Server.operateHeaders, then Server.handleStream
// and processRPC), so that the first failure found is grpc-go's answer.
// The same walk of the header list collects the request's path and
// metadata.
func grpcHeader(header []hpack.HeaderField) (grpcRequest, *frames.Response) {
	var (
		r                      grpcRequest
		isGRPC                 bool
		subtype, rejectedCT    string
		method, path, recvComp string
		authorities, hosts     int
		headerErr              *status.Status
	)
	// every value shares one array, and the names the other half of it: a
	// field repeated gets its own (its slice's capacity ends at its first
	// value)
	n := 0
	for _, f := range header {
		if len(f.Name) > 0 && f.Name[0] != ':' {
			n++
		}
	}
	// the map is made now only for a long list, or once a name repeats
	// (relayMD): a usual call's is made only if something reads it whole
	all := make([]string, 2*n)
	vals, names := all[:0:n], all[n:n:2*n]
	var md metadata.MD
	if n > scanNames {
		md = make(metadata.MD, n)
	}
	for _, f := range header {
		if len(f.Name) > 0 && f.Name[0] != ':' {
			if md == nil && slices.Contains(names, f.Name) {
				md = make(metadata.MD, n)
				for j, name := range names {
					md[name] = vals[j : j+1 : j+1]
				}
			}
			if old, ok := md[f.Name]; ok {
				md[f.Name] = append(old, f.Value)
			} else {
				vals = append(vals, f.Value)
				names = append(names, f.Name)
				if md != nil {
					md[f.Name] = vals[len(vals)-1 : len(vals) : len(vals)]
				}
			}
		}
		switch f.Name {
		case "content-type":
			st, ok := contentSubtype(f.Value)
			if !ok {
				rejectedCT = f.Value
				break
			}
			subtype, isGRPC = st, true
		case "grpc-encoding":
			recvComp = f.Value
		case ":method":
			method = f.Value
		case ":path":
			path = f.Value
		case ":authority":
			authorities++
		case "host":
			hosts++
		case "grpc-timeout":
			d, err := decodeTimeout(f.Value)
			if err != nil {
				headerErr = status.Newf(codes.Internal, "malformed grpc-timeout: %v", err)
				break
			}
			r.timeout, r.hasTimeout = d, true
		default:
			if strings.HasSuffix(f.Name, "-bin") && !reservedHeader(f.Name) {
				if _, err := decodeBinHeader(f.Value); err != nil {
					headerErr = status.Newf(codes.Internal, "malformed binary metadata %q in header %q: %v", f.Value, f.Name, err)
				}
			}
		}
	}
	r.ct = "application/grpc"
	if subtype != "" {
		r.ct += "+" + subtype
	}
	abort := func(httpStatus int, st *status.Status) (grpcRequest, *frames.Response) {
		resp := statusAnswer(r.ct, st.Err())
		resp.Header[0].Value = strconv.Itoa(httpStatus)
		return r, &resp
	}
	switch {
	case authorities > 1 || hosts > 1:
		return abort(400, status.Newf(codes.Internal, "num values of :authority: %v, num values of host: %v, both must only have 1 value as per HTTP/2 spec", authorities, hosts))
	case !isGRPC:
		return abort(415, status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", rejectedCT))
	case headerErr != nil:
		return abort(400, headerErr)
	case authorities == 0 && hosts == 0:
		return abort(400, status.New(codes.Internal, "no host or :authority header present"))
	case method != "POST":
		return abort(405, status.Newf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", method))
	case r.hasTimeout && r.timeout <= 0:
		return abort(200, status.New(codes.DeadlineExceeded, "context deadline exceeded"))
	}
	r.path, r.md = path, relayMD{names: names, vals: vals, md: md}
	if sm, ok := strings.CutPrefix(path, "/"); !ok || !strings.Contains(sm, "/") {
		return abort(200, status.Newf(codes.Unimplemented, "malformed method name: %q", path))
	}
	if recvComp != "" && recvComp != encoding.Identity {
		if r.comp = encoding.GetCompressor(recvComp); r.comp == nil {
			return abort(200, status.Newf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", recvComp))
		}
	}
	return r, nil
}

// contentSubtype is grpc-go's reading of a content type: gRPC's, with the
// subtype after '+' or ';', or not gRPC's.
func contentSubtype(ct string) (string, bool) {
	const base = "application/grpc"
	if ct == base {
		return "", true
	}
	if !strings.HasPrefix(ct, base) {
		return "", false
	}
	switch ct[len(base)] {
	case '+', ';':
		return ct[len(base)+1:], true
	}
	return "", false
}

// decodeTimeout reads a grpc-timeout value as grpc-go does, with its errors.
func decodeTimeout(s string) (time.Duration, error) {
	size := len(s)
	if size < 2 {
		return 0, fmt.Errorf("transport: timeout string is too short: %q", s)
	}
	if size > 9 {
		return 0, fmt.Errorf("transport: timeout string is too long: %q", s)
	}
	var unit time.Duration
	switch s[size-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("transport: timeout unit is not recognized: %q", s)
	}
	t, err := strconv.ParseUint(s[:size-1], 10, 64)
	if err != nil {
		return 0, err
	}
	if unit == time.Hour && t > math.MaxInt64/uint64(time.Hour) {
		return math.MaxInt64, nil // clamped, as grpc-go does ("99999999H")
	}
	return unit * time.Duration(t), nil
}

// decodeBinHeader decodes a binary header's value as grpc-go does: padded
// or unpadded standard base64.
func decodeBinHeader(v string) (string, error) {
	if len(v)%4 == 0 {
		b, err := base64.StdEncoding.DecodeString(v)
		return string(b), err
	}
	b, err := base64.RawStdEncoding.DecodeString(v)
	return string(b), err
}

// The status errors of a body that is not exactly one message, as grpc-go
// words them.
var (
	errNoMessage    = status.Error(codes.Internal, "cardinality violation: received no request message from non-client-streaming RPC")
	errManyMessages = status.Error(codes.Internal, "cardinality violation: received multiple request messages for non-client-streaming RPC")
	errCutMessage   = status.Error(codes.Internal, "unexpected EOF")
	errCompressed   = status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
)

// payloadFormat is grpc-go's answer to a message's flag byte: none for an
// uncompressed message, or a compressed one with a compressor (the
// request's grpc-encoding); an error for a compressed one without, or any
// other flag.
func payloadFormat(flag byte, comp encoding.Compressor) error {
	switch {
	case flag == 0, flag == 1 && comp != nil:
		return nil
	case flag == 1:
		return errCompressed
	}
	return status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", flag)
}

// message is a gRPC message's bytes (b, its flag byte flag) as grpc-go
// hands them to a handler: decompressed with comp when compressed, at most
// max bytes then, with grpc-go's errors.
func message(flag byte, b []byte, comp encoding.Compressor, max int) ([]byte, error) {
	if flag == 0 {
		return b, nil
	}
	r, err := comp.Decompress(bytes.NewReader(b))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the message: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to read decompressed data: %v", err)
	}
	if len(out) > max {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message after decompression larger than max %d", max)
	}
	return out, nil
}

// oneMessage returns the one request message of a call that is not
// client-streaming (decompressed with comp), body its request body (its
// first bytes only when truncated), or grpc-go's answer when it is not
// exactly one message of at most max bytes: grpc-go reads the first
// message, then one more, which must not be there, each prefix, length,
// bytes, flag and decompression in that order.
func oneMessage(body []byte, truncated bool, max int, comp encoding.Compressor) ([]byte, error) {
	var msg []byte
	for i := 0; ; i++ {
		if len(body) == 0 && !truncated {
			if i == 0 {
				return nil, errNoMessage
			}
			return msg, nil
		}
		if len(body) < grpcPrefix {
			if truncated {
				return nil, errManyMessages // cut off by the relay's bound, a second message's prefix
			}
			return nil, errCutMessage
		}
		n := binary.BigEndian.Uint32(body[1:grpcPrefix])
		if uint64(n) > uint64(max) {
			return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, max)
		}
		end := grpcPrefix + int(n)
		if len(body) < end {
			if truncated {
				// the relay holds one message of max bytes: this is a
				// second one, which may yet have ended
				return nil, errManyMessages
			}
			return nil, errCutMessage
		}
		if err := payloadFormat(body[0], comp); err != nil {
			return nil, err
		}
		m, err := message(body[0], body[grpcPrefix:end], comp, max)
		if err != nil {
			return nil, err
		}
		if i == 1 {
			return nil, errManyMessages
		}
		msg, body = m, body[end:]
		if len(body) == 0 && truncated {
			return nil, errManyMessages
		}
	}
}

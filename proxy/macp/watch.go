package macp

// The watches (WatchSessions, WatchSignals) written once for the two
// sidecar doors: a door hands watch a serverStream, grpc-go's own stream or
// the relay's answer streamed on a frames.Request (relayStream), and the
// same hold, filter, bounded client queue and credential guard run on both.

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/frames"
	"github.com/agentwarden/warden/proxy/macp/admission"
)

// serverStream is what the streamed calls use of the client's side of a
// call: relayStream satisfies it, and so does the test oracle's
// grpc.ServerStream (oracle.go).
type serverStream interface {
	Context() context.Context
	RecvMsg(m any) error
	SendMsg(m any) error
	SendHeader(metadata.MD) error
	SetTrailer(metadata.MD)
}

// watch runs a server-streaming call of the runtime admitted with
// credentials as a on ss (see watchCall); upctx is the context of the calls made for it to the
// runtime.
func (s *Server) watch(ss serverStream, a admission.Admission, upctx context.Context) error {
	switch {
	case a.Call == admission.CallWatchSessions:
		return s.watchSessions(ss, a.Principal, a.Credentials, upctx)
	case a.Call == admission.CallWatchSignals:
		return s.watchSignals(ss, a.Principal, a.Credentials, upctx)
	}
	upctx, release, err := s.hold(upctx, a.Principal, a.Credentials, false)
	if err != nil {
		return err
	}
	defer release()
	return s.relay(ss, a.Method, upctx, nil)
}

// watchCall reports a call the runtime answers with a stream to one request
// message: WatchSessions and WatchSignals, filtered, and the streams of the
// calls forwarded after authentication (WatchPolicies) or as discovery
// (WatchModeRegistry, WatchRoots), relayed as they are.
func (s *Server) watchCall(call admission.Call) bool {
	switch call {
	case admission.CallWatchSessions, admission.CallWatchSignals, admission.CallAuthenticated, admission.CallDiscovery:
		return true
	}
	return false
}

// relayWatch answers a server-streaming call on the relay (a watch, the
// health Watch): its one request message (msg) goes to the runtime, and the
// runtime's stream, filtered for the watches, is streamed to the client as
// grpc-go streams it, ending with the call's status.
func (s *Server) relayWatch(ctx context.Context, req *frames.Request, ct string, adm *relayAdmitted, msg []byte) frames.Response {
	rs := &relayStream{ctx: ctx, req: req, ct: ct, msg: msg}
	if adm.a.Anonymous { // the health Watch, public discovery
		return rs.end(s.relayAnonymous(rs, adm.a.Method, adm.g.md.whole()))
	}
	return rs.end(s.watch(rs, adm.a, s.upstreamContext(ctx, adm.g.md.whole(), adm.a.Principal, adm.a.Credentials)))
}

// relaySession answers a StreamSession on the relay with the code the
// grpc-go door runs: the client's messages read as they come, each decided.
func (s *Server) relaySession(ctx context.Context, req *frames.Request, adm *relayAdmitted) frames.Response {
	rs, ctx, cancel := s.streamingRelay(ctx, req, adm.g)
	defer cancel()
	ctx = proxy.WithSource(ctx, adm.a.Source) // the stream's decisions record it
	err := s.streamSession(rs, adm.a.Principal, adm.a.Credentials, s.upstreamContext(ctx, adm.g.md.whole(), adm.a.Principal, adm.a.Credentials))
	return rs.end(err)
}

// relayPassThrough answers a pass-through service's call (reflection) on
// the relay with the code the grpc-go door runs: relayed to the runtime
// as it comes, without credentials (relayAnonymous).
func (s *Server) relayPassThrough(ctx context.Context, req *frames.Request, adm *relayAdmitted) frames.Response {
	rs, _, cancel := s.streamingRelay(ctx, req, adm.g)
	defer cancel()
	return rs.end(s.relayAnonymous(rs, adm.a.Method, adm.g.md.whole()))
}

// streamingRelay is the client side of a call whose request the relay
// reads as it comes, and its context, which a request that is not gRPC's
// framing ends (cancel ends it too).
func (s *Server) streamingRelay(ctx context.Context, req *frames.Request, g grpcRequest) (*relayStream, context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	return &relayStream{ctx: ctx, cancel: cancel, req: req, ct: g.ct, streaming: true, max: s.cfg.MaxMessageBytes, comp: g.comp}, ctx, cancel
}

// relayStream is a call answered on the relay as a serverStream: its
// request messages (the one buffered, or, streaming, those read as they
// come), then io.EOF; its answer streamed with frames.Request.Write, one
// writer at a time (the clientWriter's Run).
type relayStream struct {
	ctx       context.Context
	cancel    context.CancelFunc // ends ctx, streaming
	req       *frames.Request
	ct        string
	streaming bool
	max       int                 // the largest request message, streaming
	comp      encoding.Compressor // decompresses the request's messages, streaming (nil: identity)
	in        []byte              // what was read of the request body and not yet taken, streaming

	mu      sync.Mutex
	recvErr error  // why the request could not be read, streaming: the call's status
	msg     []byte // the request message, until read
	read    bool
	header  bool // the header list went out
	trailer metadata.MD
}

func (r *relayStream) Context() context.Context { return r.ctx }

func (r *relayStream) RecvMsg(m any) error {
	f, ok := m.(*frame)
	if !ok {
		return status.Errorf(codes.Internal, "relay stream: cannot read into %T", m)
	}
	if r.streaming {
		err := r.next(f)
		if err != nil && !errors.Is(err, io.EOF) {
			r.failed(err)
		}
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read {
		return io.EOF
	}
	f.b, r.msg, r.read = r.msg, nil, true
	return nil
}

// next reads the next request message of a streaming call into f as
// grpc-go reads one: io.EOF at the end of the body between messages; a
// compressed message (no grpc-encoding was accepted), one over max, or a
// body that ends inside a message are errors. Only RecvMsg's one caller
// (the up half) runs it.
func (r *relayStream) next(f *frame) error {
	for {
		if len(r.in) >= grpcPrefix {
			n := binary.BigEndian.Uint32(r.in[1:grpcPrefix])
			if uint64(n) > uint64(r.max) {
				return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, r.max)
			}
			if end := grpcPrefix + int(n); len(r.in) >= end {
				if err := payloadFormat(r.in[0], r.comp); err != nil {
					return err
				}
				m, err := message(r.in[0], r.in[grpcPrefix:end], r.comp, r.max)
				if err != nil {
					return err
				}
				f.b = append(f.b[:0], m...)
				r.in = r.in[end:]
				return nil
			}
		}
		b, err := r.req.Read(r.ctx)
		switch {
		case errors.Is(err, io.EOF) && len(r.in) == 0:
			return io.EOF
		case errors.Is(err, io.EOF):
			return errCutMessage
		case err != nil:
			return status.FromContextError(err).Err()
		}
		r.in = append(r.in, b...)
	}
}

// failed ends a streaming call whose request could not be read, as grpc-go
// does: its status is the call's, whatever the handler returns, and the
// call's context ends.
func (r *relayStream) failed(err error) {
	r.mu.Lock()
	if r.recvErr == nil {
		r.recvErr = err
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *relayStream) SendHeader(md metadata.MD) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sendHeader(md)
}

// sendHeader sends the header list once; r.mu is held.
func (r *relayStream) sendHeader(md metadata.MD) error {
	if r.header {
		return nil
	}
	r.header = true
	h := append([]hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: r.ct}}, mdFields(md)...)
	return r.req.SendHeader(h)
}

func (r *relayStream) SendMsg(m any) error {
	var b []byte
	switch m := m.(type) {
	case *frame:
		b = m.b
	case proto.Message:
		var err error
		if b, err = proto.Marshal(m); err != nil {
			return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
		}
	default:
		return status.Errorf(codes.Internal, "relay stream: cannot send %T", m)
	}
	r.mu.Lock()
	err := r.sendHeader(nil)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.req.Write(r.ctx, grpcFrame(b))
}

func (r *relayStream) SetTrailer(md metadata.MD) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trailer = metadata.Join(r.trailer, md)
}

// end is the rest of the answer once the call ended with err: its status
// and trailer, in trailers after the header list, or Trailers-Only.
func (r *relayStream) end(err error) frames.Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recvErr != nil {
		err = r.recvErr
	}
	st := status.Convert(err)
	fields := []hpack.HeaderField{
		{Name: "grpc-status", Value: strconv.Itoa(int(st.Code()))},
		{Name: "grpc-message", Value: encodeGRPCMessage(st.Message())},
	}
	fields = append(fields, mdFields(r.trailer)...)
	if !r.header {
		r.header = true // nothing is sent after
		return frames.Response{Header: append([]hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: r.ct}}, fields...)}
	}
	return frames.Response{Trailer: fields}
}

// mdFields are metadata's header fields as grpc-go writes them: reserved
// names dropped, binary values base64-encoded.
func mdFields(md metadata.MD) []hpack.HeaderField {
	var out []hpack.HeaderField
	for k, vs := range md {
		if reservedHeader(k) {
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			out = append(out, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return out
}

// reservedHeader reports a name grpc-go never writes from metadata.
func reservedHeader(k string) bool {
	switch k {
	case "content-type", "user-agent", "grpc-message-type", "grpc-encoding", "grpc-message", "grpc-status",
		"grpc-timeout", "grpc-status-details-bin", "te":
		return true
	}
	return k == "" || k[0] == ':'
}

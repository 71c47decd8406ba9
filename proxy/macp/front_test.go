package macp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// rawAnswer is what a client saw for one request on the wire: the status
// fields of the answer's header list and trailers, the Ack code a
// SendResponse carried, and the stream's reset, if any.
type rawAnswer struct {
	Status, GRPCStatus, GRPCMessage, Ack string
	AckMessage, MACP                     string // the Ack's error message; macp-error-code
	Reset                                http2.ErrCode
	// Other is an answer's message that is no SendResponse (a
	// GetSessionResponse), in hex.
	Other string
}

// decisionID is the part of an answer's text that differs per decision.
var decisionID = regexp.MustCompile(`warden decision [0-9a-zA-Z-]+`)

// rawCall sends one request, header list and body as given (END_STREAM on
// the last DATA frame), on a connection of its own, and reads the answer.
func rawCall(t *testing.T, addr string, header []hpack.HeaderField, body []byte) rawAnswer {
	t.Helper()
	return rawRequest(t, addr, header, body, true)
}

// rawRequest is rawCall that ends the request only when end.
func rawRequest(t *testing.T, addr string, header []hpack.HeaderField, body []byte, end bool) rawAnswer {
	t.Helper()
	a, data := rawSend(t, addr, header, body, end)
	return a.withAck(t, data)
}

// rawExchange is rawCall for any call: the answer's status fields and its
// body as sent.
func rawExchange(t *testing.T, addr string, header []hpack.HeaderField, body []byte) (rawAnswer, []byte) {
	t.Helper()
	return rawSend(t, addr, header, body, true)
}

// rawSend sends one request, ending it only when end, and reads the
// answer: its status fields and its body.
func rawSend(t *testing.T, addr string, header []hpack.HeaderField, body []byte, end bool) (rawAnswer, []byte) {
	t.Helper()
	var pieces [][]byte
	for len(body) > 0 {
		n := min(len(body), 16384)
		pieces, body = append(pieces, body[:n]), body[n:]
	}
	return rawPieces(t, addr, header, pieces, end)
}

// rawPieces is rawSend with the body sent in pieces, a DATA frame each.
func rawPieces(t *testing.T, addr string, header []hpack.HeaderField, pieces [][]byte, end bool) (rawAnswer, []byte) {
	t.Helper()
	return rawPiecesAfter(t, addr, header, pieces, end, 0)
}

// rawPiecesAfter is rawPieces with the body sent delay after the HEADERS.
func rawPiecesAfter(t *testing.T, addr string, header []hpack.HeaderField, pieces [][]byte, end bool, delay time.Duration) (rawAnswer, []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range header {
		_ = enc.WriteField(f)
	}
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: end && len(pieces) == 0})
	time.Sleep(delay)
	for i, p := range pieces {
		_ = fr.WriteData(1, end && i == len(pieces)-1, p)
	}
	var a rawAnswer
	var data []byte
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				switch hf.Name {
				case ":status":
					a.Status = hf.Value
				case "grpc-status":
					a.GRPCStatus = hf.Value
				case "grpc-message":
					a.GRPCMessage = decisionID.ReplaceAllString(decodeGRPCMessage(hf.Value), "warden decision ID")
				case "macp-error-code":
					a.MACP = hf.Value
				}
			}
			if f.StreamEnded() {
				return a, data
			}
		case *http2.DataFrame:
			data = append(data, f.Data()...)
			if f.StreamEnded() {
				return a, data
			}
		case *http2.RSTStreamFrame:
			a.Reset = f.ErrCode
			return a, data
		case *http2.GoAwayFrame:
			return a, nil
		}
	}
}

// withAck reads the Ack code of the SendResponse data holds.
func (a rawAnswer) withAck(t *testing.T, data []byte) rawAnswer {
	if len(data) == 0 {
		return a
	}
	msg, ok := grpcMessage(data)
	var resp macpv1.SendResponse
	if !ok {
		t.Fatalf("the answer's body is not one gRPC message: %x", data)
	}
	if proto.Unmarshal(msg, &resp) != nil {
		a.Other = fmt.Sprintf("%x", msg)
		return a
	}
	a.Ack = fmt.Sprintf("ok=%v %s", resp.GetAck().GetOk(), resp.GetAck().GetError().GetCode())
	a.AckMessage = decisionID.ReplaceAllString(resp.GetAck().GetError().GetMessage(), "warden decision ID")
	return a
}

// framed is msg with a gRPC message prefix declaring n bytes.
func framed(msg []byte, n int, flag byte) []byte {
	b := make([]byte, grpcPrefix, grpcPrefix+len(msg))
	b[0] = flag
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	return append(b, msg...)
}

// TestFrontDoorBadInput sends what a client should not through MACP's
// three front doors: each is answered with the same protocol-native error
// (the grpc-go server's answer is the reference; the relay's is the same
// bytes, ext_authz's the equivalent on Envoy's wire, see equivalent) and
// none reaches the runtime, while a well-formed Send does. Credentials are
// checked before the message on every door: a Send without valid ones is
// refused UNAUTHENTICATED from its header list (on the old code the grpc-go
// and relay doors read the message first and answered with an Ack).
func TestFrontDoorBadInput(t *testing.T) {
	start, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	envelope := func(sid string, payload []byte) *macpv1.Envelope {
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: macp.TypeSessionStart,
			MessageId: "m-" + sid, SessionId: sid, Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}
	}
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send := func(sid string) []byte { return marshal(&macpv1.SendRequest{Envelope: envelope(sid, start)}) }
	// sendWith is a Send whose envelope (field 1) ends with extra, bytes
	// protobuf-go keeps as unknown fields and prost refuses or reads
	// otherwise.
	sendWith := func(sid string, extra ...byte) []byte {
		env := append(marshal(envelope(sid, start)), extra...)
		return append(append([]byte{0x0a}, protowire.AppendVarint(nil, uint64(len(env)))...), env...)
	}
	hdr := func(path, ct, auth string, extra ...hpack.HeaderField) []hpack.HeaderField {
		h := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
			{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: ct}, {Name: "te", Value: "trailers"}}
		if auth != "" {
			h = append(h, hpack.HeaderField{Name: "authorization", Value: auth})
		}
		return append(h, extra...)
	}
	whole := func(b []byte) []byte { return framed(b, len(b), 0) }
	const maxMsg = 1024
	sendPath, grpcCT, planner := methodSend, "application/grpc", "Bearer planner"
	for _, tc := range []struct {
		name    string
		header  []hpack.HeaderField
		body    func(sid string) []byte
		reaches bool   // the runtime gets the message
		want    string // grpc-status, or the Ack's "ok=... CODE"
		envoy   string // ext_authz's grpc-status where Envoy's framing answers differently ("": equivalent)
	}{
		{"well-formed Send", hdr(sendPath, grpcCT, planner), func(s string) []byte { return whole(send(s)) }, true, "ok=true ", ""},
		{"grpc+proto content type", hdr(sendPath, "application/grpc+proto", planner), func(s string) []byte { return whole(send(s)) }, true, "ok=true ", ""},
		{"no credentials", hdr(sendPath, grpcCT, ""), func(s string) []byte { return whole(send(s)) }, false, "16", ""},
		{"malformed credentials", hdr(sendPath, grpcCT, "Basic cGxhbm5lcg=="), func(s string) []byte { return whole(send(s)) }, false, "16", ""},
		{"two credentials", hdr(sendPath, grpcCT, planner, hpack.HeaderField{Name: "x-macp-token", Value: "worker"}), func(s string) []byte { return whole(send(s)) }, false, "16", ""},
		{"no credentials, not a SendRequest", hdr(sendPath, grpcCT, ""), func(string) []byte { return whole([]byte{0xff, 0xff}) }, false, "16", ""},
		{"sender is not the caller", hdr(sendPath, grpcCT, "Bearer worker"), func(s string) []byte { return whole(send(s)) }, false, "ok=false UNAUTHENTICATED", ""},
		{"oversized message", hdr(sendPath, grpcCT, planner), func(string) []byte { return framed(bytes.Repeat([]byte{0}, 2*maxMsg), 2*maxMsg, 0) }, false, "8", "3"},
		{"truncated message", hdr(sendPath, grpcCT, planner), func(s string) []byte { b := send(s); return framed(b[:10], len(b), 0) }, false, "13", ""},
		{"no message", hdr(sendPath, grpcCT, planner), func(string) []byte { return nil }, false, "13", ""},
		{"two messages", hdr(sendPath, grpcCT, planner), func(s string) []byte { return append(whole(send(s)), whole(send(s))...) }, false, "13", ""},
		{"compressed flag, no encoding", hdr(sendPath, grpcCT, planner), func(s string) []byte { b := send(s); return framed(b, len(b), 1) }, false, "13", ""},
		{"not a SendRequest", hdr(sendPath, grpcCT, planner), func(string) []byte { return whole([]byte{0xff, 0xff}) }, false, "3", ""},
		// issue 24 item 2: what protobuf-go keeps as unknown fields and
		// prost refuses is refused before any decision, at any depth
		{"envelope repeats sender as a varint", hdr(sendPath, grpcCT, planner), func(s string) []byte { return whole(sendWith(s, 0x30, 0x01)) }, false, "3", ""},
		{"envelope with an unknown field", hdr(sendPath, grpcCT, planner), func(s string) []byte { return whole(sendWith(s, 0xf8, 0x07, 0x01)) }, false, "3", ""},
		{"envelope sender not UTF-8", hdr(sendPath, grpcCT, planner), func(s string) []byte { return whole(sendWith(s, 0x32, 0x02, 0xff, 0xfe)) }, false, "3", ""},
		{"SendRequest with an unknown field", hdr(sendPath, grpcCT, planner), func(s string) []byte { return whole(append(send(s), 0x10, 0x01)) }, false, "3", ""},
		{"SessionStart payload with a field of the wrong wire type", hdr(sendPath, grpcCT, planner), func(s string) []byte {
			return whole(marshal(&macpv1.SendRequest{Envelope: envelope(s, append(append([]byte{}, start...), 0x0a, 0x01, 'x', 0x30, 0x01, 0x30, 0x02, 0x35, 0, 0, 0, 0))}))
		}, false, "ok=false INVALID_ENVELOPE", ""},
		// the control calls and the other methods go through the same gate
		{"CancelSession without credentials", hdr(service+"CancelSession", grpcCT, ""), func(s string) []byte { return whole(marshal(&macpv1.CancelSessionRequest{SessionId: s})) }, false, "16", ""},
		{"CancelSession naming no session", hdr(service+"CancelSession", grpcCT, planner), func(string) []byte { return whole(nil) }, false, "3", ""},
		{"SuspendSession with a field of the wrong wire type", hdr(service+"SuspendSession", grpcCT, planner), func(s string) []byte {
			return whole(append(marshal(&macpv1.SuspendSessionRequest{SessionId: s}), 0x10, 0x01))
		}, false, "3", ""},
		{"ResumeSession of a session that does not exist", hdr(service+"ResumeSession", grpcCT, planner), func(string) []byte {
			return whole(marshal(&macpv1.ResumeSessionRequest{SessionId: "6b1f0c9e-2d4a-4f6b-9c1e-ffffffffffff"}))
		}, false, "5", ""},
		// so do the reads and the policy registrations, decided on the relay
		// as on grpc-go
		{"GetSession without credentials", hdr(methodGet, grpcCT, ""), func(s string) []byte { return whole(marshal(&macpv1.GetSessionRequest{SessionId: s})) }, false, "16", ""},
		{"GetSession of a session that does not exist", hdr(methodGet, grpcCT, planner), func(string) []byte {
			return whole(marshal(&macpv1.GetSessionRequest{SessionId: "6b1f0c9e-2d4a-4f6b-9c1e-ffffffffffff"}))
		}, false, "5", ""},
		{"ListSessions without credentials", hdr(service+"ListSessions", grpcCT, ""), func(string) []byte { return whole(nil) }, false, "16", ""},
		// the runtime's own token ("v1:s-0001"); ext_authz, which cannot
		// page for the caller, passes it to the runtime
		{"ListSessions with a token Warden did not issue", hdr(service+"ListSessions", grpcCT, planner), func(string) []byte {
			return whole(marshal(&macpv1.ListSessionsRequest{PageToken: "djE6cy0wMDAx"}))
		}, false, "3", "0"},
		{"ListSessions with a negative page size", hdr(service+"ListSessions", grpcCT, planner), func(string) []byte { return whole(marshal(&macpv1.ListSessionsRequest{PageSize: -1})) }, false, "3", ""},
		{"RegisterPolicy without credentials", hdr(service+"RegisterPolicy", grpcCT, ""), func(string) []byte { return whole(nil) }, false, "16", ""},
		{"UnregisterPolicy without credentials", hdr(service+"UnregisterPolicy", grpcCT, "Basic cGxhbm5lcg=="), func(string) []byte { return whole(nil) }, false, "16", ""},
		{"discovery without credentials", hdr(service+"ListModes", grpcCT, ""), func(string) []byte { return whole(nil) }, false, "16", ""},
		{"wrong content type", hdr(sendPath, "application/json", planner), func(s string) []byte { return whole(send(s)) }, false, "3", "3"},
		{"unknown path", hdr(service+"Nope", grpcCT, planner), func(s string) []byte { return whole(send(s)) }, false, "12", ""},
		{"query string", hdr(sendPath+"?x=1", grpcCT, planner), func(s string) []byte { return whole(send(s)) }, false, "12", ""},
		{"upper-case path", hdr(service+"SEND", grpcCT, planner), func(s string) []byte { return whole(send(s)) }, false, "12", ""},
		{"escaped slash", hdr("/macp.v1.MACPRuntimeService%2FSend", grpcCT, planner), func(s string) []byte { return whole(send(s)) }, false, "12", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]rawAnswer{}
			for _, door := range doors {
				runtime, up := startFakeRuntime(t)
				call := openDoor(t, door, devEnforcer(t), up, maxMsg)
				a := call(t, tc.header, tc.body(sessionID()))
				got[door] = a
				if n := runtime.forwarded(); (n == 1) != tc.reaches || n > 1 {
					t.Errorf("%s: %d messages reached the runtime, want reaches=%v", door, n, tc.reaches)
				}
				switch w := a.GRPCStatus; {
				case door == "extauthz" && tc.envoy != "":
					if w != tc.envoy {
						t.Errorf("%s: %+v, want grpc-status %s", door, a, tc.envoy)
					}
				case door == "extauthz":
					if !equivalent(door, got[TransportRelay], a) {
						t.Errorf("ext_authz's answer is not the sidecar's equivalent:\nrelay    %+v\nextauthz %+v", got[TransportRelay], a)
					}
				case a.Ack != "":
					if w != "0" || a.Ack != tc.want {
						t.Errorf("%s: %+v, want status 0 and %s", door, a, tc.want)
					}
				case w != tc.want:
					t.Errorf("%s: %+v, want grpc-status %s", door, a, tc.want)
				}
			}
			t.Logf("grpc: %+v", got[TransportGRPC])
			if grpcDoorBuilt && got[TransportGRPC] != got[TransportRelay] {
				t.Errorf("the transports answer differently:\ngrpc  %+v\nrelay %+v", got[TransportGRPC], got[TransportRelay])
			}
		})
	}
}

// TestStalledRequest opens calls that send HEADERS and no message: a
// control call without credentials is refused before any body (it holds
// nothing), and a unary call from an authenticated client that sends
// nothing ends after body_timeout (CANCELLED from grpc-go, or the relay's
// RST_STREAM CANCEL), on both front doors.
func TestStalledRequest(t *testing.T) {
	hdr := func(path, auth string) []hpack.HeaderField {
		h := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
			{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}}
		if auth != "" {
			h = append(h, hpack.HeaderField{Name: "authorization", Value: auth})
		}
		return h
	}
	const timeout = 300 * time.Millisecond
	for _, transport := range transports {
		_, up := startFakeRuntime(t)
		addr := serveSidecar(t, devEnforcer(t), Config{Upstream: up, Transport: transport, Limits: listener.Limits{BodyTimeout: timeout}})
		for _, tc := range []struct {
			name, path, auth string
			unauthenticated  bool
		}{
			{"CancelSession without credentials", service + "CancelSession", "", true},
			{"CancelSession", service + "CancelSession", "Bearer planner", false},
			{"GetSession", service + "GetSession", "Bearer planner", false},
			{"Send", methodSend, "Bearer planner", false},
		} {
			start := time.Now()
			a := rawRequest(t, addr, hdr(tc.path, tc.auth), nil, false)
			took := time.Since(start)
			switch {
			case tc.unauthenticated:
				if a.GRPCStatus != "16" || took >= timeout {
					t.Errorf("%s %s: %+v after %v, want UNAUTHENTICATED at once", transport, tc.name, a, took)
				}
			case a.GRPCStatus != "1" && (transport == TransportGRPC || a.Reset != http2.ErrCodeCancel):
				t.Errorf("%s %s: %+v, want CANCELLED (or on the relay RST_STREAM CANCEL)", transport, tc.name, a)
			case took < timeout/2:
				t.Errorf("%s %s: ended after %v, before body_timeout", transport, tc.name, took)
			}
		}
	}
}

// flightCount counts the flights begun and ended.
type flightCount struct{ started, served atomic.Int64 }

func (c *flightCount) Decided(proxy.Decision, time.Duration) {}
func (c *flightCount) Requests(*proxy.Door) proxy.Requests   { return c }
func (c *flightCount) Started()                              { c.started.Add(1) }
func (c *flightCount) Served(proxy.Served)                   { c.served.Add(1) }

// TestRelayFlightsEnd: every call a front door admits ends its flight
// once (the requests metric counts it, the in-flight gauge drops): one
// answered, and one whose client sends HEADERS and no message, reset at
// body_timeout before it reaches the relay's Handle.
func TestRelayFlightsEnd(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			var fc flightCount
			_, up := startFakeRuntime(t)
			addr := serveSidecar(t, devEnforcerOpts(t, proxy.Options{Observer: &fc}, nil),
				Config{Upstream: up, Transport: transport, Limits: listener.Limits{BodyTimeout: timeout}})
			c := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(t, addr))
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer agent://planner")
			if _, err := c.GetSession(ctx, &macpv1.GetSessionRequest{SessionId: sessionID()}); status.Code(err) == codes.Unauthenticated {
				t.Fatal(err)
			}
			hdr := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodSend},
				{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
				{Name: "authorization", Value: "Bearer agent://planner"}}
			rawRequest(t, addr, hdr, nil, false)
			deadline := time.Now().Add(5 * time.Second)
			for fc.served.Load() != 2 || fc.started.Load() != 2 {
				if time.Now().After(deadline) {
					t.Fatalf("%d flights begun, %d ended; want 2 and 2", fc.started.Load(), fc.served.Load())
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// sessionSeq numbers the sessions sessionID names.
var sessionSeq atomic.Int64

// sessionID is a new version-4-shaped UUID, a session id the runtime takes.
func sessionID() string {
	return fmt.Sprintf("6b1f0c9e-2d4a-4f6b-9c1e-%012x", sessionSeq.Add(1))
}

// FuzzRelaySend sends arbitrary bodies as a Send through the relay front
// door with a valid credential: every one is answered with a gRPC status
// (never a hang or a dropped stream), and one reaches the runtime only when
// it is exactly one uncompressed SendRequest whose envelope the caller sent.
func FuzzRelaySend(f *testing.F) {
	runtime, up := startFakeRuntime(f)
	addr := serveSidecar(f, devEnforcer(f), Config{Upstream: up, Transport: TransportRelay, MaxMessageBytes: 4096})
	start, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	valid, _ := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: macp.TypeSessionStart,
		MessageId: "m1", SessionId: "6b1f0c9e-2d4a-4f6b-9c1e-3a5d7e9f1b2c", Sender: "planner", Payload: start}})
	f.Add(framed(valid, len(valid), 0))
	f.Add(framed(valid, len(valid), 1))
	f.Add(framed(valid[:7], len(valid), 0))
	f.Add(append(framed(valid, len(valid), 0), 0))
	f.Add([]byte{})
	f.Add(framed(nil, 5000, 0))
	header := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodSend},
		{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "authorization", Value: "Bearer planner"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := runtime.forwarded()
		a := rawCall(t, addr, header, body)
		if a.GRPCStatus == "" {
			t.Fatalf("answer without a gRPC status: %+v", a)
		}
		if runtime.forwarded() == before {
			return
		}
		msg, ok := grpcMessage(body)
		var sr macpv1.SendRequest
		// an envelope without a sender passes the sender binding
		// (proxy/macp/sessions refuses only a sender that is not the caller)
		if !ok || proto.Unmarshal(msg, &sr) != nil || sr.GetEnvelope() == nil || (sr.GetEnvelope().GetSender() != "planner" && sr.GetEnvelope().GetSender() != "") {
			t.Fatalf("%x reached the runtime", body)
		}
	})
}

// TestHandoff checks the identity fields' one owner: a grpc-go call's
// verified chain and address are its own connection's, never a client's
// copy of the fields, which are never left in the call's metadata.
func TestHandoff(t *testing.T) {
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	outer := peer.NewContext(context.Background(), &peer.Peer{Addr: client})
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		wantClient string
	}{
		{"from a client: its own address", outer, "127.0.0.1:4242"},
		{"no peer: none", context.Background(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := metadata.Pairs(chainHeader, "Zm9yZ2Vk", clientHeader, "203.0.113.66:1")
			chain, got := handoff{}.take(tc.ctx, md)
			if chain != nil || got != tc.wantClient || md[chainHeader] != nil || md[clientHeader] != nil {
				t.Errorf("take = %v, %q; metadata left %v", chain, got, md)
			}
		})
	}
	for _, name := range []string{chainHeader, clientHeader, principalHeader} {
		if !(handoff{}).owned(name) {
			t.Errorf("%s is not owned", name)
		}
	}
}

func TestConfigTransport(t *testing.T) {
	base := Config{Listen: "127.0.0.1:0", Upstream: "127.0.0.1:1", Plaintext: true}
	for _, tc := range []struct {
		transport, door string
		ok              bool
	}{{"", TransportRelay, true}, {"grpc", TransportGRPC, grpcDoorBuilt}, {"relay", TransportRelay, true}, {"h3", "h3", false}, {"Relay", "Relay", false}} {
		c := base
		c.Transport = tc.transport
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("transport %q: Validate() = %v, want ok=%v", tc.transport, err, tc.ok)
		}
		if got := c.FrontDoor(); got != tc.door {
			t.Errorf("transport %q: FrontDoor() = %q, want %q", tc.transport, got, tc.door)
		}
	}
}

// TestDefaultDoorIsRelay: a sidecar configured without a transport serves
// the relay front door (FrontDoor), not grpc-go: a unary call whose body
// never comes is reset (RST_STREAM CANCEL) after body_timeout, as only the
// relay does (grpc-go answers CANCELLED). Before, Serve read an empty
// transport as grpc while FrontDoor, the docs and the log said relay.
func TestDefaultDoorIsRelay(t *testing.T) {
	_, up := startFakeRuntime(t)
	addr := serveSidecar(t, devEnforcer(t), Config{Upstream: up, Limits: listener.Limits{BodyTimeout: 100 * time.Millisecond}})
	h := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodGet},
		{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "authorization", Value: "Bearer planner"}}
	if a := rawRequest(t, addr, h, nil, false); a.Reset != http2.ErrCodeCancel || a.GRPCStatus != "" {
		t.Errorf("a stalled GetSession on the default door: %+v, want the relay's RST_STREAM CANCEL", a)
	}
}

// TestRelayNotSentKeepsSession: a decided Send the relay could not send to
// the runtime at all (it is down: the dial fails, then backs off) leaves
// Warden's state alone, as errUpstreamFull does on the grpc-go path, rather
// than forgetting the session for a rebuild; the client is told to retry.
// The SessionStart before, settled by the runtime's Ack, needs no look-up.
func TestRelayNotSentKeepsSession(t *testing.T) {
	var rt *grpc.Server
	_, up := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return f }, func(s *grpc.Server) { rt = s })
	rb := noRebuild{exists: new(atomic.Int64)}
	enf := devEnforcerWith(t, rb) // with a rebuilder, or Warden forgets nothing
	fwd := forwardTCP(t, up)      // tells when the relay closed its runtime connection
	c := macpv1.NewMACPRuntimeServiceClient(startSidecarWith(t, enf, Config{Upstream: fwd.addr, Transport: TransportRelay}))
	start, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	req := &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: macp.TypeSessionStart,
		MessageId: "m1", SessionId: sessionID(), Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: start}}
	ctx, cancel := context.WithTimeout(as(context.Background(), "planner"), 10*time.Second)
	defer cancel()
	if resp, err := c.Send(ctx, req); err != nil || !resp.GetAck().GetOk() {
		t.Fatalf("SessionStart: %v %v", resp, err)
	}
	if n := enf.Sessions(); n != 1 {
		t.Fatalf("Warden tracks %d sessions, want 1", n)
	}
	if n := rb.exists.Load(); n != 0 {
		t.Errorf("a Send settled by the runtime's Ack looked the session up %d times, want none (Acked)", n)
	}
	rt.Stop()
	fwd.lis.Close() // the relay's next dial is refused
	// the relay saw its runtime connection end and closed it (a Send on it
	// before then may have reached the runtime, and rightly forgets)
	closed := make(chan struct{})
	go func() { fwd.conns.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the relay never closed its runtime connection after the runtime stopped")
	}
	for i := range 2 { // the failed dial, then the backoff
		_, err := c.Send(ctx, req) // the same message again: a duplicate, forwarded
		if status.Code(err) != codes.Unavailable {
			t.Errorf("Send %d with the runtime down: %v, want UNAVAILABLE", i, err)
		}
	}
	if n := enf.Sessions(); n != 1 {
		t.Errorf("after Sends that never reached the runtime Warden tracks %d sessions, want 1 (not forgotten)", n)
	}
}

// tcpForward forwards the TCP connections made to addr to an upstream;
// conns counts those the dialing side has not closed yet. The upstream
// closing its side is passed on as a half close (the dialer reads EOF).
type tcpForward struct {
	addr  string
	lis   net.Listener
	conns sync.WaitGroup
}

// forwardTCP forwards to up until the test ends.
func forwardTCP(t testing.TB, up string) *tcpForward {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	f := &tcpForward{addr: lis.Addr().String(), lis: lis}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", up)
			if err != nil {
				c.Close()
				continue
			}
			f.conns.Add(1)
			go func() {
				_, _ = io.Copy(u, c) // until the dialer closes
				u.Close()
				c.Close()
				f.conns.Done()
			}()
			go func() {
				_, _ = io.Copy(c, u) // until the upstream closes
				_ = c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return f
}

// noRebuild is a Rebuilder that knows no session and counts the look-ups.
type noRebuild struct{ exists *atomic.Int64 }

func (noRebuild) Rebuild(context.Context, string, *macp.Governance) (*macp.Session, error) {
	return nil, nil
}
func (r noRebuild) Exists(context.Context, string) (bool, error) {
	r.exists.Add(1)
	return false, nil
}

// TestRelayHeldStreamsShareNothing: 17 authenticated clients each hold 128
// CancelSession calls open without a body, more streams than 16 in-process
// connections take; another client's GetSession is still answered (before,
// the in-process pool's 16 connections were full and it was refused).
func TestRelayHeldStreamsShareNothing(t *testing.T) {
	_, up := startFakeRuntime(t)
	addr := serveSidecar(t, devEnforcer(t), Config{Upstream: up, Transport: TransportRelay})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: service + "CancelSession"},
		{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}, {Name: "authorization", Value: "Bearer mallory"}} {
		_ = enc.WriteField(f)
	}
	for range 17 {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = nc.Write([]byte(http2.ClientPreface))
		fr := http2.NewFramer(nc, nc)
		_ = fr.WriteSettings()
		for id := uint32(1); id < 256; id += 2 {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
		}
		go func() { _, _ = io.Copy(io.Discard, nc) }() // read what the relay sends, never answer
	}
	time.Sleep(time.Second) // the held calls reach the in-process sidecar
	c := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(t, addr))
	ctx, cancel := context.WithTimeout(as(context.Background(), "planner"), 10*time.Second)
	defer cancel()
	_, err := c.GetSession(ctx, &macpv1.GetSessionRequest{SessionId: sessionID()})
	if status.Code(err) != codes.NotFound {
		t.Errorf("GetSession beside 2,176 held calls: %v, want NOT_FOUND (answered)", err)
	}
}

// TestRelayAnswersItself: through the relay front door, every unary call
// of the runtime (Send, the control calls, GetSession, ListSessions, the
// policy registrations, the calls forwarded after authentication), allowed
// or refused, and the health service's Check are answered by the relay
// itself: the grpc-go sidecar behind it receives none of them (before, it
// received every one but a well-formed Send). An unknown path still goes
// to it.
func TestRelayAnswersItself(t *testing.T) {
	_, up := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer {
		return policyRuntime{f, &sync.Mutex{}, map[string]bool{}}
	}, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()); reflection.Register(s) })
	_, addr := serveSidecarServer(t, devEnforcer(t), Config{Upstream: up, Transport: TransportRelay})
	conn := startSidecarConn(t, addr)
	c := macpv1.NewMACPRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	planner, mallory := as(ctx, "planner"), as(ctx, "mallory")
	sid := sessionID()
	start, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	send := &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: macp.TypeSessionStart,
		MessageId: "m-" + sid, SessionId: sid, Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: start}}
	policy := &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{PolicyId: "policy.p", Mode: "macp.mode.decision.v1", Rules: `{}`, SchemaVersion: 1}}
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"Send", func() error { _, err := c.Send(planner, send); return err }, codes.OK},
		{"Send without credentials", func() error { _, err := c.Send(ctx, send); return err }, codes.Unauthenticated},
		{"GetSession", func() error { _, err := c.GetSession(planner, &macpv1.GetSessionRequest{SessionId: sid}); return err }, codes.OK},
		{"GetSession, gzip", func() error {
			_, err := c.GetSession(planner, &macpv1.GetSessionRequest{SessionId: sid}, grpc.UseCompressor("gzip"))
			return err
		}, codes.OK},
		{"GetSession, outsider", func() error { _, err := c.GetSession(mallory, &macpv1.GetSessionRequest{SessionId: sid}); return err }, codes.NotFound},
		{"GetSession without credentials", func() error { _, err := c.GetSession(ctx, &macpv1.GetSessionRequest{SessionId: sid}); return err }, codes.Unauthenticated},
		{"ListSessions", func() error { _, err := c.ListSessions(planner, &macpv1.ListSessionsRequest{}); return err }, codes.OK},
		{"ListSessions, a foreign token", func() error {
			_, err := c.ListSessions(planner, &macpv1.ListSessionsRequest{PageToken: "djE6cy0wMDAx"})
			return err
		}, codes.InvalidArgument},
		{"SuspendSession", func() error {
			_, err := c.SuspendSession(planner, &macpv1.SuspendSessionRequest{SessionId: sid})
			return err
		}, codes.OK},
		{"ResumeSession, outsider", func() error {
			_, err := c.ResumeSession(mallory, &macpv1.ResumeSessionRequest{SessionId: sid})
			return err
		}, codes.NotFound},
		{"ResumeSession", func() error {
			_, err := c.ResumeSession(planner, &macpv1.ResumeSessionRequest{SessionId: sid})
			return err
		}, codes.OK},
		{"CancelSession", func() error {
			_, err := c.CancelSession(planner, &macpv1.CancelSessionRequest{SessionId: sid})
			return err
		}, codes.OK},
		{"RegisterPolicy", func() error { _, err := c.RegisterPolicy(planner, policy); return err }, codes.OK},
		{"UnregisterPolicy", func() error {
			_, err := c.UnregisterPolicy(planner, &macpv1.UnregisterPolicyRequest{PolicyId: "policy.p"})
			return err
		}, codes.OK},
		// the runtime's other unary methods, forwarded after authentication
		// (the fake runtime implements none of them)
		{"GetPolicy", func() error {
			_, err := c.GetPolicy(planner, &macpv1.GetPolicyRequest{PolicyId: "policy.p"})
			return err
		}, codes.Unimplemented},
		{"ListModes", func() error { _, err := c.ListModes(planner, &macpv1.ListModesRequest{}); return err }, codes.Unimplemented},
		{"ListModes without credentials", func() error { _, err := c.ListModes(ctx, &macpv1.ListModesRequest{}); return err }, codes.Unauthenticated},
		// the watches: the runtime's stream, filtered (the fake runtime
		// implements neither)
		{"WatchSessions", func() error { return firstOf(c.WatchSessions(planner, &macpv1.WatchSessionsRequest{})) }, codes.Unimplemented},
		{"WatchSignals", func() error { return firstOf(c.WatchSignals(planner, &macpv1.WatchSignalsRequest{})) }, codes.Unimplemented},
		// the runtime's answer to a decided message (this fake runtime
		// implements no StreamSession)
		{"StreamSession", func() error {
			st, err := c.StreamSession(planner)
			if err == nil {
				err = st.Send(&macpv1.StreamSessionRequest{Envelope: send.Envelope})
			}
			if st != nil && (err == nil || errors.Is(err, io.EOF)) {
				// Send's io.EOF: the call already ended (grpc-go), its
				// status is Recv's
				_, err = st.Recv()
			}
			return err
		}, codes.Unimplemented},
		{"StreamSession without credentials", func() error {
			st, err := c.StreamSession(ctx)
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, codes.Unauthenticated},
		{"WatchPolicies", func() error { return firstOf(c.WatchPolicies(planner, &macpv1.WatchPoliciesRequest{})) }, codes.Unimplemented},
		{"WatchRoots without credentials", func() error { return firstOf(c.WatchRoots(ctx, &macpv1.WatchRootsRequest{})) }, codes.Unauthenticated},
		{"WatchSignals without credentials", func() error { return firstOf(c.WatchSignals(ctx, &macpv1.WatchSignalsRequest{})) }, codes.Unauthenticated},
		{"health Watch", func() error {
			w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			r, err := w.Recv()
			if err == nil && r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("status %v", r.GetStatus())
			}
			return err
		}, codes.OK},
		{"health Check", func() error {
			r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err == nil && r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("status %v", r.GetStatus())
			}
			return err
		}, codes.OK},
	} {
		if err := tc.call(); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// what no gRPC client of the runtime sends: the relay answers it as
	// grpc-go does (TestOddRequestsOnBothDoors compares the two doors)
	if err := conn.Invoke(planner, service+"Nope", &macpv1.GetSessionRequest{}, &macpv1.GetSessionResponse{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("an unknown path: %v, want UNIMPLEMENTED", err)
	}
	rst, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err == nil {
		err = rst.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	}
	if err == nil {
		_, err = rst.Recv()
	}
	if err != nil {
		t.Errorf("reflection: %v", err)
	}
	hdr := func(method, path string) []hpack.HeaderField {
		return []hpack.HeaderField{{Name: ":method", Value: method}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
			{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "authorization", Value: "Bearer planner"}}
	}
	get, _ := proto.Marshal(&macpv1.GetSessionRequest{SessionId: sid})
	for _, tc := range []struct {
		name   string
		header []hpack.HeaderField
		body   []byte
		want   string
	}{
		{"GetSession, two messages", hdr("POST", methodGet), append(framed(get, len(get), 0), framed(get, len(get), 0)...), "13"},
		{"CancelSession without a message", hdr("POST", service+"CancelSession"), nil, "13"},
		{"Send, compressed", hdr("POST", methodSend), framed(get, len(get), 1), "13"},
		{"GET", hdr("GET", methodGet), framed(get, len(get), 0), "13"},
		{"malformed method name", hdr("POST", "/Send"), nil, "12"},
	} {
		if a, _ := rawExchange(t, addr, tc.header, tc.body); a.GRPCStatus != tc.want {
			t.Errorf("%s: %+v, want grpc-status %s", tc.name, a, tc.want)
		}
	}
	// with public discovery, a discovery call without credentials is
	// forwarded by the relay as well (the runtime's UNIMPLEMENTED here)
	_, pubAddr := serveSidecarServer(t, devEnforcer(t), Config{Upstream: up, Transport: TransportRelay, PublicDiscovery: true})
	_, err = macpv1.NewMACPRuntimeServiceClient(startSidecarConn(t, pubAddr)).ListModes(ctx, &macpv1.ListModesRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("public ListModes without credentials: %v; want the runtime's UNIMPLEMENTED from the relay", err)
	}
}

// firstOf is how a server-streaming call's first answer ends: nil when a
// message came, or the call's status.
func firstOf[T any](w interface{ Recv() (T, error) }, err error) error {
	if err != nil {
		return err
	}
	_, err = w.Recv()
	return err
}

// FuzzRelayUnary sends arbitrary bodies as the calls of one message the
// relay answers besides Send, as an outsider of the one session the runtime
// holds: every one is answered with a gRPC status (never a hang or a
// dropped stream), and none shows the session: GetSession never succeeds
// and ListSessions lists nothing.
func FuzzRelayUnary(f *testing.F) {
	runtime, up := startFakeRuntime(f)
	sid := sessionID()
	runtime.sessions[sid] = &fakeSession{meta: &macpv1.SessionMetadata{SessionId: sid, Initiator: "planner", Participants: []string{"planner", "worker"}}}
	addr := serveSidecar(f, devEnforcer(f), Config{Upstream: up, Transport: TransportRelay, MaxMessageBytes: 4096})
	methods := []string{"GetSession", "ListSessions", "CancelSession", "SuspendSession", "ResumeSession", "RegisterPolicy", "UnregisterPolicy"}
	get, _ := proto.Marshal(&macpv1.GetSessionRequest{SessionId: sid})
	list, _ := proto.Marshal(&macpv1.ListSessionsRequest{PageSize: 1})
	f.Add(uint8(0), framed(get, len(get), 0))
	f.Add(uint8(1), framed(list, len(list), 0))
	f.Add(uint8(2), framed(get, len(get), 0)) // {session_id} is field 1 of the control requests too
	f.Add(uint8(0), framed(get[:3], len(get), 0))
	f.Add(uint8(1), []byte{})
	f.Add(uint8(5), framed(nil, 5000, 0))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		method := methods[int(which)%len(methods)]
		header := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: service + method},
			{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "authorization", Value: "Bearer mallory"}}
		a, data := rawExchange(t, addr, header, body)
		if a.GRPCStatus == "" {
			t.Fatalf("%s: answer without a gRPC status: %+v", method, a)
		}
		switch {
		case method == "GetSession" && a.GRPCStatus == "0":
			t.Fatalf("GetSession %x: the outsider was shown a session", body)
		case method == "ListSessions" && a.GRPCStatus == "0":
			var out macpv1.ListSessionsResponse
			msg, ok := grpcMessage(data)
			if !ok || proto.Unmarshal(msg, &out) != nil || len(out.GetSessions()) > 0 {
				t.Fatalf("ListSessions %x: the outsider was listed %v", body, out.GetSessions())
			}
		}
	})
}

// failRebuild is a Rebuilder whose look-ups of the runtime all fail.
type failRebuild struct{}

func (failRebuild) Rebuild(context.Context, string, *macp.Governance) (*macp.Session, error) {
	return nil, errors.New("the runtime is unreachable")
}
func (failRebuild) Exists(context.Context, string) (bool, error) {
	return false, errors.New("the runtime is unreachable")
}

// TestUndecidedOnBothDoors: a Send and a control call Warden cannot decide
// (the session is unknown and its rebuild from the runtime fails) are
// refused alike on both sidecar doors: UNAVAILABLE, retryable, with
// macp-error-code INTERNAL. Before, the relay's Send answered without the
// macp-error-code (the refusal's code was set as a grpc-go trailer the
// relay never sent).
func TestUndecidedOnBothDoors(t *testing.T) {
	hdr := func(method string) []hpack.HeaderField {
		return []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: service + method},
			{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
			{Name: "authorization", Value: "Bearer planner"}}
	}
	msg := func(m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		return framed(b, len(b), 0)
	}
	sid := sessionID()
	calls := map[string][]byte{
		"Send": msg(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "TaskRequest",
			MessageId: "m1", SessionId: sid, Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: []byte("{}")}}),
		"CancelSession": msg(&macpv1.CancelSessionRequest{SessionId: sid}),
	}
	for method, body := range calls {
		got := map[string]rawAnswer{}
		for _, transport := range transports {
			_, up := startFakeRuntime(t)
			addr := serveSidecar(t, devEnforcerWith(t, failRebuild{}), Config{Upstream: up, Transport: transport})
			a := rawCall(t, addr, hdr(method), body)
			if a.GRPCStatus != "14" || a.MACP != string(rules.CodeInternal) {
				t.Errorf("%s on %s: %+v, want UNAVAILABLE with macp-error-code INTERNAL", method, transport, a)
			}
			got[transport] = a
		}
		if grpcDoorBuilt && got[TransportGRPC] != got[TransportRelay] {
			t.Errorf("%s: the doors answer differently:\ngrpc  %+v\nrelay %+v", method, got[TransportGRPC], got[TransportRelay])
		}
	}
}

package test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestMACPOddRequestsOnBothDoors sends bin/warden, in front of the real
// runtime, what no MACP SDK sends: other HTTP methods and content types,
// malformed paths and headers, bodies that are not one message for a call
// of one, compressed bodies (gzip, which bin/warden's grpc-go has a
// compressor for, and deflate, which it has not), broken framing on
// StreamSession, reflection and health. Both doors answer each alike (the
// relay now answers all of them itself; before, it handed them to a grpc-go
// server in process), and every answer is a gRPC status.
func TestMACPOddRequestsOnBothDoors(t *testing.T) {
	msg := func(m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		return grpcFramed(b, 0)
	}
	gzipped := func(m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(b)
		_ = w.Close()
		return grpcFramed(z.Bytes(), 1)
	}
	sid := newSession()
	get := msg(&macpv1.GetSessionRequest{SessionId: sid})
	type request struct {
		method, path string
		extra        []hpack.HeaderField
		body         []byte
	}
	ct := func(v string) hpack.HeaderField { return hpack.HeaderField{Name: "content-type", Value: v} }
	enc := func(v string) hpack.HeaderField { return hpack.HeaderField{Name: "grpc-encoding", Value: v} }
	cases := map[string]request{
		"GET":                                  {"GET", macpService + "GetSession", nil, get},
		"JSON":                                 {"POST", macpService + "GetSession", []hpack.HeaderField{ct("application/json")}, get},
		"grpc+json":                            {"POST", macpService + "GetSession", []hpack.HeaderField{ct("application/grpc+json")}, get},
		"malformed grpc-timeout":               {"POST", macpService + "GetSession", []hpack.HeaderField{{Name: "grpc-timeout", Value: "9x"}}, get},
		"unknown method":                       {"POST", macpService + "Nope", nil, get},
		"malformed method name":                {"POST", "/Send", nil, get},
		"GetSession, two messages":             {"POST", macpService + "GetSession", nil, append(slices.Clone(get), get...)},
		"GetSession, gzip":                     {"POST", macpService + "GetSession", []hpack.HeaderField{enc("gzip")}, gzipped(&macpv1.GetSessionRequest{SessionId: sid})},
		"GetSession, deflate":                  {"POST", macpService + "GetSession", []hpack.HeaderField{enc("deflate")}, get},
		"GetSession, compressed flag":          {"POST", macpService + "GetSession", nil, grpcFramed(get[5:], 1)},
		"CancelSession, no message":            {"POST", macpService + "CancelSession", nil, nil},
		"ListSessions, cut":                    {"POST", macpService + "ListSessions", nil, get[:4]},
		"ListModes, two messages":              {"POST", macpService + "ListModes", nil, append(grpcFramed(nil, 0), grpcFramed(nil, 0)...)},
		"WatchSessions, no message":            {"POST", macpService + "WatchSessions", nil, nil},
		"WatchSignals, two messages":           {"POST", macpService + "WatchSignals", nil, append(grpcFramed(nil, 0), grpcFramed(nil, 0)...)},
		"StreamSession, compressed flag":       {"POST", macpService + "StreamSession", nil, grpcFramed(nil, 1)},
		"StreamSession, payload format 9":      {"POST", macpService + "StreamSession", nil, grpcFramed(nil, 9)},
		"health Check":                         {"POST", "/grpc.health.v1.Health/Check", nil, msg(&healthpb.HealthCheckRequest{})},
		"health Check, no message":             {"POST", "/grpc.health.v1.Health/Check", nil, nil},
		"reflection":                           {"POST", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", nil, grpcFramed([]byte{0x3a, 0x00}, 0)},
		"reflection v1alpha, two messages":     {"POST", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", nil, append(grpcFramed([]byte{0x3a, 0x00}, 0), grpcFramed([]byte{0x3a, 0x00}, 0)...)},
		"an unknown service, gzip":             {"POST", "/foo.Bar/Baz", []hpack.HeaderField{enc("gzip")}, get},
		"no credentials, malformed body":       {"POST", macpService + "GetSession", []hpack.HeaderField{{Name: "authorization", Value: ""}}, []byte{1, 2}},
		"a second slash before a known method": {"POST", "/" + macpService + "Send", nil, get},
	}
	// (no broken framing on reflection: the runtime implements none and
	// answers at once, so which of its answer and the framing error ends
	// the call is a race on either door; proxy/macp TestOddRequestsOnBothDoors
	// has it against a runtime that serves reflection)
	got := map[string]map[string]string{}
	eachTransport(t, func(t *testing.T) {
		addr := startWarden(t, startRuntime(t), "--auth", "dev", "--insecure-dev-auth")
		answers := map[string]string{}
		for name, r := range cases {
			h := []hpack.HeaderField{{Name: ":method", Value: r.method}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: r.path},
				{Name: ":authority", Value: "warden"}}
			if !slices.ContainsFunc(r.extra, func(f hpack.HeaderField) bool { return f.Name == "content-type" }) {
				h = append(h, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
			}
			if !slices.ContainsFunc(r.extra, func(f hpack.HeaderField) bool { return f.Name == "authorization" }) {
				h = append(h, hpack.HeaderField{Name: "authorization", Value: "Bearer planner"})
			}
			for _, f := range r.extra {
				if f.Value != "" {
					h = append(h, f)
				}
			}
			a := oddExchange(t, addr, h, r.body)
			if a.grpcStatus == "" {
				t.Errorf("%s: %s answered without a gRPC status: %+v", name, wardenTransport, a)
			}
			answers[name] = fmt.Sprintf("%+v", a)
		}
		got[wardenTransport] = answers
	})
	g, r := got["grpc"], got["relay"]
	if len(g) != len(cases) || len(r) != len(cases) {
		t.Fatal("a door's requests did not all run")
	}
	for name := range cases {
		t.Logf("%-40s %s", name, g[name])
		if g[name] != r[name] {
			t.Errorf("%s:\n grpc  %s\n relay %s", name, g[name], r[name])
		}
	}
}

// oddDecisionID is the part of an answer's message that differs per decision.
var oddDecisionID = regexp.MustCompile(`warden decision [0-9a-zA-Z-]+`)

// oddAnswer is what a client saw of an answer: its HTTP and gRPC status,
// its message (unescaped, the decision id cut), macp-error-code, and
// whether it carried a message.
type oddAnswer struct {
	status, grpcStatus, grpcMessage, macpCode string
	data                                      bool
}

// oddExchange sends one request on a connection of its own, its body in
// one DATA frame that ends it, and reads the answer.
func oddExchange(t *testing.T, addr string, header []hpack.HeaderField, body []byte) oddAnswer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	var hb bytes.Buffer
	e := hpack.NewEncoder(&hb)
	for _, f := range header {
		_ = e.WriteField(f)
	}
	_, _ = nc.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: len(body) == 0})
	if len(body) > 0 {
		_ = fr.WriteData(1, true, body)
	}
	var a oddAnswer
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
					a.status = hf.Value
				case "grpc-status":
					a.grpcStatus = hf.Value
				case "grpc-message":
					m, _ := url.PathUnescape(hf.Value)
					a.grpcMessage = oddDecisionID.ReplaceAllString(m, "warden decision ID")
				case "macp-error-code":
					a.macpCode = hf.Value
				}
			}
			if f.StreamEnded() {
				return a
			}
		case *http2.DataFrame:
			a.data = a.data || len(f.Data()) > 0
			if f.StreamEnded() {
				return a
			}
		case *http2.RSTStreamFrame:
			return a
		case *http2.GoAwayFrame:
			return a
		}
	}
}

// grpcFramed is b as one gRPC message with the flag byte flag.
func grpcFramed(b []byte, flag byte) []byte {
	out := make([]byte, 5, 5+len(b))
	out[0] = flag
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

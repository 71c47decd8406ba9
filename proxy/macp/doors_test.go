package macp

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules"
)

// doors are MACP's front doors: the sidecar's (transports: the relay, and
// the grpc-go door where the oracle is built) and Envoy's ext_authz (whose
// allowed requests the test forwards to the runtime as Envoy would). Every
// door table runs on each.
var doors = append(builtDoors(), "extauthz")

// doorCall sends one request, header list and body, through a door.
type doorCall func(t *testing.T, header []hpack.HeaderField, body []byte) rawAnswer

// openDoor serves door in front of the runtime at up, deciding with enf.
func openDoor(t *testing.T, door string, enf *sessions.Decider, up string, maxMsg int) doorCall {
	t.Helper()
	// The door table compares how each door answers the same request; the
	// calls ext_authz refuses by default because it cannot see their answers
	// or later messages (StreamSession, the session reads) are opted in here,
	// and that default is tested in proxy/extauthz (TestUnseenCalls).
	return openDoorWith(t, door, enf, up, maxMsg, extauthz.Config{Listen: "127.0.0.1:0", AllowStreamSession: true, AllowUnfilteredReads: true})
}

// openDoorWith is openDoor, ext_authz configured as xcfg.
func openDoorWith(t *testing.T, door string, enf *sessions.Decider, up string, maxMsg int, xcfg extauthz.Config) doorCall {
	t.Helper()
	if door != "extauthz" {
		addr := serveSidecar(t, enf, Config{Upstream: up, Transport: door, MaxMessageBytes: maxMsg})
		return func(t *testing.T, header []hpack.HeaderField, body []byte) rawAnswer {
			return rawCall(t, addr, header, body)
		}
	}
	srv, err := extauthz.New(xcfg, enf, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(up, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func(t *testing.T, header []hpack.HeaderField, body []byte) rawAnswer {
		return envoyCall(t, srv, conn, header, body)
	}
}

// envoyCall is what a client of Envoy sees for one request whose body
// Envoy buffered (with_request_body, pack_as_bytes): ext_authz's denial, or
// the runtime's answer to the request it allowed.
func envoyCall(t *testing.T, srv *extauthz.Server, up *grpc.ClientConn, header []hpack.HeaderField, body []byte) rawAnswer {
	t.Helper()
	h := &authv3.AttributeContext_HttpRequest{Headers: map[string]string{}, RawBody: body}
	for _, f := range header {
		switch f.Name {
		case ":method":
			h.Method = f.Value
		case ":path":
			h.Path = f.Value
		default:
			if v, ok := h.Headers[f.Name]; ok {
				h.Headers[f.Name] = v + "," + f.Value
			} else {
				h.Headers[f.Name] = f.Value
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := srv.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: h}}})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if denied := resp.GetDeniedResponse(); denied != nil {
		a := rawAnswer{Status: strconv.Itoa(int(denied.GetStatus().GetCode()))}
		for _, hv := range denied.GetHeaders() {
			switch v := hv.GetHeader().GetValue(); hv.GetHeader().GetKey() {
			case "grpc-status":
				a.GRPCStatus = v
			case "grpc-message":
				a.GRPCMessage = decisionID.ReplaceAllString(decodeGRPCMessage(v), "warden decision ID")
			case "macp-error-code":
				a.MACP = v
			}
		}
		return a
	}
	msg, ok := grpcMessage(body)
	if !ok {
		t.Fatalf("ext_authz allowed a body that is not one gRPC message: %x", body)
	}
	out := &frame{}
	var trailer metadata.MD
	if err := up.Invoke(ctx, h.Path, &frame{b: msg}, out, grpc.Trailer(&trailer)); err != nil {
		st := status.Convert(err)
		a := rawAnswer{Status: "200", GRPCStatus: strconv.Itoa(int(st.Code())), GRPCMessage: st.Message()}
		if v := trailer.Get("macp-error-code"); len(v) > 0 {
			a.MACP = v[0]
		}
		return a
	}
	return rawAnswer{Status: "200", GRPCStatus: "0"}.withAck(t, framed(out.b, len(out.b), 0))
}

// equivalent reports whether a door's answer is the equivalent on its wire
// of the grpc-go sidecar's (ref): the relay answers byte for byte the same;
// ext_authz, which cannot answer with an Ack, refuses with the status of
// the Ack's MACP code, and Warden's own refusals carry the same code and
// text everywhere.
func equivalent(door string, ref, got rawAnswer) bool {
	if door != "extauthz" || ref == got {
		return ref == got
	}
	if ok, code, found := strings.Cut(ref.Ack, " "); found && ok == "ok=false" {
		want := rules.Code(code)
		return got.GRPCStatus == strconv.Itoa(int(want.GRPCStatus())) && got.MACP == code && got.Ack == ""
	}
	if ref.Ack != "" || ref.GRPCStatus != got.GRPCStatus || ref.MACP != got.MACP {
		return false
	}
	return ref.MACP == "" && ref.GRPCMessage != "" || ref.GRPCMessage == got.GRPCMessage
}

package extauthz

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// frame prefixes a message as gRPC does on the wire.
func frame(b []byte) []byte {
	out := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(b)))
	copy(out[5:], b)
	return out
}

// checkRequest builds a CheckRequest as Envoy's ext_authz filter does with
// with_request_body and pack_as_bytes.
func checkRequest(path, bearer string, body []byte) *authv3.CheckRequest {
	headers := map[string]string{":authority": "runtime", ":method": "POST", ":path": path, "content-type": "application/grpc", "te": "trailers"}
	if bearer != "" {
		headers["authorization"] = "Bearer " + bearer
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
		Method: "POST", Path: path, Host: "runtime", Protocol: "HTTP/2", Headers: headers, RawBody: body,
	}}}}
}

// marked is r with header k set to v.
func marked(r *authv3.CheckRequest, k, v string) *authv3.CheckRequest {
	r.GetAttributes().GetRequest().GetHttp().GetHeaders()[k] = v
	return r
}

// toRequest turns a transcript step into what Envoy would send.
func toRequest(t testing.TB, st replay.Step) *authv3.CheckRequest {
	r := st.Request
	var path string
	var msg proto.Message
	if r.Op != "" {
		path, msg = service+r.Op, &macpv1.CancelSessionRequest{SessionId: r.SessionID}
	} else {
		path, msg = service+"Send", &macpv1.SendRequest{Envelope: r.Envelope}
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return checkRequest(path, r.Credentials.Bearer, frame(b))
}

// decision reads a CheckResponse back into a Decision.
func decision(resp *authv3.CheckResponse) proxy.Decision {
	d := proxy.Decision{Allow: resp.GetStatus().GetCode() == int32(code.Code_OK)}
	if dr := resp.GetDeniedResponse(); dr != nil {
		for _, h := range dr.GetHeaders() {
			if h.GetHeader().GetKey() == "macp-error-code" {
				d.Code = rules.Code(h.GetHeader().GetValue())
			}
		}
		d.Message = resp.GetStatus().GetMessage()
	}
	return d
}

// TestTranscriptsThroughCheck replays the spec's conformance fixtures and
// Warden's attack transcripts through Check with requests built as Envoy
// builds them: every decision must equal the standalone sidecar's.
func TestTranscriptsThroughCheck(t *testing.T) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := replay.Transcripts("../../testdata/macp/conformance", "../../test/conformance", "../../test/attacks/macp")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 60 {
		t.Fatalf("found %d transcripts", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			tr, err := replay.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			clock := time.Time{}
			enf, err := replay.NewEnforcer(engine, tr, func() time.Time { return clock })
			if err != nil {
				t.Fatal(err)
			}
			srv, err := New(Config{Listen: "unused"}, enf, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := replay.Evaluate(ctx, tr, func(ctx context.Context, st replay.Step) (proxy.Decision, error) {
				clock = st.At
				resp, err := srv.Check(ctx, toRequest(t, st))
				if err != nil {
					return proxy.Decision{}, err
				}
				return decision(resp), nil
			}, func() (*macp.Session, error) { return enf.Session(ctx, tr.SessionID) })
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range res.Failures {
				t.Error(f)
			}
		})
	}
}

func TestMalformedChecks(t *testing.T) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tr := &replay.Transcript{Name: "x"}
	enf, err := replay.NewEnforcer(engine, tr, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listen: "unused"}, enf, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "TaskUpdate", MessageId: "m", SessionId: "s", Sender: "a"}})
	compressed := frame(env)
	compressed[0] = 1
	tests := []struct {
		name    string
		req     *authv3.CheckRequest
		allowed bool
		code    rules.Code
		http    int32
	}{
		{"no http attributes", &authv3.CheckRequest{}, false, "", 400},
		{"not gRPC", &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Path: "/x", Headers: map[string]string{"content-type": "text/html"}}}}}, false, "", 415},
		{"body not buffered", checkRequest(service+"Send", "a", nil), false, "", 200},                          // a framing error: INTERNAL, no MACP code, as grpc-go,
		{"compressed frame", checkRequest(service+"Send", "a", compressed), false, "", 200},                    // a framing error: INTERNAL, no MACP code, as grpc-go,
		{"truncated frame", checkRequest(service+"Send", "a", frame(env)[:len(env)]), false, "", 200},          // a framing error: INTERNAL, no MACP code, as grpc-go,
		{"two messages", checkRequest(service+"Send", "a", append(frame(env), frame(env)...)), false, "", 200}, // a framing error: INTERNAL, no MACP code, as grpc-go,
		{"a whole frame marked partial (decoded before)", marked(checkRequest(service+"Send", "a", frame(env)), "x-envoy-auth-partial-body", "true"), false, "", 200},
		{"a whole frame, a longer body announced (decoded before)", marked(checkRequest(service+"Send", "a", frame(env)), "content-length", strconv.Itoa(2*len(frame(env)))), false, "", 200},
		{"garbage message", checkRequest(service+"Send", "a", frame([]byte{0xff, 0xff})), false, rules.CodeInvalidEnvelope, 200},
		{"unknown session", checkRequest(service+"Send", "a", frame(env)), false, rules.CodeSessionNotFound, 200},
		{"stream without credentials", checkRequest(service+"StreamSession", "", nil), false, rules.CodeUnauthenticated, 200},
		{"stream with credentials", checkRequest(service+"StreamSession", "a", nil), false, rules.CodeForbidden, 200}, // TestUnseenCalls
		{"discovery without credentials", checkRequest(service+"ListModes", "", frame(nil)), false, rules.CodeUnauthenticated, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Check(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			d := decision(resp)
			if d.Allow != tc.allowed || d.Code != tc.code {
				t.Fatalf("allow=%v code=%q (%s), want allow=%v code=%q", d.Allow, d.Code, d.Message, tc.allowed, tc.code)
			}
			if dr := resp.GetDeniedResponse(); dr != nil && int32(dr.GetStatus().GetCode()) != tc.http {
				t.Fatalf("HTTP status %d, want %d", dr.GetStatus().GetCode(), tc.http)
			}
			if ok := resp.GetOkResponse(); ok != nil && (len(ok.GetHeaders()) != 1 || ok.GetHeaders()[0].GetHeader().GetValue() != "a") {
				t.Fatalf("allowed without the principal header: %v", ok.GetHeaders())
			}
		})
	}
}

// BenchmarkCheck measures Check for a denied MACP Send and an allowed one.
// ext_authz commits on allow, so after the first iteration the allowed
// TaskUpdate is a retransmission (answered as a duplicate); BenchmarkEnforce
// in package proxy measures first-time allows.
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		b.Fatal(err)
	}
	tr, err := replay.Load("../../test/attacks/macp/task_update_by_requester.json")
	if err != nil {
		b.Fatal(err)
	}
	clock := time.Time{}
	enf, err := replay.NewEnforcer(engine, tr, func() time.Time { return clock })
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := New(Config{Listen: "unused"}, enf, nil)
	var allowReq, denyReq *authv3.CheckRequest
	for _, st := range tr.Steps {
		clock = st.At
		resp, err := srv.Check(ctx, toRequest(b, st))
		if err != nil {
			b.Fatal(err)
		}
		if st.Type == "TaskAccept" && decision(resp).Allow {
			break // the worker is now the active assignee
		}
	}
	for _, st := range tr.Steps {
		if st.Type == "TaskUpdate" && st.Sender == "agent://planner" && denyReq == nil {
			denyReq = toRequest(b, st)
		}
		if st.Type == "TaskUpdate" && st.Sender == "agent://worker" {
			allowReq = toRequest(b, st)
		}
	}
	for name, r := range map[string]*authv3.CheckRequest{"Send/allow-retransmitted": allowReq, "Send/deny": denyReq} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := srv.Check(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFrontDoor: what ext_authz decides as gRPC, and what it passes upstream
// as identity, whatever the request is framed as.
func TestFrontDoor(t *testing.T) {
	ctx := context.Background()
	// streams opted in: the rows below read credentials on a StreamSession
	srv := newServer(t, Config{Listen: "unused", MCP: true, PublicDiscovery: true, AllowStreamSession: true})
	send, _ := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "TaskUpdate", MessageId: "m", SessionId: "s", Sender: "a"}})
	with := func(r *authv3.CheckRequest, f func(h *authv3.AttributeContext_HttpRequest)) *authv3.CheckRequest {
		f(r.GetAttributes().GetRequest().GetHttp())
		return r
	}
	framed := func(method, ct string) func(h *authv3.AttributeContext_HttpRequest) {
		return func(h *authv3.AttributeContext_HttpRequest) {
			h.Method, h.Headers[":method"] = method, method
			h.Headers["content-type"] = ct
		}
	}
	tests := []struct {
		name     string
		req      *authv3.CheckRequest
		grpcCode code.Code
		// removed lists headers the allowed request must lose; principal is
		// the principal header it must carry ("" for none).
		removed   []string
		principal string
	}{
		{name: "query on the method path", req: checkRequest(service+"Send?x=1", "a", frame(send)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "fragment on the method path", req: checkRequest(service+"Send#f", "a", frame(send)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "escaped method name", req: checkRequest(service+"Se%6Ed", "a", frame(send)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "query on a listing", req: checkRequest(service+"ListSessions?x=1", "a", frame(nil)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "unknown method", req: checkRequest(service+"Nope", "a", frame(nil)), grpcCode: code.Code_UNIMPLEMENTED},
		// methods macp-runtime 0.13.0 serves that Warden neither decides nor filters (TestMACPUnlistedRuntimeMethods)
		{name: "runtime's WhatIfReplay", req: checkRequest(service+"WhatIfReplay", "a", frame(nil)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "runtime's GetDecisionReceipt", req: checkRequest(service+"GetDecisionReceipt", "a", frame(nil)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "runtime's GetReceiptKeys", req: checkRequest(service+"GetReceiptKeys", "a", frame(nil)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "doubled slash before the method path", req: checkRequest("/"+service+"Send", "a", frame(send)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "method name in another case", req: checkRequest(service+"send", "a", frame(send)), grpcCode: code.Code_UNIMPLEMENTED},
		{name: "Send framed as GET", req: with(checkRequest(service+"Send", "a", frame(send)), framed("GET", "application/grpc")), grpcCode: code.Code_INVALID_ARGUMENT},
		{name: "Send framed as PUT text", req: with(checkRequest(service+"Send", "a", frame(send)), framed("PUT", "text/plain")), grpcCode: code.Code_INVALID_ARGUMENT},
		{name: "Send framed as JSON POST", req: with(checkRequest(service+"Send", "a", frame(send)), framed("POST", "application/json")), grpcCode: code.Code_INVALID_ARGUMENT},
		{name: "Send framed as DELETE with a query", req: with(checkRequest(service+"Send?x", "a", frame(send)), framed("DELETE", "")), grpcCode: code.Code_INVALID_ARGUMENT},
		{name: "two credentials naming different principals", req: with(checkRequest(service+"StreamSession", "bob", nil), func(h *authv3.AttributeContext_HttpRequest) {
			h.Headers["x-macp-token"] = "alice"
		}), grpcCode: code.Code_UNAUTHENTICATED},
		{name: "comma-joined authorization headers", req: with(checkRequest(service+"StreamSession", "", nil), func(h *authv3.AttributeContext_HttpRequest) {
			h.Headers["authorization"] = "Bearer alice,Bearer bob"
		}), grpcCode: code.Code_UNAUTHENTICATED},
		{name: "lower-case bearer", req: with(checkRequest(service+"StreamSession", "", nil), func(h *authv3.AttributeContext_HttpRequest) {
			h.Headers["authorization"] = "bearer alice"
		}), principal: "alice"},
		// L5: a client's identity header is refused, not overwritten
		{name: "a client's principal header", req: with(checkRequest(service+"StreamSession", "alice", nil), func(h *authv3.AttributeContext_HttpRequest) {
			h.Headers["x-warden-principal"] = "planner"
		}), grpcCode: code.Code_INVALID_ARGUMENT},
		{name: "public discovery with a client's principal header", req: with(checkRequest(service+"ListModes", "", frame(nil)), func(h *authv3.AttributeContext_HttpRequest) {
			h.Headers["x-warden-principal"] = "planner"
		}), grpcCode: code.Code_INVALID_ARGUMENT},
		{name: "health with a client's x-macp-agent-id", req: with(checkRequest("/grpc.health.v1.Health/Check", "", frame(nil)), func(h *authv3.AttributeContext_HttpRequest) {
			h.Headers["x-macp-agent-id"] = "planner"
		}), grpcCode: code.Code_INVALID_ARGUMENT},
		{name: "health without credentials", req: checkRequest("/grpc.health.v1.Health/Check", "", frame(nil)), removed: []string{"x-warden-principal"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Check(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := code.Code(resp.GetStatus().GetCode()); got != tc.grpcCode {
				t.Fatalf("status %v (%s), want %v", got, resp.GetStatus().GetMessage(), tc.grpcCode)
			}
			ok := resp.GetOkResponse()
			if tc.grpcCode != code.Code_OK {
				if ok != nil {
					t.Fatal("allowed")
				}
				return
			}
			var principal string
			for _, h := range ok.GetHeaders() {
				if h.GetHeader().GetKey() == "x-warden-principal" {
					principal = h.GetHeader().GetValue()
				}
			}
			if principal != tc.principal {
				t.Errorf("principal header %q, want %q", principal, tc.principal)
			}
			for _, r := range tc.removed {
				if !slices.Contains(ok.GetHeadersToRemove(), r) {
					t.Errorf("%s is not removed: %v", r, ok.GetHeadersToRemove())
				}
			}
		})
	}
}

// TestMCPFrontDoor: ext_authz in MCP mode reads credentials with the shared
// parser, answers a valid RFC 6750 challenge and takes Streamable HTTP's
// methods only.
func TestMCPFrontDoor(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, Config{Listen: "unused", MCP: true, AllowedOrigins: []string{"https://app.example"}})
	req := func(method string, headers map[string]string) *authv3.CheckRequest {
		h := map[string]string{"content-type": "application/json", "accept": "application/json, text/event-stream"}
		for k, v := range headers {
			h[k] = v
		}
		return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: method, Path: "/mcp", Host: "mcp.local", Headers: h, RawBody: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`),
		}}}}
	}
	tests := []struct {
		name      string
		req       *authv3.CheckRequest
		status    int32 // 0: allowed
		challenge string
	}{
		{"no credentials", req("POST", nil), 401, "Bearer"},
		{"two credentials", req("POST", map[string]string{"authorization": "bearer bob", "x-macp-token": "alice"}), 401, `Bearer error="invalid_token", error_description="invalid_credentials"`},
		{"lower-case bearer", req("POST", map[string]string{"authorization": "bearer bob"}), 0, ""},
		{"PUT", req("PUT", map[string]string{"authorization": "Bearer bob"}), 405, ""},
		{"configured origin", req("POST", map[string]string{"authorization": "Bearer bob", "origin": "https://app.example"}), 0, ""},
		{"foreign origin", req("POST", map[string]string{"authorization": "Bearer bob", "origin": "https://evil.example"}), 403, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Check(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			dr := resp.GetDeniedResponse()
			if tc.status == 0 {
				if dr != nil {
					t.Fatalf("denied: %v", resp.GetStatus())
				}
				return
			}
			if dr == nil || int32(dr.GetStatus().GetCode()) != tc.status {
				t.Fatalf("got %v, want HTTP %d", resp, tc.status)
			}
			var challenge string
			for _, h := range dr.GetHeaders() {
				if h.GetHeader().GetKey() == "www-authenticate" {
					challenge = h.GetHeader().GetValue()
				}
			}
			if challenge != tc.challenge {
				t.Fatalf("challenge %q, want %q", challenge, tc.challenge)
			}
		})
	}
}

// newServer is a Server with the default policies and an empty session table.
func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	enf, err := replay.NewEnforcer(engine, &replay.Transcript{Name: "x"}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, enf, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestMCPOperatorRules: ext_authz runs the operator's warden.mcp rules on
// task methods although it cannot know owners, and lets the owner question
// stand aside rather than refuse everything.
func TestMCPOperatorRules(t *testing.T) {
	ctx := context.Background()
	rego := filepath.Join(t.TempDir(), "operator.rego")
	if err := os.WriteFile(rego, []byte(`package warden.mcp
import rego.v1
deny contains {"code": "FORBIDDEN", "reason": "operator_policy", "rank": 6, "msg": "bob may not steer"} if {
	input.message.type == "tasks/steer"
	input.principal.id == "bob"
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	engine, err := policies.New(ctx, policies.Config{Files: []string{rego}})
	if err != nil {
		t.Fatal(err)
	}
	enf, err := replay.NewEnforcer(engine, &replay.Transcript{Name: "x"}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listen: "unused", MCP: true}, enf, nil)
	if err != nil {
		t.Fatal(err)
	}
	steer := func(who string) *authv3.CheckResponse {
		body := `{"jsonrpc":"2.0","id":7,"method":"tasks/steer","params":{"taskId":"wt2.x","message":{"role":"user","content":{"type":"text","text":"go"}}}}`
		resp, err := srv.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "POST", Path: "/mcp", Host: "mcp.local", RawBody: []byte(body),
			Headers: map[string]string{"content-type": "application/json", "authorization": "Bearer " + who, "mcp-method": "tasks/steer", "mcp-name": "wt2.x"},
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := steer("alice"); r.GetDeniedResponse() != nil {
		t.Fatalf("alice's steer refused: %v", r.GetStatus())
	}
	r := steer("bob")
	if r.GetDeniedResponse() == nil || !strings.Contains(r.GetDeniedResponse().GetBody(), "bob may not steer") {
		t.Fatalf("the operator rule did not run on ext_authz: %v", r)
	}
}

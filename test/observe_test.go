package test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// otlpSpan is one span an OTLP receiver got, with its resource.
type otlpSpan struct {
	span     *tracev1.Span
	resource map[string]string
}

func (s otlpSpan) attr(k string) string {
	for _, a := range s.span.GetAttributes() {
		if a.GetKey() == k {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// otlpReceiver is an OTLP trace receiver built from the official OTLP
// service types: OTLP/HTTP (POST /v1/traces, protobuf) and OTLP/gRPC.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []otlpSpan
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, a := range rs.GetResource().GetAttributes() {
			res[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, otlpSpan{span: sp, resource: res})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	var in collectortrace.ExportTraceServiceRequest
	if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(b, &in) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	resp, _ := r.Export(req.Context(), &in)
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// listen serves the receiver for protocol (http/protobuf or grpc) on
// 127.0.0.1:0 and returns the OTEL_EXPORTER_OTLP_ENDPOINT for it.
func (r *otlpReceiver) listen(t *testing.T, protocol string) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if protocol == "grpc" {
		srv := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(srv, r)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
	} else {
		srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return "http://" + lis.Addr().String()
}

// waitSpan waits for a span named name in trace tid.
func (r *otlpReceiver) waitSpan(t *testing.T, tid []byte, name string) otlpSpan {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, s := range r.spans {
			if bytes.Equal(s.span.GetTraceId(), tid) && s.span.GetName() == name {
				r.mu.Unlock()
				return s
			}
		}
		r.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, s := range r.spans {
		names = append(names, s.span.GetName()+" "+hex.EncodeToString(s.span.GetTraceId()))
	}
	t.Fatalf("no span %q in trace %x; received %v", name, tid, names)
	return otlpSpan{}
}

// headerHop is a reverse proxy between Warden and a real server that
// records the traceparent of every request the server is sent.
type headerHop struct {
	mu      sync.Mutex
	parents []string
}

func startHeaderHop(t *testing.T, target string) (*headerHop, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	h := &headerHop{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.parents = append(h.parents, r.Header.Get("Traceparent"))
		h.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h, "http://" + lis.Addr().String()
}

// saw reports whether the server was sent traceparent want.
func (h *headerHop) saw(want string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.parents {
		if p == want {
			return true
		}
	}
	return false
}

// rpcCall posts one JSON-RPC message to url with headers and returns the
// response's headers and the JSON-RPC message of its body (or first SSE
// event).
func rpcCall(t *testing.T, url string, hdr map[string]string, method string, id any, params any) (http.Header, map[string]any) {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id != nil {
		msg["id"] = id
	}
	b, _ := json.Marshal(msg)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if i := bytes.Index(body, []byte("data:")); strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && i >= 0 {
		body = body[i+5:]
		if j := bytes.IndexByte(body, '\n'); j >= 0 {
			body = body[:j]
		}
	}
	var out map[string]any
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, body)
		}
	}
	return resp.Header, out
}

// traceparent is a client's trace context for call n of a test.
func traceparent(n int) (header string, tid, sid []byte) {
	tid, sid = make([]byte, 16), make([]byte, 8)
	copy(tid, fmt.Sprintf("client-trace-%03d", n))
	copy(sid, fmt.Sprintf("span%04d", n))
	return "00-" + hex.EncodeToString(tid) + "-" + hex.EncodeToString(sid) + "-01", tid, sid
}

// TestObservedRequests runs Warden's MCP and A2A sidecars in front of the
// real MCP TypeScript SDK server and a2a-go v2.3.1, configured for tracing
// by the OTEL_* environment alone (no tracing flag), and checks what an
// operator sees of known allowed and denied calls: each is a server span in
// the client's trace (its parent the client's span) naming the method, the
// principal, the decision and its id, exported over the protocol the
// environment names, with the resource the environment names; the upstream
// is sent a traceparent in the client's trace whose parent is Warden's
// span; and /metrics counts the requests and their durations by protocol,
// door, method and outcome. Before: MCP and A2A made no span, the OTEL_*
// variables were ignored, the client's traceparent reached the upstream as
// it came, and no request metric existed.
func TestObservedRequests(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) { testObservedRequests(t, protocol) })
	}
}

func testObservedRequests(t *testing.T, protocol string) {
	recv := &otlpReceiver{}
	endpoint := recv.listen(t, protocol)
	mcpHop, mcpUp := startHeaderHop(t, startNodeMCP(t))
	a2aHop, a2aUp := startHeaderHop(t, startA2AGo(t))

	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"`+aliceToken+`","sender":"alice"},{"token":"`+bobToken+`","sender":"bob"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	mcpAddr, a2aAddr, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol, "OTEL_SERVICE_NAME=warden-under-test",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=observe-test", "OTEL_TRACES_SAMPLER=parentbased_always_on"}
	start(t, "warden", mcpAddr, env, wardenBinary(t), "serve", "--plaintext", "--auth", "static", "--static-tokens", tokens,
		"--mcp-listen", mcpAddr, "--mcp-upstream", mcpUp+"/mcp", "--a2a-listen", a2aAddr, "--a2a-upstream", a2aUp+"/jsonrpc", "--admin-listen", admin)
	mcpURL, a2aURL := "http://"+mcpAddr+"/mcp", "http://"+a2aAddr+"/jsonrpc"
	alice := "Bearer " + aliceToken

	// checkSpan: the server span of a call in the client's trace, its
	// parent the client's span, with the call's method and decision; the
	// upstream, when it was asked, was sent Warden's span as the parent.
	checkSpan := func(t *testing.T, n int, name, method, decision string, upstream *headerHop) {
		t.Helper()
		_, tid, sid := traceparent(n)
		s := recv.waitSpan(t, tid, name)
		if s.span.GetKind() != tracev1.Span_SPAN_KIND_SERVER || !bytes.Equal(s.span.GetParentSpanId(), sid) {
			t.Errorf("%s: kind %v parent %x, want a server span whose parent is the client's %x", name, s.span.GetKind(), s.span.GetParentSpanId(), sid)
		}
		for k, want := range map[string]string{"rpc.method": method, "warden.principal": "alice", "warden.decision": decision} {
			if got := s.attr(k); got != want {
				t.Errorf("%s: %s = %q, want %q", name, k, got, want)
			}
		}
		if decision != "" && len(s.attr("warden.decision_id")) != 26 {
			t.Errorf("%s: warden.decision_id %q", name, s.attr("warden.decision_id"))
		}
		if s.resource["service.name"] != "warden-under-test" || s.resource["deployment.environment"] != "observe-test" {
			t.Errorf("%s: resource %v, want OTEL_SERVICE_NAME's and OTEL_RESOURCE_ATTRIBUTES'", name, s.resource)
		}
		if upstream != nil {
			want := "00-" + hex.EncodeToString(tid) + "-" + hex.EncodeToString(s.span.GetSpanId()) + "-01"
			if !upstream.saw(want) {
				upstream.mu.Lock()
				t.Errorf("%s: the upstream was not sent traceparent %s (Warden's span in the client's trace); it saw %v", name, want, upstream.parents)
				upstream.mu.Unlock()
			}
		}
	}
	with := func(n int, more map[string]string) map[string]string {
		tp, _, _ := traceparent(n)
		h := map[string]string{"Authorization": alice, "Traceparent": tp}
		for k, v := range more {
			h[k] = v
		}
		return h
	}

	// MCP: initialize and tools/call allowed, tasks/get of a task that is
	// not alice's denied.
	hdr, init := rpcCall(t, mcpURL, with(1, nil), "initialize", 1, map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}})
	if init["result"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	session := map[string]string{"Mcp-Session-Id": hdr.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	if _, r := rpcCall(t, mcpURL, with(2, session), "tools/call", 2, map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}); r["result"] == nil {
		t.Fatalf("tools/call: %v", r)
	}
	if _, r := rpcCall(t, mcpURL, with(3, session), "tasks/get", 3, map[string]any{"taskId": "someone-elses"}); r["error"] == nil {
		t.Fatalf("tasks/get of a task that is not alice's: %v", r)
	}
	// A2A: SendMessage allowed, GetTask of a task that is not alice's
	// denied.
	a2a := map[string]string{"A2A-Version": "1.0"}
	if _, r := rpcCall(t, a2aURL, with(4, a2a), "SendMessage", 4, map[string]any{"message": a2aMessage("hello", nil)}); r["result"] == nil {
		t.Fatalf("SendMessage: %v", r)
	}
	if _, r := rpcCall(t, a2aURL, with(5, a2a), "GetTask", 5, map[string]any{"id": madeUpID()}); r["error"] == nil {
		t.Fatalf("GetTask of a task that is not alice's: %v", r)
	}

	checkSpan(t, 1, "mcp initialize", "initialize", "", mcpHop)
	checkSpan(t, 2, "mcp tools/call", "tools/call", "allow", mcpHop)
	checkSpan(t, 3, "mcp tasks/get", "tasks/get", "deny", nil)
	checkSpan(t, 4, "a2a SendMessage", "SendMessage", "allow", a2aHop)
	checkSpan(t, 5, "a2a GetTask", "GetTask", "deny", nil)

	// /metrics: one request per call above, by outcome, and as many
	// durations; none in flight once answered.
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`warden_requests_total{door="sidecar",method="initialize",outcome="allowed",protocol="mcp"} 1`,
		`warden_requests_total{door="sidecar",method="tools/call",outcome="allowed",protocol="mcp"} 1`,
		`warden_requests_total{door="sidecar",method="tasks/get",outcome="denied",protocol="mcp"} 1`,
		`warden_requests_total{door="sidecar",method="SendMessage",outcome="allowed",protocol="a2a"} 1`,
		`warden_requests_total{door="sidecar",method="GetTask",outcome="denied",protocol="a2a"} 1`,
		`warden_request_duration_seconds_count{door="sidecar",method="tools/call",outcome="allowed",protocol="mcp"} 1`,
		`warden_request_duration_seconds_count{door="sidecar",method="tasks/get",outcome="denied",protocol="mcp"} 1`,
		`warden_request_duration_seconds_count{door="sidecar",method="SendMessage",outcome="allowed",protocol="a2a"} 1`,
		`warden_request_duration_seconds_count{door="sidecar",method="GetTask",outcome="denied",protocol="a2a"} 1`,
		`warden_requests_in_flight{door="sidecar",protocol="mcp"} 0`,
		`warden_requests_in_flight{door="sidecar",protocol="a2a"} 0`,
	} {
		if !strings.Contains(string(b), "\n"+want+"\n") {
			t.Errorf("/metrics has no line %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(string(b), "warden_request"))
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.Contains(l, "_bucket") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestMACPRequestMetrics: on both MACP front doors (grpc-go and the frame
// relay, which decides Send itself), every call is one request counted by
// method and outcome in front of the real runtime: an allowed Send, a Send
// whose sender is not the caller and one without credentials (denied), an
// allowed GetSession; none stays in flight. No request metric existed
// before.
func TestMACPRequestMetrics(t *testing.T) { eachTransport(t, testMACPRequestMetrics) }

func testMACPRequestMetrics(t *testing.T) {
	admin := freeAddr(t)
	warden := startWarden(t, startRuntime(t), "--auth", "dev", "--insecure-dev-auth", "--admin-listen", admin)
	conn, err := grpc.NewClient(warden, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const sid = "5e1c2a4e-9b7d-4c1e-8a2b-5d6e7f809103"
	if ack, err := sendStartIn(ctx, conn, sid, "planner", payload); err != nil || !ack.GetOk() {
		t.Fatalf("SessionStart: %v %v", err, ack.GetError())
	}
	client := macpv1.NewMACPRuntimeServiceClient(conn)
	// worker's credential, planner's name
	wctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer worker")
	ack, err := client.Send(wctx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: taskMode, MessageType: "SessionStart", MessageId: "start-2",
		SessionId: "5e1c2a4e-9b7d-4c1e-8a2b-5d6e7f809104", Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}})
	if err != nil || ack.GetAck().GetOk() {
		t.Fatalf("a Send in another's name: %v %v, want a refused Ack", err, ack)
	}
	if _, err := client.Send(ctx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: taskMode, MessageType: "SessionStart", MessageId: "start-3",
		SessionId: sid, Sender: "planner", Payload: payload}}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a Send without credentials: %v, want UNAUTHENTICATED", err)
	}
	pctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer planner")
	if _, err := client.GetSession(pctx, &macpv1.GetSessionRequest{SessionId: sid}); err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`warden_requests_total{door="sidecar",method="Send",outcome="allowed",protocol="macp"} 1`,
		`warden_requests_total{door="sidecar",method="Send",outcome="denied",protocol="macp"} 2`,
		`warden_requests_total{door="sidecar",method="GetSession",outcome="allowed",protocol="macp"} 1`,
		`warden_request_duration_seconds_count{door="sidecar",method="Send",outcome="denied",protocol="macp"} 2`,
		`warden_requests_in_flight{door="sidecar",protocol="macp"} 0`,
	} {
		if !strings.Contains(string(b), "\n"+want+"\n") {
			t.Errorf("/metrics has no line %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(string(b), "warden_request"))
	}
}

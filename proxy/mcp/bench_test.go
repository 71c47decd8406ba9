package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/cputime"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules/mcp"
)

// benchUpstream is an MCP server as lean as can be: it lists one tool,
// "fast"; tools/call with a task creates "task-1", every other tools/call
// answers a text (as one server-sent event when its argument q is "sse", as
// the TypeScript SDK's servers answer), tasks/get answers "task-1" working.
// Its own cost is the same before and after any change to Warden.
type benchUpstream struct{}

func (benchUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Task      json.RawMessage `json:"task"`
			Arguments struct {
				Q string `json:"q"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	var result string
	switch {
	case msg.Method == mcp.MethodToolsCall && msg.Params.Task != nil:
		result = `{"task":{"taskId":"task-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}}`
	case msg.Method == mcp.MethodToolsCall:
		result = `{"content":[{"type":"text","text":"done"}]}`
	case msg.Method == mcp.MethodToolsList:
		result = `{"tools":[{"name":"fast","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"execution":{"taskSupport":"optional"}},{"name":"slow","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}`
	case msg.Method == mcp.MethodGet:
		result = `{"taskId":"task-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}`
	default:
		result = `{}`
	}
	sse := msg.Method == mcp.MethodToolsCall && msg.Params.Arguments.Q == "sse"
	w.Header().Set("Content-Type", "application/json")
	var out bytes.Buffer
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
		out.WriteString("event: message\ndata: ")
	}
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(msg.ID)
	out.WriteString(`,"result":`)
	out.WriteString(result)
	out.WriteString(`}`)
	if sse {
		out.WriteString("\n\n")
	}
	_, _ = w.Write(out.Bytes())
}

// benchCall is one request of BenchmarkSidecar: its body and what the
// answer must contain to show the upstream's result came back.
type benchCall struct {
	name, body, want string
	// handle: the answer names a task by Warden's handle, which the null
	// hop (BenchmarkNullHop) does not give.
	handle bool
	// header: routing headers sent beside the fixed ones.
	header map[string]string
}

func benchHarness(b *testing.B) (*harness, []benchCall) {
	upSrv := httptest.NewServer(benchUpstream{})
	b.Cleanup(upSrv.Close)
	// Served as warden serve serves it: the front through
	// listener.NewHTTPServer, the upstream reached with the client the
	// sidecar builds itself.
	h := newHarnessOn(b, Config{HTTPConfig: listener.HTTPConfig{Listen: "127.0.0.1:0"}}, nil, upSrv, nil, func(h http.Handler) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.Config = listener.NewHTTPServer(h, listener.Limits{}.WithDefaults())
		startLabelled(s)
		return s
	})
	handle := h.createTask(b, "alice")
	// As make bench's client sends it (bench/cmd/e2e): the Tasks extension
	// declared in _meta, the routing headers of protocol 2026-07-28.
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	return h, []benchCall{
		{"tasks/get", rpc(7, "tasks/get", map[string]any{"taskId": handle}), `"status":"working"`, false, nil},
		{"tasks/get-e2e", rpc(1, "tasks/get", map[string]any{"taskId": handle, "_meta": meta}), `"status":"working"`, false,
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": handle}},
		{"tools/call", rpc(7, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{"q": "x"}}), `"text":"done"`, false, nil},
		// The answer as one server-sent event (relayed event by event).
		{"tools/call-sse", rpc(7, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{"q": "sse"}}), `"text":"done"`, false, nil},
		// Answers Warden learns from: the tools' taskSupport, the task a
		// call created (read whole, not scanned).
		{"tools/list", rpc(7, "tools/list", map[string]any{}), `"taskSupport":"optional"`, false, nil},
		{"tools/call-task", rpc(7, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{"q": "x"}, "task": map[string]any{"ttl": 60000}}), `"taskId":"wt`, true, nil},
	}
}

// benchPost sends one request as alice and checks the answer.
func (h *harness) benchPost(client *http.Client, c benchCall) error {
	req, err := http.NewRequest(http.MethodPost, h.front.URL+"/mcp", strings.NewReader(c.body))
	if err != nil {
		return err
	}
	req.Header["Authorization"] = []string{"Bearer alice"}
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["Accept"] = []string{"application/json, text/event-stream"}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(c.want)) {
		return &benchError{resp.StatusCode, string(b)}
	}
	return nil
}

type benchError struct {
	status int
	body   string
}

func (e *benchError) Error() string { return http.StatusText(e.status) + ": " + e.body }

// reportCPU reports the CPU time per operation since start: the client's,
// the sidecar's and the upstream's together.
func reportCPU(b *testing.B, start time.Duration) {
	cputime.Report(b, start, b.N)
}

// reportWrites reports the write system calls per operation since start
// (syscw/op): the client's, the sidecar's and the upstream's together.
func reportWrites(b *testing.B, start int64) { cputime.ReportWrites(b, start, b.N) }

// startLabelled starts s with its goroutines (the connections it serves and
// the upstream connections their handlers open) labelled side=warden, for
// profiles: go tool pprof -tagfocus side=warden shows the hop's share, in
// BenchmarkSidecar and in BenchmarkNullHop alike.
func startLabelled(s *httptest.Server) {
	pprof.Do(context.Background(), pprof.Labels("side", "warden"), func(context.Context) { s.Start() })
}

// BenchmarkSidecar measures one MCP request end to end in one process: a
// net/http client, the sidecar (authentication, handle, decision,
// forwarding, answer check and rewrite) and an upstream that answers at
// once. allocs/op counts all three.
func BenchmarkSidecar(b *testing.B) { benchSidecar(b, false) }

// BenchmarkSidecarParallel is BenchmarkSidecar from every core at once.
func BenchmarkSidecarParallel(b *testing.B) { benchSidecar(b, true) }

func benchSidecar(b *testing.B, parallel bool) {
	h, calls := benchHarness(b)
	client := h.front.Client()
	for _, c := range calls {
		b.Run(strings.ReplaceAll(c.name, "/", "-"), func(b *testing.B) {
			b.ReportAllocs()
			defer reportWrites(b, cputime.Writes())
			defer reportCPU(b, cputime.Used())
			if !parallel {
				for b.Loop() {
					if err := h.benchPost(client, c); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := h.benchPost(client, c); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkNullHop is BenchmarkSidecar through the null pass-through make
// bench compares Warden with (bench/cmd/null: an httputil.ReverseProxy that
// flushes every write) in front of the same upstream: the floor of net/http
// a hop stands on. BenchmarkSidecar's cpu-ns/op less this one's is what
// Warden's own work costs per request.
func BenchmarkNullHop(b *testing.B) {
	h, calls := benchHarness(b)
	u, err := url.Parse(h.upSrv.URL)
	if err != nil {
		b.Fatal(err)
	}
	null := httptest.NewUnstartedServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
	})
	startLabelled(null)
	b.Cleanup(null.Close)
	nh := &harness{front: null}
	client := null.Client()
	for _, c := range calls {
		if c.handle {
			continue
		}
		b.Run(strings.ReplaceAll(c.name, "/", "-"), func(b *testing.B) {
			b.ReportAllocs()
			defer reportWrites(b, cputime.Writes())
			defer reportCPU(b, cputime.Used())
			for b.Loop() {
				if err := nh.benchPost(client, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// upstreamInMemory is benchUpstream reached without a connection: what a
// request costs Warden's handler alone, without the sockets and the HTTP
// parsing a null hop pays as well (BenchmarkHandler).
type upstreamInMemory struct{}

func (upstreamInMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	benchUpstream{}.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// BenchmarkHandler is BenchmarkSidecar's requests through the sidecar's
// handler alone: the request built in memory, the upstream answering in
// memory, reached as the sidecar reaches its upstream in production (the
// transport's RoundTrip, listener.Send, not http.Client.Do). Its ns/op is
// Warden's own work per request (with the constant cost of the in-memory
// request, recorder and upstream), measured without the noise of sockets on
// a shared machine.
func BenchmarkHandler(b *testing.B) {
	upSrv := httptest.NewServer(benchUpstream{})
	b.Cleanup(upSrv.Close)
	h := newHarnessOn(b, Config{HTTPConfig: listener.HTTPConfig{Listen: "127.0.0.1:0"}}, nil, upSrv, &http.Client{Transport: upstreamInMemory{}}, httptest.NewServer)
	handle := h.createTask(b, "alice")
	h.srv.send = upstreamInMemory{}.RoundTrip
	benchHandler(b, h.srv, handle)
}

// BenchmarkNullHandler is BenchmarkHandler through the null hop's handler
// (BenchmarkNullHop's httputil.ReverseProxy) with the same in-memory
// upstream: BenchmarkHandler's cpu-ns/op less this one's is what Warden's
// own work adds to a pass-through's per request.
func BenchmarkNullHandler(b *testing.B) {
	u, err := url.Parse("http://upstream.invalid")
	if err != nil {
		b.Fatal(err)
	}
	null := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		FlushInterval: -1,
		Transport:     upstreamInMemory{},
	}
	benchHandler(b, null, "task-1")
}

func benchHandler(b *testing.B, srv http.Handler, handle string) {
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	for _, c := range []benchCall{
		{"tasks/get", rpc(7, "tasks/get", map[string]any{"taskId": handle}), `"status":"working"`, false, nil},
		{"tasks/get-e2e", rpc(1, "tasks/get", map[string]any{"taskId": handle, "_meta": meta}), `"status":"working"`, false,
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": handle}},
		{"tools/call", rpc(7, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{"q": "x"}}), `"text":"done"`, false, nil},
		{"tools/call-sse", rpc(7, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{"q": "sse"}}), `"text":"done"`, false, nil},
	} {
		header := http.Header{
			"Authorization": {"Bearer alice"}, "Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"User-Agent": {"Go-http-client/1.1"}, "Accept-Encoding": {"gzip"},
		}
		for k, v := range c.header {
			header.Set(k, v)
		}
		body := []byte(c.body)
		b.Run(strings.ReplaceAll(c.name, "/", "-"), func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, cputime.Used())
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
				r.RemoteAddr = "127.0.0.1:40000"
				r.Header = header.Clone()
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(c.want)) {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body.Bytes())
				}
			}
		})
	}
}

package test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// logService is an OPA decision log service: a real HTTP server on loopback
// that takes POST /logs of a gzip JSON array of records and keeps them;
// while failing is set it answers 503 instead.
type logService struct {
	t       *testing.T
	url     string
	failing atomic.Bool
	failed  atomic.Int64 // uploads answered 503
	mu      sync.Mutex
	records []shippedRecord
}

// shippedRecord is the part of a decision record the tests read.
type shippedRecord struct {
	DecisionID string `json:"decision_id"`
	Path       string `json:"path"`
	Input      struct {
		Protocol  string `json:"protocol"`
		Principal string `json:"principal"`
		RequestID string `json:"request_id"`
		Client    string `json:"client_addr"`
	} `json:"input"`
	Result struct {
		Allow  bool   `json:"allow"`
		Reason string `json:"reason"`
	} `json:"result"`
}

func startLogService(t *testing.T) *logService {
	t.Helper()
	s := &logService{t: t}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	s.url = "http://" + l.Addr().String()
	return s
}

func (s *logService) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" ||
		r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer ship-token" {
		s.t.Errorf("upload %s %s %v", r.Method, r.URL.Path, r.Header)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if s.failing.Load() {
		s.failed.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		s.t.Errorf("upload not gzip: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(zr)
	var recs []shippedRecord
	if err == nil {
		err = json.Unmarshal(b, &recs)
	}
	if err != nil {
		s.t.Errorf("upload not a JSON array of records: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.records = append(s.records, recs...)
	s.mu.Unlock()
}

func (s *logService) got() []shippedRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]shippedRecord(nil), s.records...)
}

// waitFor waits until the service holds at least n records.
func (s *logService) waitFor(t *testing.T, n int) []shippedRecord {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r := s.got(); len(r) >= n {
			return r
		}
	}
	r := s.got()
	t.Fatalf("the service received %d records, want %d", len(r), n)
	return r
}

// shipWarden starts the MCP sidecar in front of the MCP TypeScript SDK task
// server, shipping its decision records to svc with the given
// decision_log.service keys (YAML, indented under service:); it returns
// Warden's base URL, its admin address and the process.
func shipWarden(t *testing.T, svc *logService, keys string) (string, string, *process) {
	t.Helper()
	upstream := startNodeMCP(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	cfg := filepath.Join(dir, "warden.yaml")
	admin := freeAddr(t)
	if err := os.WriteFile(token, []byte("ship-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "admin:\n  listen: " + admin + "\ndecision_log:\n  service:\n    url: " + svc.url + "\n    bearer_token_file: " + token + "\n" + keys
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	base, proc := startMCPWarden(t, upstream, "--config", cfg)
	return base, admin, proc
}

// mcpPost posts one JSON-RPC message to the sidecar's endpoint with
// x-request-id id, as alice (or with no credentials when anonymous) in the
// MCP session sid (none when empty); it returns the status, the session id
// answered and the decision id of a refusal (X-Warden-Decision).
func mcpPost(t *testing.T, base, id, sid, body string, anonymous bool) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Request-Id", id)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if !anonymous {
		req.Header.Set("Authorization", "Bearer alice")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), resp.Header.Get("X-Warden-Decision")
}

// sent is what the client saw of the calls it made.
type sent struct {
	requestIDs  []string
	decisionIDs []string // of the refusals
}

// callMany opens an MCP session as alice (initialize, not a decided
// method) and makes n tools/call requests in it, every third one without
// credentials (refused with a decision id); each call gets its answer.
func callMany(t *testing.T, base, prefix string, n int) sent {
	t.Helper()
	code, sid, _ := mcpPost(t, base, prefix+"-init", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"ship","version":"0"}}}`, false)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", code, sid)
	}
	mcpPost(t, base, prefix+"-initialized", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)
	var s sent
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		anonymous := i%3 == 2
		code, _, decision := mcpPost(t, base, id, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%s"}}}`, i+1, id), anonymous)
		switch {
		case anonymous && (code != http.StatusUnauthorized || decision == ""):
			t.Fatalf("%s without credentials: %d, decision %q", id, code, decision)
		case !anonymous && code != http.StatusOK:
			t.Fatalf("%s: %d", id, code)
		}
		s.requestIDs = append(s.requestIDs, id)
		if decision != "" {
			s.decisionIDs = append(s.decisionIDs, decision)
		}
	}
	return s
}

// exactlyOnce checks that every request and every refusal's decision id the
// client saw is in recs exactly once.
func exactlyOnce(t *testing.T, recs []shippedRecord, s sent) {
	t.Helper()
	byRequest, byDecision := map[string]int{}, map[string]int{}
	for _, r := range recs {
		byRequest[r.Input.RequestID]++
		byDecision[r.DecisionID]++
		if r.Path != "warden/mcp" || r.Input.Protocol != "mcp" || r.Input.Client == "" {
			t.Errorf("record %+v", r)
		}
	}
	for _, id := range s.requestIDs {
		if byRequest[id] != 1 {
			t.Errorf("request %s: %d records", id, byRequest[id])
		}
	}
	for _, id := range s.decisionIDs {
		if byDecision[id] != 1 {
			t.Errorf("decision %s: %d records", id, byDecision[id])
		}
	}
	if len(recs) != len(s.requestIDs) {
		t.Errorf("%d records for %d requests", len(recs), len(s.requestIDs))
	}
}

// metric reads one sample's value from Warden's /metrics.
func metric(t *testing.T, admin, sample string) int {
	t.Helper()
	body, _ := httpGet(t, "http://"+admin+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics lacks %s", sample)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}

// TestDecisionLogShipped: bin/warden (MCP sidecar in front of the MCP
// TypeScript SDK task server) ships its decision records to a real HTTP
// service as OPA's decision log service API takes them: every request the
// client made, and every refusal's decision id it saw, arrives exactly once;
// records still waiting (max_delay 1h) are sent when Warden stops.
func TestDecisionLogShipped(t *testing.T) {
	svc := startLogService(t)
	base, admin, proc := shipWarden(t, svc, "    max_delay: 1h\n    batch_bytes: 4096\n")
	s := callMany(t, base, "ship", 30)
	if n := metric(t, admin, `warden_decision_log_uploads_total{outcome="success"}`); n == 0 {
		t.Error("30 records of a few hundred bytes in batches of 4 KiB sent nothing before shutdown")
	}
	began := time.Now()
	proc.stop()
	t.Logf("stopped in %v", time.Since(began))
	exactlyOnce(t, svc.got(), s)
}

// TestDecisionLogShipRetries: a service answering 503 for a while gets
// every record once it recovers (retried with backoff), none twice; the
// failed uploads are counted.
func TestDecisionLogShipRetries(t *testing.T) {
	svc := startLogService(t)
	svc.failing.Store(true)
	base, admin, _ := shipWarden(t, svc, "    max_delay: 50ms\n    min_retry_delay: 50ms\n    max_retry_delay: 200ms\n")
	s := callMany(t, base, "retry", 15)
	for deadline := time.Now().Add(10 * time.Second); svc.failed.Load() < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if svc.failed.Load() < 3 {
		t.Fatalf("%d uploads while the service failed", svc.failed.Load())
	}
	svc.failing.Store(false)
	svc.waitFor(t, len(s.requestIDs))
	time.Sleep(300 * time.Millisecond) // a duplicate would come now
	exactlyOnce(t, svc.got(), s)
	if n := metric(t, admin, `warden_decision_log_uploads_total{outcome="failure"}`); n < 3 {
		t.Errorf("failed uploads counted: %d", n)
	}
	if n := metric(t, admin, `warden_decision_log_dropped_total{reason="buffer_full"}`); n != 0 {
		t.Errorf("dropped: %d", n)
	}
}

// TestDecisionLogShipBufferFull: with the service down and a buffer of 5
// records, requests are answered as fast as ever (nothing waits for the
// service) and the records that do not fit are counted as dropped: once the
// service recovers, every record either arrived once or was counted, and
// the ones that arrived are the newest.
func TestDecisionLogShipBufferFull(t *testing.T) {
	svc := startLogService(t)
	svc.failing.Store(true)
	base, admin, _ := shipWarden(t, svc, "    max_delay: 10ms\n    buffer_events: 5\n    min_retry_delay: 100ms\n    max_retry_delay: 100ms\n")
	const n = 40
	start := time.Now()
	callMany(t, base, "full", n)
	took := time.Since(start)
	dropped := metric(t, admin, `warden_decision_log_dropped_total{reason="buffer_full"}`)
	t.Logf("%d requests answered in %v with the service down; %d records dropped", n, took, dropped)
	if took > 10*time.Second {
		t.Fatalf("%d requests took %v: requests waited for the service", n, took)
	}
	if dropped < n-5-n/2 { // at most the buffer and the batch being retried are kept
		t.Fatalf("dropped %d of %d records with a buffer of 5", dropped, n)
	}
	svc.failing.Store(false)
	svc.waitFor(t, n-dropped)
	time.Sleep(300 * time.Millisecond)
	recs := svc.got()
	if len(recs)+dropped != n {
		t.Fatalf("%d records arrived and %d were dropped, of %d", len(recs), dropped, n)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.Input.RequestID] {
			t.Fatalf("%s arrived twice", r.Input.RequestID)
		}
		seen[r.Input.RequestID] = true
	}
	for i := n - 5; i < n; i++ { // the newest were kept
		if id := fmt.Sprintf("full-%d", i); !seen[id] {
			t.Errorf("the newest record %s was dropped", id)
		}
	}
}

// TestMACPClientAddrShipped: on both MACP front doors, in front of the real
// runtime, a Send and a call the relay hands to its in-process grpc-go
// server (ListModes allowed, a method the runtime does not have refused) are
// recorded with the client
// connection's address, shipped to the decision log service; the
// x-warden-client-addr a client sends is never read. Before, the relay's
// calls other than Send had no client address.
func TestMACPClientAddrShipped(t *testing.T) { eachTransport(t, testMACPClientAddrShipped) }

func testMACPClientAddrShipped(t *testing.T) {
	svc := startLogService(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("ship-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := dialMACP(t, startWarden(t, startRuntime(t), "--auth", "dev", "--insecure-dev-auth",
		"--decision-log-service-url", svc.url, "--decision-log-service-token-file", token))
	sid := newSession()
	c.mustAccept(envelope("alice", sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"alice", "bob"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
	client := macpv1.NewMACPRuntimeServiceClient(c.conn)
	for i, call := range []struct {
		who  string
		call func(ctx context.Context) error
		ok   bool
	}{
		{"alice", func(ctx context.Context) error {
			_, err := client.ListModes(ctx, &macpv1.ListModesRequest{})
			return err
		}, true},
		{"alice", func(ctx context.Context) error {
			return c.conn.Invoke(ctx, "/macp.v1.MACPRuntimeService/Nope", &macpv1.ListModesRequest{}, &macpv1.ListModesResponse{})
		}, false},
	} {
		ctx, cancel := as(call.who)
		ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", fmt.Sprintf("addr-%d", i), "x-warden-client-addr", "203.0.113.66:1")
		err := call.call(ctx)
		cancel()
		if (err == nil) != call.ok {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	want := map[string]bool{"addr-0": true, "addr-1": true}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		seen := 0
		for _, r := range svc.got() {
			if r.Input.Protocol != "macp" {
				continue
			}
			if !strings.HasPrefix(r.Input.Client, "127.0.0.1:") {
				t.Fatalf("record %s (request %s) names client %q, want the connection's 127.0.0.1", r.DecisionID, r.Input.RequestID, r.Input.Client)
			}
			if want[r.Input.RequestID] {
				seen++
			}
		}
		if seen == len(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("records of %v not shipped: %+v", want, svc.got())
		}
	}
}

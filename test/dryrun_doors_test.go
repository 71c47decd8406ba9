package test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a"
	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/mcp"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// frontDecisions keeps the front door's decisions (those with no message
// type) the Enforcer observes, and its log lines.
type frontDecisions struct {
	mu   sync.Mutex
	ds   []proxy.Decision
	logs bytes.Buffer
}

func (o *frontDecisions) Decided(d proxy.Decision, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds = append(o.ds, d)
}

func (o *frontDecisions) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.logs.Write(p)
}

// reset forgets what was kept.
func (o *frontDecisions) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds, o.logs = nil, bytes.Buffer{}
}

// first is the first decision kept and the first "refused" line logged.
func (o *frontDecisions) first(t *testing.T) (proxy.Decision, map[string]any) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ds) == 0 {
		t.Fatal("no decision recorded")
	}
	var line map[string]any
	for _, l := range strings.Split(o.logs.String(), "\n") {
		if err := json.Unmarshal([]byte(l), &line); err == nil && line["msg"] == "refused" {
			return o.ds[0], line
		}
	}
	t.Fatalf("no refused line in %q", o.logs.String())
	return proxy.Decision{}, nil
}

// dryDoors are a protocol's doors (sidecar and ext_authz), each with its
// own dry-run Enforcer whose decisions and log lines obs keeps.
type dryDoors func(t *testing.T, obs *frontDecisions) map[string]func(doorCase) doorAnswer

// dryEnforcer is doorEnforcer in dry run, observed by obs.
func dryEnforcer(t *testing.T, obs *frontDecisions) *proxy.Enforcer {
	return doorEnforcerWith(t, false, proxy.Config{DryRun: true}, proxy.Options{Observer: obs, Logger: slog.New(slog.NewJSONHandler(obs, nil))})
}

// runDryRun sends every case to every door: a case with status 0 is a
// refusal dry run forwards (the sidecar's upstream receives it, ext_authz
// allows it) and records as allowed in dry run, logged with dry_run true
// (the metric counts it as decision="dry_run_deny", from Decision.DryRun);
// a case with a status is one dry run cannot forward, refused with it and
// logged with dry_run false.
func runDryRun(t *testing.T, doors dryDoors, cases []doorCase) {
	obs := &frontDecisions{}
	built := doors(t, obs)
	for _, c := range cases {
		for name, door := range built {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				obs.reset()
				got := door(c)
				d, line := obs.first(t)
				switch {
				case c.status == 0 && !got.admitted:
					t.Fatalf("refused in dry run: HTTP %d %s", got.status, got.body)
				case c.status == 0 && (!d.Allow || !d.DryRun || d.Code == ""):
					t.Fatalf("decision %+v, want the refusal allowed in dry run", d)
				case c.status == 0 && line["dry_run"] != true:
					t.Fatalf("refused line %v, want dry_run true", line)
				case c.status != 0 && (got.admitted || got.status != c.status):
					t.Fatalf("admitted %v HTTP %d, want refused with %d", got.admitted, got.status, c.status)
				case c.status != 0 && (d.Allow || d.DryRun || line["dry_run"] != false):
					t.Fatalf("decision %+v, line %v: want refused, dry_run false", d, line)
				}
			})
		}
	}
}

// dryCases are the refusals of a JSON-RPC front door in dry run: those of
// credentials, Origin, routing and content headers and the method
// allow-list are forwarded; a path or HTTP method not served, a body over
// the bound or not parsed are refused.
func dryCases(t testing.TB, path, message string, parse int) []doorCase {
	post := func(name string, header [][2]string, body string, status int) doorCase {
		return doorCase{name: name, method: "POST", path: path, header: header, body: body, status: status}
	}
	now := time.Now()
	return []doorCase{
		post("no credentials", [][2]string{{"Authorization", ""}}, message, 0),
		post("not a JWT", [][2]string{{"Authorization", "Bearer alice"}}, message, 0),
		post("expired token", [][2]string{{"Authorization", "Bearer " + jwtFor(t, "alice", now.Add(-time.Hour), doorSecret)}}, message, 0),
		post("forged token", [][2]string{{"Authorization", "Bearer " + jwtFor(t, "alice", now.Add(time.Hour), []byte("another-secret-of-32-bytes-or-more!!"))}}, message, 0),
		post("text/plain", [][2]string{{"Content-Type", "text/plain"}}, message, 0),
		post("no credentials and text/plain", [][2]string{{"Authorization", ""}, {"Content-Type", "text/plain"}}, message, 0),
		{name: "another path", method: "POST", path: path + "x", body: message, status: 404},
		{name: "PUT", method: "PUT", path: path, body: message, status: 405},
		post("over the body limit", nil, `{"jsonrpc":"2.0","id":7,"method":"x","params":{"pad":"`+strings.Repeat("a", 600)+`"}}`, 413),
		post("not JSON", nil, "hello", parse),
	}
}

// TestDryRunMCPDoors: in dry run, the MCP sidecar forwards and ext_authz
// allows every front-door refusal that can be forwarded (no credentials, a
// bad token, a foreign Origin, a repeated routing header, a wrong content
// type), recorded and logged with dry_run true. Before, each was answered
// 401, 403, 400 or 415 and logged without dry_run.
func TestDryRunMCPDoors(t *testing.T) {
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	token := "Bearer " + jwtFor(t, "alice", time.Now().Add(time.Hour), doorSecret)
	base := [][2]string{{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}, {"Authorization", token}, {"Host", "127.0.0.1"}}
	doors := func(t *testing.T, obs *frontDecisions) map[string]func(doorCase) doorAnswer {
		up, n := doorUpstream(t)
		cfg := mcp.Config{}
		cfg.Listen, cfg.Upstream, cfg.Plaintext, cfg.MaxBodyBytes = "127.0.0.1:3001", up.URL+"/mcp", true, 512
		side, err := mcp.New(cfg, dryEnforcer(t, obs), doorKeys(t), up.Client(), nil)
		return doorPairWith(t, base, n, side, err, extauthz.Config{Listen: "unused", MCP: true, MCPPath: "/mcp", AllowedHosts: []string{"localhost", "127.0.0.1", "[::1]"}, MaxBodyBytes: 512}, dryEnforcer(t, obs))
	}
	cases := append(dryCases(t, "/mcp", ping, 400),
		doorCase{name: "a foreign Origin", method: "POST", path: "/mcp", header: [][2]string{{"Origin", "https://evil.example"}}, body: ping},
		doorCase{name: "Mcp-Method twice", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Method", "ping"}, {"Mcp-Method", "tasks/cancel"}}, body: ping},
	)
	runDryRun(t, doors, cases)
}

// TestDryRunA2ADoors: TestDryRunMCPDoors for A2A, with a method outside
// the allow-list forwarded too.
func TestDryRunA2ADoors(t *testing.T) {
	const list = `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	token := "Bearer " + jwtFor(t, "alice", time.Now().Add(time.Hour), doorSecret)
	base := [][2]string{{"Content-Type", "application/json"}, {"Authorization", token}}
	doors := func(t *testing.T, obs *frontDecisions) map[string]func(doorCase) doorAnswer {
		up, n := doorUpstream(t)
		cfg := a2a.Config{}
		cfg.Listen, cfg.Upstream, cfg.Plaintext, cfg.MaxBodyBytes = "127.0.0.1:3002", up.URL+"/jsonrpc", true, 512
		side, err := a2a.New(cfg, dryEnforcer(t, obs), doorKeys(t), up.Client(), nil)
		return doorPairWith(t, base, n, side, err, extauthz.Config{Listen: "unused", A2A: true, A2APath: "/jsonrpc", MaxBodyBytes: 512}, dryEnforcer(t, obs))
	}
	cases := append(dryCases(t, "/jsonrpc", list, 200),
		doorCase{name: "an unknown method", method: "POST", path: "/jsonrpc", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t1"}}`},
	)
	runDryRun(t, doors, cases)
}

// TestDryRunMACPDoor: in dry run, a MACP call without credentials is not
// answered by Warden: on the grpc-go sidecar and the frame relay it is
// forwarded to the real runtime as the anonymous principal (the runtime
// answers it), and the refusal Warden would have made is in the decision
// log with dry_run true. Before, Warden answered UNAUTHENTICATED itself.
func TestDryRunMACPDoor(t *testing.T) { eachTransport(t, testDryRunMACPDoor) }

func testDryRunMACPDoor(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "decisions.log")
	runtime := startRuntime(t)
	admin := freeAddr(t)
	w := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth", "--dry-run", "--decision-log", logFile, "--admin-listen", admin))
	var list macpv1.ListSessionsResponse
	err := w.conn.Invoke(context.Background(), "/macp.v1.MACPRuntimeService/ListSessions", &macpv1.ListSessionsRequest{}, &list)
	if err != nil && strings.Contains(err.Error(), "warden decision") {
		t.Fatalf("ListSessions without credentials refused by Warden in dry run: %v", err)
	}
	// A Send is decided as the anonymous principal (its would-be refusals
	// logged) and forwarded: the Ack is the runtime's, not Warden's.
	var sent macpv1.SendResponse
	env := envelope("planner", newSession(), "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
	serr := w.conn.Invoke(context.Background(), "/macp.v1.MACPRuntimeService/Send", &macpv1.SendRequest{Envelope: env}, &sent)
	if serr != nil && strings.Contains(serr.Error(), "warden decision") || strings.Contains(sent.GetAck().GetError().GetMessage(), "warden decision") {
		t.Fatalf("Send without credentials refused by Warden in dry run: %v %v", serr, sent.GetAck())
	}
	t.Logf("runtime's answer to Send: %v %v", serr, sent.GetAck())
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r struct {
				Result struct {
					Allow  bool   `json:"allow"`
					DryRun bool   `json:"dry_run"`
					Reason string `json:"reason"`
				} `json:"result"`
			}
			if json.Unmarshal([]byte(line), &r) == nil && r.Result.Reason == "unauthenticated" {
				if !r.Result.Allow || !r.Result.DryRun {
					t.Fatalf("record %s: want allowed in dry run", line)
				}
				t.Logf("runtime's answer: %v", err)
				if body, _ := httpGet(t, "http://"+admin+"/metrics"); !strings.Contains(body, `auth_reason="missing",decision="dry_run_deny"`) {
					t.Fatalf("/metrics counts no dry_run_deny for the call without credentials:\n%s", body)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no unauthenticated record in the decision log after 5 s:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDryRunMACPExtAuthz: under ext_authz with dry run, a MACP Send with a
// token Warden does not know is allowed (Envoy forwards it), the would-be
// refusal recorded with dry_run true. Before, it was denied.
func TestDryRunMACPExtAuthz(t *testing.T) {
	dir := t.TempDir()
	tokens, logPath, cfg := filepath.Join(dir, "tokens.json"), filepath.Join(dir, "decisions.log"), filepath.Join(dir, "warden.yaml")
	addr := freeAddr(t)
	for name, content := range map[string]string{
		tokens: `[{"token": "tok-a", "sender": "agent://a"}]`,
		cfg: "authn:\n  mode: static\n  static:\n    tokens_file: " + tokens + "\nextauthz:\n  listen: " + addr +
			"\nenforcer:\n  dry_run: true\ndecision_log:\n  path: " + logPath + "\n  flush_interval: 10ms\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start(t, "warden", addr, nil, wardenBinary(t), "serve", "--config", cfg)
	c := dialCheck(t, "warden", addr)
	env := &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "SessionStart", MessageId: "m1",
		SessionId: "7a1c2a4e-9b7d-4c1e-8a2b-5d6e7f809101", Sender: "agent://a"}
	if got := c.call(macpService+"Send", "tok-revoked", &macpv1.SendRequest{Envelope: env}); got != "allow" {
		t.Fatalf("ext_authz answered %s in dry run, want allow", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), `"auth_reason":"unknown_token"`) {
			if !strings.Contains(string(b), `"dry_run":true`) {
				t.Fatalf("the record lacks dry_run: %s", b)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no unknown_token record after 5 s:\n%s", b)
		}
	}
}

// TestDryRunMCPAfterGate: the refusals the MCP sidecar makes after the
// gate (an Mcp-Session-Id or Last-Event-ID handle that is not the caller's)
// and what an answer would not hand over (tasks/list filtered to the
// caller's tasks) are, in dry run, recorded through the one decision path:
// a Decision with dry_run (the decision record, the metric's dry_run_deny)
// and a "refused" line with dry_run true, and the request is forwarded.
// Before, each was only a hand-written log line: no decision record, no
// metric.
func TestDryRunMCPAfterGate(t *testing.T) {
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		if len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		tasks := `[]`
		if m.Method == "tasks/list" {
			tasks = `[{"taskId":"someone-elses","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":null}]`
		}
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tasks":` + tasks + `}}`))
	}))
	t.Cleanup(up.Close)
	obs := &frontDecisions{}
	cfg := mcp.Config{}
	cfg.Listen, cfg.Upstream, cfg.Plaintext = "127.0.0.1:3001", up.URL+"/mcp", true
	side, err := mcp.New(cfg, dryEnforcer(t, obs), doorKeys(t), up.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(side)
	t.Cleanup(front.Close)
	token := "Bearer " + jwtFor(t, "alice", time.Now().Add(time.Hour), doorSecret)
	forged := handle.Prefix + "bm90LWFsaWNlcw"
	for _, c := range []struct {
		name, method, body string
		header             [][2]string
		code               rules.Code
	}{
		{"another's session handle", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, [][2]string{{"Mcp-Session-Id", forged}}, rules.CodeSessionNotFound},
		{"another's event id", "GET", "", [][2]string{{"Last-Event-ID", forged}}, rules.CodeInvalidRequest},
		{"tasks/list naming another's task", "POST", `{"jsonrpc":"2.0","id":2,"method":"tasks/list","params":{}}`, nil, rules.CodeForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs.reset()
			before := n.Load()
			req, _ := http.NewRequest(c.method, front.URL+"/mcp", strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", token)
			for _, h := range c.header {
				req.Header.Set(h[0], h[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if n.Load() == before {
				t.Fatalf("not forwarded in dry run: HTTP %d", resp.StatusCode)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			var dry []proxy.Decision
			for _, d := range obs.ds {
				if d.DryRun {
					dry = append(dry, d)
				}
			}
			if len(dry) != 1 || !dry[0].Allow || dry[0].Code != c.code || dry[0].Principal != "alice" || dry[0].ID == "" {
				t.Fatalf("dry-run decisions %+v, want one with code %s", dry, c.code)
			}
			if !strings.Contains(obs.logs.String(), `"decision_id":"`+dry[0].ID+`"`) || !strings.Contains(obs.logs.String(), `"dry_run":true`) {
				t.Fatalf("no refused line with dry_run for %s:\n%s", dry[0].ID, obs.logs.String())
			}
		})
	}
}

// TestDryRunA2AAnswer: what an A2A answer would not have handed over in dry
// run (another task than the one asked for) is recorded through the one
// decision path: a Decision with dry_run and a "refused" line, the answer
// passed. Before, a hand-written log line only.
func TestDryRunA2AAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"id":"task-of-bob","contextId":"ctx-of-bob","status":{"state":"TASK_STATE_WORKING"}}}`))
	}))
	t.Cleanup(up.Close)
	obs := &frontDecisions{}
	cfg := a2a.Config{}
	cfg.Listen, cfg.Upstream, cfg.Plaintext = "127.0.0.1:3002", up.URL+"/jsonrpc", true
	side, err := a2a.New(cfg, dryEnforcer(t, obs), doorKeys(t), up.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(side)
	t.Cleanup(front.Close)
	req, _ := http.NewRequest("POST", front.URL+"/jsonrpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-asked"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+jwtFor(t, "alice", time.Now().Add(time.Hour), doorSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
		t.Fatalf("dry run withheld the answer: %d %s", resp.StatusCode, b)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var dry []proxy.Decision
	for _, d := range obs.ds {
		if d.DryRun && d.Reason == rules.ReasonNotOwner {
			dry = append(dry, d)
		}
	}
	if len(dry) == 0 || !dry[0].Allow || dry[0].Principal != "alice" || !strings.Contains(obs.logs.String(), `"decision_id":"`+dry[0].ID+`"`) {
		t.Fatalf("dry-run decisions %+v\n%s", obs.ds, obs.logs.String())
	}
}

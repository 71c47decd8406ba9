package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentwarden/warden/internal/cputime"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

// scrape serves reg's /metrics the way the admin port does and returns the text.
func scrape(t *testing.T, a *admin) string {
	t.Helper()
	srv := httptest.NewServer(a.handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasLines fails t for each of lines that is not a whole line of out.
func hasLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, "\n"+l+"\n") {
			t.Errorf("no line %q in\n%s", l, out)
		}
	}
}

// TestAuthReasonLabel: an authentication refusal is counted with its cause
// in auth_reason; other decisions have none.
func TestAuthReasonLabel(t *testing.T) {
	reg := newRegistry()
	m := newMetrics(reg)
	m.Decided(proxy.Decision{Protocol: "mcp", Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, AuthReason: "audience"}, time.Millisecond)
	m.Decided(proxy.Decision{Protocol: "mcp", Allow: true, Reason: rules.ReasonAllowed, Type: "tools/call", Mode: "mcp"}, time.Millisecond)
	out := scrape(t, &admin{reg: reg, ready: func() error { return nil }})
	for _, want := range []string{
		`warden_decisions_total{auth_reason="audience",decision="deny",message_type="other",mode="",protocol="mcp",reason="unauthenticated"} 1`,
		`warden_decisions_total{auth_reason="",decision="allow",message_type="tools/call",mode="mcp",protocol="mcp",reason="allowed"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}

// TestBuildAndReloadMetrics scrapes /metrics as Prometheus would:
// warden_build_info names the version and Go release, and each reload is
// counted by result, the last success's time kept (a failed reload leaves
// it). None of these series existed before.
func TestBuildAndReloadMetrics(t *testing.T) {
	cfgPath := write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nextauthz:\n  listen: 127.0.0.1:0\n")
	p := buildFrom(t, cfgPath)
	clock := time.Unix(1_800_000_000, 0)
	p.metrics.now = func() time.Time { return clock }
	a := &admin{reg: p.reg, ready: func() error { return nil }}
	expect := func(lines ...string) { t.Helper(); hasLines(t, scrape(t, a), lines...) }
	expect(`warden_build_info{goversion="`+runtime.Version()+`",version="`+versionString()+`"} 1`,
		`warden_reload_total{result="failure"} 0`, `warden_reload_total{result="success"} 0`)
	started := scrape(t, a)
	if !strings.Contains(started, "\nwarden_last_reload_success_timestamp_seconds ") || strings.Contains(started, "\nwarden_last_reload_success_timestamp_seconds 0\n") {
		t.Fatalf("no start-up load time:\n%s", started)
	}

	reloadFile := func(yaml string) {
		t.Helper()
		if err := writeTo(cfgPath, yaml); err != nil {
			t.Fatal(err)
		}
		_ = reload(context.Background(), cfgPath, func(*Config) {}, p, slog.New(slog.DiscardHandler))
	}
	reloadFile("authn:\n  mode: dev\n  insecure: true\nextauthz:\n  listen: 127.0.0.1:0\n")
	expect(`warden_reload_total{result="failure"} 0`, `warden_reload_total{result="success"} 1`, `warden_last_reload_success_timestamp_seconds 1.8e+09`)

	clock = clock.Add(time.Minute)
	reloadFile("authn:\n  mode: nonsense\n")
	expect(`warden_reload_total{result="failure"} 1`, `warden_reload_total{result="success"} 1`, `warden_last_reload_success_timestamp_seconds 1.8e+09`)
}

// TestTLSReloadMetric: each reload of a listener's TLS material that
// replaced it or failed is counted by listener and result; one that found
// the files unchanged is not. No TLS reload was counted before.
func TestTLSReloadMetric(t *testing.T) {
	reg := newRegistry()
	m := newMetrics(reg)
	for _, tc := range []struct {
		listener string
		err      error
	}{{"mcp", nil}, {"mcp", errors.New("half-written key")}, {"mcp", nil}, {"a2a", errors.New("missing")}} {
		m.tlsReloaded(tc.listener, tc.err)
	}
	out := scrape(t, &admin{reg: reg, ready: func() error { return nil }})
	for _, want := range []string{`warden_tls_reload_total{listener="mcp",result="success"} 2`, `warden_tls_reload_total{listener="mcp",result="failure"} 1`,
		`warden_tls_reload_total{listener="a2a",result="failure"} 1`} {
		if !strings.Contains(out, "\n"+want+"\n") {
			t.Errorf("no line %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `warden_tls_reload_total{listener="a2a",result="success"}`) {
		t.Errorf("a success counted that did not happen:\n%s", out)
	}
}

// TestAnswerBudgetMetrics: the answer bytes an HTTP sidecar holds now and
// the answers it refused for its budget (streams.answer_bytes) are read
// from the budget when scraped, each protocol its own series; a release
// brings the bytes held back down and leaves the refusals counted. Neither
// series existed before.
func TestAnswerBudgetMetrics(t *testing.T) {
	reg := newRegistry()
	m := newMetrics(reg)
	mcpBudget := listener.NewStreams("mcp", listener.StreamLimits{Max: 10, PerPrincipal: 10, AnswerBytes: 10})
	a2aBudget := listener.NewStreams("a2a", listener.StreamLimits{Max: 10, PerPrincipal: 10, AnswerBytes: 10})
	m.answersOf("mcp", mcpBudget.Answers)
	m.answersOf("a2a", a2aBudget.Answers)
	read := func(h *listener.Hold, n int) error {
		_, err := io.ReadAll(h.Reader(bytes.NewReader(make([]byte, n))))
		return err
	}
	a := &admin{reg: reg, ready: func() error { return nil }}
	expect := func(lines ...string) { t.Helper(); hasLines(t, scrape(t, a), lines...) }
	first, second := mcpBudget.Hold(), mcpBudget.Hold()
	if err := read(first, 8); err != nil {
		t.Fatal(err)
	}
	if err := read(second, 5); !errors.Is(err, listener.ErrAnswerBudget) {
		t.Fatalf("an answer past the budget: %v", err)
	}
	other := a2aBudget.Hold()
	if err := read(other, 3); err != nil {
		t.Fatal(err)
	}
	expect(`warden_answer_bytes_in_flight{protocol="mcp"} 8`, `warden_answer_budget_refusals_total{protocol="mcp"} 1`,
		`warden_answer_bytes_in_flight{protocol="a2a"} 3`, `warden_answer_budget_refusals_total{protocol="a2a"} 0`)
	first.Release()
	second.Release()
	other.Release()
	expect(`warden_answer_bytes_in_flight{protocol="mcp"} 0`, `warden_answer_budget_refusals_total{protocol="mcp"} 1`,
		`warden_answer_bytes_in_flight{protocol="a2a"} 0`)
}

// TestAnswerBudgetMetricsWired: serve's metrics read the budget of each
// HTTP sidecar it builds, and of no other.
func TestAnswerBudgetMetricsWired(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		protocols  []string
	}{
		{"mcp and a2a", "mcp:\n  listen: 127.0.0.1:0\n  upstream: http://127.0.0.1:1/mcp\n  plaintext: true\n" +
			"a2a:\n  listen: 127.0.0.1:0\n  upstream: http://127.0.0.1:1/jsonrpc\n  plaintext: true\n", []string{"mcp", "a2a"}},
		{"ext_authz only", "extauthz:\n  listen: 127.0.0.1:0\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := buildFrom(t, write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\n"+tc.yaml))
			out := scrape(t, &admin{reg: p.reg, ready: func() error { return nil }})
			for _, proto := range tc.protocols {
				hasLines(t, out, `warden_answer_bytes_in_flight{protocol="`+proto+`"} 0`, `warden_answer_budget_refusals_total{protocol="`+proto+`"} 0`)
			}
			if n := strings.Count(out, "\nwarden_answer_bytes_in_flight{"); n != len(tc.protocols) {
				t.Errorf("%d answer budgets read, want %d:\n%s", n, len(tc.protocols), out)
			}
		})
	}
}

// describer is a prometheus.Registerer that keeps the descriptions of what
// is registered on it, series or none.
type describer struct{ descs []*prometheus.Desc }

// Register implements prometheus.Registerer.
func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs = append(d.descs, desc)
	}
	return nil
}

// MustRegister implements prometheus.Registerer.
func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

// Unregister implements prometheus.Registerer.
func (d *describer) Unregister(prometheus.Collector) bool { return false }

// TestMetricsDocumented: every metric Warden registers (the Go and process
// collectors aside) is a row of docs/operations.md's table.
func TestMetricsDocumented(t *testing.T) {
	d := &describer{}
	newMetrics(d)
	newShipMetrics(d)
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	if len(d.descs) < 10 {
		t.Fatalf("%d metrics described", len(d.descs))
	}
	for _, desc := range d.descs {
		m := name.FindStringSubmatch(desc.String())
		if m == nil {
			t.Fatalf("no name in %s", desc)
		}
		if !strings.Contains(string(doc), "\n| `"+m[1]+"` |") {
			t.Errorf("%s is not in docs/operations.md's table of metrics", m[1])
		}
	}
}

// sidecar is protocol's sidecar door with methods, its requests counted by
// o, as a door takes it when built (proxy.Enforcer.Door).
func sidecar(o proxy.Observer, protocol string, methods ...string) *proxy.Door {
	p := &proxy.Protocol{Name: protocol, Methods: map[string]bool{}}
	for _, m := range methods {
		p.Methods[m] = true
	}
	return proxy.NewDoor(p, proxy.DoorSidecar, o)
}

// BenchmarkRequestMetrics is what the request metrics cost a request: the
// in-flight gauge up and down, the counter and the histogram.
func BenchmarkRequestMetrics(b *testing.B) {
	d := sidecar(newMetrics(newRegistry()), "mcp", "tools/call")
	r, s := d.Requests(), d.ServedAs("tools/call", proxy.OutcomeAllowed, time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		r.Started()
		r.Served(s)
	}
}

// BenchmarkMessageMetrics is what the metrics cost one message as a door
// counts it: its request started, one decision, its request served, through
// the observers the enforcer is given (build). cpu-ns/op is the process's
// CPU time per message, which reads better than the time on a shared
// machine.
func BenchmarkMessageMetrics(b *testing.B) {
	var o proxy.Observer = observers{newMetrics(newRegistry())}
	door := sidecar(o, "macp", "Send")
	r, s := door.Requests(), door.ServedAs("Send", proxy.OutcomeAllowed, time.Millisecond)
	d := proxy.Decision{Protocol: "macp", Allow: true, Reason: rules.ReasonAllowed, Type: "TaskUpdate", Mode: macp.ModeTask}
	b.ReportAllocs()
	start := cputime.Used()
	for b.Loop() {
		r.Started()
		o.Decided(d, time.Millisecond)
		r.Served(s)
	}
	cputime.Report(b, start, b.N)
}

// TestRequestMetricsSeries: the request and decision metrics, counted
// through the series each door keeps by slot and each label set resolves
// to once, count every request and decision of every label set, from many
// goroutines and two doors of one protocol at once, as WithLabelValues at
// each call did; the in-flight gauge is back to 0. Each method and outcome
// is counted a different number of times, so that series mixed up show.
func TestRequestMetricsSeries(t *testing.T) {
	reg := newRegistry()
	m := newMetrics(reg)
	doors := []*proxy.Door{sidecar(m, "mcp", "tools/call", "tasks/get"), sidecar(m, "mcp", "tools/call", "tasks/get")}
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			door := doors[w%2]
			for i := range each {
				for _, r := range []struct {
					method, outcome string
					n               int
				}{{"tools/call", proxy.OutcomeAllowed, 1}, {"tasks/get", proxy.OutcomeAllowed, 2}, {"tasks/get", proxy.OutcomeDenied, 3}, {"made/up", proxy.OutcomeError, i % 2}} {
					for range r.n {
						door.Requests().Started()
						door.Requests().Served(door.ServedAs(r.method, r.outcome, time.Millisecond))
					}
				}
				m.Decided(proxy.Decision{Protocol: "mcp", Allow: true, Reason: rules.ReasonAllowed, Type: "tools/call", Mode: "mcp"}, time.Millisecond)
				m.Decided(proxy.Decision{Protocol: "mcp", Allow: true, Reason: rules.ReasonAllowed, Type: "tasks/get", Mode: "mcp"}, time.Millisecond)
			}
		})
	}
	wg.Wait()
	out := scrape(t, &admin{reg: reg, ready: func() error { return nil }})
	hasLines(t, out,
		`warden_requests_total{door="sidecar",method="tools/call",outcome="allowed",protocol="mcp"} 400`,
		`warden_requests_total{door="sidecar",method="tasks/get",outcome="allowed",protocol="mcp"} 800`,
		`warden_requests_total{door="sidecar",method="tasks/get",outcome="denied",protocol="mcp"} 1200`,
		`warden_requests_total{door="sidecar",method="other",outcome="error",protocol="mcp"} 200`,
		`warden_request_duration_seconds_count{door="sidecar",method="tasks/get",outcome="denied",protocol="mcp"} 1200`,
		`warden_requests_in_flight{door="sidecar",protocol="mcp"} 0`,
		`warden_decisions_total{auth_reason="",decision="allow",message_type="tools/call",mode="mcp",protocol="mcp",reason="allowed"} 400`,
		`warden_decision_seconds_count{protocol="mcp"} 800`,
	)
	if n := strings.Count(out, "\nwarden_requests_total{"); n != 4 {
		t.Errorf("%d request series, want 4", n)
	}
}

// TestDecisionSeriesLabels: a decision found by its mode and type as they
// came is counted under them only when they are labels; a mode or type
// Warden does not know (a literal "other" included) is counted as other,
// and a client sending ever new ones makes no new series: the series held
// are one per label set.
func TestDecisionSeriesLabels(t *testing.T) {
	reg := newRegistry()
	m := newMetrics(reg)
	allow := proxy.Decision{Protocol: "macp", Allow: true, Reason: rules.ReasonAllowed, Type: "TaskUpdate", Mode: macp.ModeTask}
	deny := proxy.Decision{Protocol: "macp", Code: rules.CodeForbidden, Reason: rules.ReasonNotOwner, Type: "TaskUpdate", Mode: macp.ModeTask}
	for i := range 100 {
		d := allow
		d.Type = fmt.Sprintf("Made%d", i)
		m.Decided(d, time.Millisecond)
		d.Type, d.Mode = "other", fmt.Sprintf("macp.mode.made%d.v1", i)
		m.Decided(d, time.Millisecond)
		m.Decided(allow, time.Millisecond)
		m.Decided(deny, time.Millisecond)
	}
	out := scrape(t, &admin{reg: reg, ready: func() error { return nil }})
	for _, want := range []string{
		`warden_decisions_total{auth_reason="",decision="allow",message_type="TaskUpdate",mode="macp.mode.task.v1",protocol="macp",reason="allowed"} 100`,
		`warden_decisions_total{auth_reason="",decision="allow",message_type="other",mode="macp.mode.task.v1",protocol="macp",reason="allowed"} 100`,
		`warden_decisions_total{auth_reason="",decision="allow",message_type="other",mode="other",protocol="macp",reason="allowed"} 100`,
		`warden_decisions_total{auth_reason="",decision="deny",message_type="TaskUpdate",mode="macp.mode.task.v1",protocol="macp",reason="not_task_owner"} 100`,
		`warden_decision_seconds_count{protocol="macp"} 400`,
	} {
		if !strings.Contains(out, "\n"+want+"\n") {
			t.Errorf("no line %s in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\nwarden_decisions_total{"); n != 4 {
		t.Errorf("%d decision series, want 4", n)
	}
	if held := len(*m.decidedOf.m.Load()); held != 4 {
		t.Errorf("%d decision series held, want 4 (one per label set)", held)
	}
}

// BenchmarkRequestMetricsParallel is BenchmarkRequestMetrics from every
// core at once, with a decision.
func BenchmarkRequestMetricsParallel(b *testing.B) {
	m := newMetrics(newRegistry())
	door := sidecar(m, "mcp", "tools/call")
	r, s := door.Requests(), door.ServedAs("tools/call", proxy.OutcomeAllowed, time.Millisecond)
	d := proxy.Decision{Protocol: "mcp", Allow: true, Reason: rules.ReasonAllowed, Type: "tools/call", Mode: "mcp"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Started()
			m.Decided(d, time.Millisecond)
			r.Served(s)
		}
	})
}

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/pushrelay"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/macp"
	"github.com/agentwarden/warden/rules/mcp"
)

// metrics records decisions for Prometheus. Label values come from closed
// sets: a message type or mode Warden does not know is "other", so a client
// cannot grow the series.
type metrics struct {
	decisions *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	upstream  *prometheus.CounterVec
	rebuilds  *prometheus.CounterVec
	conflicts prometheus.Counter
	// shareDrops counts the entries dropped for a principal's share, by
	// table and store (owners.ShareObserver).
	shareDrops *prometheus.CounterVec
	// reloads counts SIGHUP reloads by result; lastReload is when the
	// configuration last loaded whole (start-up or a reload).
	reloads    *prometheus.CounterVec
	lastReload prometheus.Gauge
	// requests, requestSeconds and inFlight are the requests every door
	// served (proxy.RequestObserver).
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	inFlight       *prometheus.GaugeVec
	// The children of the vectors counted at every request and decision,
	// by their label values (series): one look-up when a request starts,
	// one when it is served, one per decision.
	inFlightOf series[[2]string, prometheus.Gauge]
	requestOf  series[[4]string, requestSeries]
	decidedOf  series[[6]string, decidedSeries]
	droppedOf  series[[2]string, prometheus.Counter]
	// tlsReloads counts the listeners' TLS material reloads by result.
	tlsReloads *prometheus.CounterVec
	// answers reads the HTTP sidecars' answer budgets when scraped.
	answers *answerBudget
	// labels are the closed sets of decision modes and types.
	labels labelSets
	now    func() time.Time
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_decisions_total", Help: "Decisions by protocol, mode, message type, outcome, reason and, for authentication failures, why (auth_reason).",
		}, []string{"protocol", "mode", "message_type", "decision", "reason", "auth_reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "warden_decision_seconds", Help: "Time to decide one message.",
			Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 2.5e-2, 0.1},
		}, []string{"protocol"}),
	}
	m.upstream = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_upstream_errors_total", Help: "Calls to an upstream that failed (down, unreachable, transport errors), by protocol.",
	}, []string{"protocol"})
	m.rebuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_rebuilds_total", Help: "MACP session states rebuilt from the runtime, by result.",
	}, []string{"result"})
	m.conflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "warden_state_conflicts_total", Help: "Decisions on MACP sessions shared through Redis that found the session changed by another replica (decided again).",
	})
	m.shareDrops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_share_drops_total", Help: "Entries dropped because their principal went past its share (enforcer.sessions_per_principal) of a table: its own least recently used, then refused as not found. By table (owners, client_tasks, tools, bindings, macp_sessions) and store (memory: this replica's table; redis: the shared state).",
	}, []string{"table", "store"})
	for _, t := range []string{owners.TableOwners, owners.TableClientTasks, owners.TableTools, owners.TableBindings} {
		m.shareDrops.WithLabelValues(t, owners.StoreMemory)
	}
	for _, t := range []string{owners.TableOwners, owners.TableMACPSessions} {
		m.shareDrops.WithLabelValues(t, owners.StoreRedis)
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warden_build_info", Help: "Always 1; the labels say which Warden runs: its version and the Go release it was built with.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(versionString(), runtime.Version()).Set(1)
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_reload_total", Help: "Configuration reloads (SIGHUP) by result: success (everything replaced) or failure (everything kept).",
	}, []string{"result"})
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	m.lastReload = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "warden_last_reload_success_timestamp_seconds", Help: "Unix time the configuration last loaded whole: at start-up, then at each successful reload.",
	})
	m.now = time.Now
	m.labels = newLabelSets()
	m.lastReload.Set(float64(m.now().UnixNano()) / 1e9)
	requestLabels := []string{"protocol", "door", "method", "outcome"}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_requests_total", Help: "Requests served, by protocol, door (sidecar, ext_authz), method (the protocol's, else other) and outcome (allowed, denied, error).",
	}, requestLabels)
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "warden_request_duration_seconds", Help: "Time from a request's arrival to the end of its answer (a stream's whole life), by protocol, door, method and outcome.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, requestLabels)
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warden_requests_in_flight", Help: "Requests being served (streams open included), by protocol and door.",
	}, []string{"protocol", "door"})
	m.tlsReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warden_tls_reload_total", Help: "Reloads of a listener's TLS certificate, key and client CA bundle (SIGHUP, or a file that changed), by listener and result: success (replaced) or failure (the old material kept).",
	}, []string{"listener", "result"})
	m.inFlightOf.child = func(k [2]string) prometheus.Gauge { return m.inFlight.WithLabelValues(k[:]...) }
	m.requestOf.child = func(k [4]string) requestSeries {
		return requestSeries{m.inFlightOf.of([2]string{k[0], k[1]}), m.requests.WithLabelValues(k[:]...), m.requestSeconds.WithLabelValues(k[:]...)}
	}
	m.decidedOf.child = func(k [6]string) decidedSeries {
		return decidedSeries{m.decisions.WithLabelValues(k[:]...), m.latency.WithLabelValues(k[0])}
	}
	m.droppedOf.child = func(k [2]string) prometheus.Counter { return m.shareDrops.WithLabelValues(k[:]...) }
	m.answers = &answerBudget{
		held: prometheus.NewDesc("warden_answer_bytes_in_flight",
			"Bytes of answers the HTTP sidecars hold now to check them whole, by protocol: what <protocol>.streams.answer_bytes bounds.", []string{"protocol"}, nil),
		refused: prometheus.NewDesc("warden_answer_budget_refusals_total",
			"Answers refused (HTTP 503 with Retry-After, or an event stream ended with an error) because they would have taken the answer bytes in flight past <protocol>.streams.answer_bytes, by protocol.", []string{"protocol"}, nil),
	}
	reg.MustRegister(m.decisions, m.latency, m.upstream, m.rebuilds, m.conflicts, m.shareDrops, build, m.reloads, m.lastReload, m.requests, m.requestSeconds, m.inFlight, m.tlsReloads, m.answers)
	return m
}

// answerBudget is the HTTP sidecars' answer bytes in flight, read from each
// sidecar's budget (listener.Streams) when scraped, so that a request pays
// nothing for the metrics: the bytes held now and the answers refused.
type answerBudget struct {
	held, refused *prometheus.Desc
	mu            sync.Mutex
	of            []answerSource
}

// answerSource is one sidecar's budget: its protocol and how to read it.
type answerSource struct {
	protocol string
	read     func() listener.AnswerStats
}

// answersOf reads the answer budget of protocol's sidecar with read at
// every scrape.
func (m *metrics) answersOf(protocol string, read func() listener.AnswerStats) {
	m.answers.mu.Lock()
	defer m.answers.mu.Unlock()
	m.answers.of = append(m.answers.of, answerSource{protocol, read})
}

// Describe implements prometheus.Collector.
func (a *answerBudget) Describe(ch chan<- *prometheus.Desc) {
	ch <- a.held
	ch <- a.refused
}

// Collect implements prometheus.Collector.
func (a *answerBudget) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	of := a.of
	a.mu.Unlock()
	for _, s := range of {
		st := s.read()
		ch <- prometheus.MustNewConstMetric(a.held, prometheus.GaugeValue, float64(st.Held), s.protocol)
		ch <- prometheus.MustNewConstMetric(a.refused, prometheus.CounterValue, float64(st.Refused), s.protocol)
	}
}

// Requests implements proxy.RequestObserver: the door's series, taken
// once, when the door is built.
func (m *metrics) Requests(d *proxy.Door) proxy.Requests {
	return &doorSeries{m: m, protocol: d.Protocol().Name, door: d.Name(), served: make([]atomic.Pointer[requestSeries], d.Slots())}
}

// doorSeries are one door's request series (proxy.Requests): its in-flight
// gauge, and each method and outcome's by its slot (proxy.Served.Slot), so
// that a request counted looks none of its labels up. Each is made when
// first counted, through the metrics' series by labels (a series is
// exported once something is counted in it, as with WithLabelValues at
// each request), and then kept; two goroutines making one at once find
// the same.
type doorSeries struct {
	m              *metrics
	protocol, door string
	inFlight       atomic.Pointer[gauge]
	served         []atomic.Pointer[requestSeries]
}

// gauge is a gauge held by an atomic.Pointer.
type gauge struct{ prometheus.Gauge }

// Started implements proxy.Requests.
func (s *doorSeries) Started() {
	g := s.inFlight.Load()
	if g == nil {
		g = &gauge{s.m.inFlightOf.of([2]string{s.protocol, s.door})}
		s.inFlight.Store(g)
	}
	g.Inc()
}

// Served implements proxy.Requests.
func (s *doorSeries) Served(x proxy.Served) {
	slot := &s.served[x.Slot()]
	r := slot.Load()
	if r == nil {
		c := s.m.requestOf.of([4]string{s.protocol, s.door, x.Method, x.Outcome})
		r = &c
		slot.Store(r)
	}
	r.inFlight.Dec()
	r.count.Inc()
	r.seconds.Observe(x.Took.Seconds())
}

// requestSeries are a served request's series: its protocol and door's
// in-flight gauge, its count and its duration.
type requestSeries struct {
	inFlight prometheus.Gauge
	count    prometheus.Counter
	seconds  prometheus.Observer
}

// decidedSeries are a decision's series: its count and its protocol's
// decision time.
type decidedSeries struct {
	count   prometheus.Counter
	seconds prometheus.Observer
}

// series holds the children of a metric vector by their label values, read
// without a lock: WithLabelValues hashes and validates the values and takes
// the vector's read lock (a shared cache line written) at every call, seven
// calls per request. The label values come from closed sets (a client
// cannot grow the series), so series holds no more entries than the vector
// has series; a new one copies the map (copy on write).
type series[K comparable, M any] struct {
	m     atomic.Pointer[map[K]M]
	mu    sync.Mutex
	child func(K) M // the vector's child for k (WithLabelValues)
}

// cached is the child for k when one was made (of), without making one.
func (s *series[K, M]) cached(k K) (M, bool) {
	if m := s.m.Load(); m != nil {
		c, ok := (*m)[k]
		return c, ok
	}
	var zero M
	return zero, false
}

// of is the child for k.
func (s *series[K, M]) of(k K) M {
	if c, ok := s.cached(k); ok {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[K]M{}
	if m := s.m.Load(); m != nil {
		if c, ok := (*m)[k]; ok {
			return c
		}
		old = *m
	}
	next := make(map[K]M, len(old)+1)
	maps.Copy(next, old)
	c := s.child(k)
	next[k] = c
	s.m.Store(&next)
	return c
}

// tlsReloaded counts a TLS reload of listener's material.
func (m *metrics) tlsReloaded(listener string, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	m.tlsReloads.WithLabelValues(listener, result).Inc()
}

// reloaded counts a reload's outcome and, when it succeeded, its time.
func (m *metrics) reloaded(err error) {
	if err != nil {
		m.reloads.WithLabelValues("failure").Inc()
		return
	}
	m.reloads.WithLabelValues("success").Inc()
	m.lastReload.Set(float64(m.now().UnixNano()) / 1e9)
}

// UpstreamFailed implements proxy.EventObserver.
func (m *metrics) UpstreamFailed(protocol string) {
	if protocol != "macp" && protocol != "mcp" && protocol != "a2a" {
		protocol = "other"
	}
	m.upstream.WithLabelValues(protocol).Inc()
}

// Rebuilt implements proxy.EventObserver.
func (m *metrics) Rebuilt(ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.rebuilds.WithLabelValues(result).Inc()
}

// SessionConflict implements sessions.ConflictObserver.
func (m *metrics) SessionConflict() { m.conflicts.Inc() }

// ShareDropped implements owners.ShareObserver.
func (m *metrics) ShareDropped(table, store string, n int) {
	m.droppedOf.of([2]string{table, store}).Add(float64(n))
}

// ShareDropped implements owners.ShareObserver for every observer that does.
func (o observers) ShareDropped(table, store string, n int) {
	for _, x := range o {
		if s, ok := x.(owners.ShareObserver); ok {
			s.ShareDropped(table, store, n)
		}
	}
}

// SessionConflict implements sessions.ConflictObserver for every observer that
// does.
func (o observers) SessionConflict() {
	for _, x := range o {
		if c, ok := x.(sessions.ConflictObserver); ok {
			c.SessionConflict()
		}
	}
}

// Requests implements proxy.RequestObserver for every observer that does:
// the one's series when one does (the metrics), else all of theirs.
func (o observers) Requests(d *proxy.Door) proxy.Requests {
	var all allRequests
	for _, x := range o {
		if r, ok := x.(proxy.RequestObserver); ok {
			if s := r.Requests(d); s != nil {
				all = append(all, s)
			}
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

// allRequests counts a door's requests in each of several series.
type allRequests []proxy.Requests

// Started implements proxy.Requests.
func (a allRequests) Started() {
	for _, r := range a {
		r.Started()
	}
}

// Served implements proxy.Requests.
func (a allRequests) Served(s proxy.Served) {
	for _, r := range a {
		r.Served(s)
	}
}

// UpstreamFailed implements proxy.EventObserver for every observer that does.
func (o observers) UpstreamFailed(protocol string) {
	for _, x := range o {
		if e, ok := x.(proxy.EventObserver); ok {
			e.UpstreamFailed(protocol)
		}
	}
}

// Rebuilt implements proxy.EventObserver for every observer that does.
func (o observers) Rebuilt(ok bool) {
	for _, x := range o {
		if e, is := x.(proxy.EventObserver); is {
			e.Rebuilt(ok)
		}
	}
}

// labelSets are the closed sets a decision's mode and type are labelled
// from: anything else is "other".
type labelSets struct{ modes, types map[string]bool }

// newLabelSets fills the label sets from the one catalog of MACP modes and
// types (macp.ModeTypes), the MCP methods Warden decides, the A2A methods
// and the A2A push relay's deliveries.
func newLabelSets() labelSets {
	l := labelSets{modes: map[string]bool{"mcp": true, "a2a": true, "": true}, types: map[string]bool{}}
	for m := range macp.ModeTypes {
		l.modes[m] = true
	}
	for _, t := range macp.MessageTypes() {
		l.types[t] = true
	}
	for _, t := range []string{mcp.MethodToolsCall, mcp.MethodList, mcp.MethodGet, mcp.MethodResult, mcp.MethodCancel,
		mcp.MethodUpdate, mcp.MethodSteer, mcp.MethodPause, mcp.MethodResume} {
		l.types[t] = true
	}
	for _, t := range append(a2a.Methods(), pushrelay.MessageType) {
		l.types[t] = true
	}
	return l
}

func label(known map[string]bool, v string) string {
	if known[v] {
		return v
	}
	return "other"
}

// observers tells every observer of every decision.
type observers []proxy.Observer

// Decided implements proxy.Observer.
func (o observers) Decided(d proxy.Decision, took time.Duration) {
	for _, x := range o {
		x.Decided(d, took)
	}
}

// Decided implements proxy.Observer. A decision's mode and type are
// looked up as they came first: a series is made only for labels (a mode
// or type Warden does not know is "other"), so one found for the values as
// they came is theirs, and only a decision with an unknown mode or type
// pays the label look-ups.
func (m *metrics) Decided(d proxy.Decision, took time.Duration) {
	k := [6]string{d.Protocol, d.Mode, d.Type, proxy.DecisionLabel(d), string(d.Reason), d.AuthReason}
	s, ok := m.decidedOf.cached(k)
	if !ok {
		k[1], k[2] = label(m.labels.modes, k[1]), label(m.labels.types, k[2])
		s = m.decidedOf.of(k)
	}
	s.count.Inc()
	s.seconds.Observe(took.Seconds())
}

// admin serves /healthz, /readyz, /metrics and, when asked (admin.pprof),
// the Go profiler under /debug/pprof/ (the admin port belongs on a private
// interface).
type admin struct {
	addr  string
	reg   *prometheus.Registry
	ready func() error
	log   *slog.Logger
	idle  time.Duration // a connection idle this long between requests is closed; 0: adminIdle
	pprof bool          // serve /debug/pprof/
}

// The admin port's bounds, so that whoever reaches it (the example
// manifests bind it to the pod's address, for the kubelet's probes) holds
// no connection, goroutine and file descriptor of the process's without
// end: a connection idle adminIdle between requests is closed (Prometheus
// and the probes open another), the port holds adminConns connections, one
// source address adminPerSource of them (listener.Bound: a newcomer from
// another address takes the place of the one holding the most, so a flood
// from one address does not keep the kubelet's probes out).
const (
	adminIdle      = 60 * time.Second
	adminConns     = 64
	adminPerSource = 16
)

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// handler serves the admin endpoints. /healthz is liveness only: it
// answers while the process serves; /readyz answers 503 while an upstream
// is unreachable.
func (a *admin) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	if a.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (a *admin) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", a.addr)
	if err != nil {
		return fmt.Errorf("admin listen: %w", err)
	}
	return a.serve(ctx, lis)
}

// serve serves the admin endpoints on lis, within the admin port's bounds,
// until ctx ends.
func (a *admin) serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: cmp.Or(a.idle, adminIdle)}
	a.log.Info("admin listening", "listen", lis.Addr().String())
	lis = listener.Bound(lis, listener.ConnBounds{Max: adminConns, PerSource: adminPerSource}, a.log)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("admin serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-errc; err == nil && !errors.Is(e, http.ErrServerClosed) {
		err = e
	}
	return err
}

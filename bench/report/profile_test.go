package report

import (
	"bytes"
	"encoding/json"
	"math"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// stackProfile builds a CPU profile of stacks (leaf first; a frame "a|b"
// is one location with b inlined into a... b the caller) each sampled n
// times, 10 ms a sample, over 2 s.
func stackProfile(stacks []struct {
	frames []string
	n      int64
}) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10_000_000,
		DurationNanos: 2_000_000_000,
	}
	fns := map[string]*profile.Function{}
	fn := func(name string) *profile.Function {
		if f, ok := fns[name]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(fns) + 1), Name: name}
		fns[name] = f
		p.Function = append(p.Function, f)
		return f
	}
	for _, s := range stacks {
		var locs []*profile.Location
		for _, frame := range s.frames {
			loc := &profile.Location{ID: uint64(len(p.Location) + 1)}
			for _, name := range strings.Split(frame, "|") {
				loc.Line = append(loc.Line, profile.Line{Function: fn(name)})
			}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{s.n, s.n * 10_000_000}})
	}
	return p
}

func TestSummarize(t *testing.T) {
	p := stackProfile([]struct {
		frames []string
		n      int64
	}{
		// a copy under encoding/json is json's
		{[]string{"runtime.memmove", "bytes.(*Buffer).Write", "encoding/json.(*encodeState).string", "github.com/agentwarden/warden/proxy/a2a.rewrite",
			"net/http.HandlerFunc.ServeHTTP", "net/http.(*conn).serve", "runtime.goexit"}, 10},
		// an allocation anywhere is the allocator's
		{[]string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "encoding/json.Unmarshal", "github.com/agentwarden/warden/proxy/a2a.parse",
			"net/http.(*conn).serve", "runtime.goexit"}, 5},
		// a write is a syscall, under net/http
		{[]string{"internal/runtime/syscall.Syscall6", "syscall.Syscall", "syscall.write", "internal/poll.(*FD).Write", "net.(*conn).Write",
			"net/http.(*persistConn).writeLoop", "runtime.goexit"}, 8},
		// a wake-up from grpc-go is a syscall too
		{[]string{"runtime.futex", "runtime.futexwakeup", "runtime.notewakeup", "runtime.startm", "runtime.wakep", "runtime.ready",
			"runtime.goready.func1", "runtime.systemstack", "google.golang.org/grpc/internal/transport.(*controlBuffer).put", "runtime.goexit"}, 4},
		// the background mark worker
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker.func2", "runtime.systemstack", "runtime.gcBgMarkWorker", "runtime.goexit"}, 6},
		// nothing but the runtime: the scheduler
		{[]string{"runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"}, 2},
		// hpack inlined into the frame relay: one location, two lines
		{[]string{"golang.org/x/net/http2/hpack.(*Encoder).WriteField|github.com/agentwarden/warden/proxy/frames.(*conn).writeHeaders", "runtime.goexit"}, 2},
		{[]string{"github.com/open-policy-agent/opa/v1/topdown.evalTerm", "github.com/agentwarden/warden/policies.(*Engine).Decide", "runtime.goexit"}, 2},
		{[]string{"github.com/redis/go-redis/v9.(*Client).Do", "runtime.goexit"}, 1},
	})
	// through the wire format, as the bench reads it
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.Samples != 40 || s.Seconds != 2 || math.Abs(s.SampledCores-0.2) > 1e-9 {
		t.Errorf("samples %d, seconds %v, cores %v; want 40, 2, 0.2", s.Samples, s.Seconds, s.SampledCores)
	}
	want := map[string][2]float64{ // flat, cum
		LayerSyscalls:  {12.0 / 40, 12.0 / 40},
		LayerGC:        {11.0 / 40, 11.0 / 40},
		LayerScheduler: {2.0 / 40, 2.0 / 40},
		LayerNetHTTP:   {0, 23.0 / 40},
		LayerHTTP2:     {2.0 / 40, 2.0 / 40},
		LayerGRPC:      {0, 4.0 / 40},
		LayerFrames:    {0, 2.0 / 40},
		LayerJSON:      {10.0 / 40, 15.0 / 40},
		LayerOPA:       {2.0 / 40, 2.0 / 40},
		LayerWarden:    {0, 15.0 / 40},
		LayerOther:     {1.0 / 40, 1.0 / 40},
	}
	var order []string
	for _, l := range s.Layers {
		order = append(order, l.Name)
		w, ok := want[l.Name]
		if !ok || math.Abs(l.Flat-w[0]) > 1e-9 || math.Abs(l.Cum-w[1]) > 1e-9 {
			t.Errorf("layer %s: flat %.3f cum %.3f; want %.3f %.3f", l.Name, l.Flat, l.Cum, w[0], w[1])
		}
	}
	if len(s.Layers) != len(want) {
		t.Errorf("layers %q, want %d of them", order, len(want))
	}
	var flat, cum []string
	for _, f := range s.TopFlat {
		flat = append(flat, f.Name)
	}
	for _, f := range s.TopCum {
		cum = append(cum, f.Name)
	}
	if got := strings.Join(flat, ","); got != "runtime.memmove,internal/runtime/syscall.Syscall6,runtime.scanobject" {
		t.Errorf("top flat %s", got)
	}
	// roots (runtime.goexit, runtime.systemstack) are left out of the cum
	if got := strings.Join(cum, ","); got != "net/http.(*conn).serve,bytes.(*Buffer).Write,encoding/json.(*encodeState).string" {
		t.Errorf("top cum %s", got)
	}
	if _, err := Summarize(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}, 3); err == nil {
		t.Error("a heap profile summarized")
	}
}

// A real CPU profile of a loop that encodes and decodes JSON says json.
func TestSummarizeRealProfile(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("CPU profiling is taken: %v", err)
	}
	v := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": map[string]any{"taskId": strings.Repeat("t", 64), "n": []int{1, 2, 3}}}
	for end := time.Now().Add(700 * time.Millisecond); time.Now().Before(end); {
		b, _ := json.Marshal(v)
		var back map[string]any
		_ = json.Unmarshal(b, &back)
	}
	pprof.StopCPUProfile()
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(p, 10)
	if err != nil {
		t.Skipf("no samples (a loaded machine): %v", err)
	}
	// under -race the samples in the race detector's C code have no Go
	// stack: they are the scheduler layer's, and the rest is compared
	var jsonCum, jsonGC, attributed float64 = 0, 0, 1
	for _, l := range s.Layers {
		switch l.Name {
		case LayerJSON:
			jsonCum = l.Cum
			jsonGC += l.Flat
		case LayerGC:
			jsonGC += l.Flat
		case LayerScheduler:
			attributed -= l.Flat
		}
	}
	if jsonCum < 0.5*attributed || jsonGC < 0.6*attributed {
		t.Errorf("json cum %.2f, json and gc flat %.2f, of %.2f attributed (%d samples); want over half and 60%%: %+v %+v", jsonCum, jsonGC, attributed, s.Samples, s.Layers, s.TopFlat)
	}
}

func TestShortName(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/agentwarden/warden/proxy/frames.(*conn).readDown":                                                                           "warden/proxy/frames.(*conn).readDown",
		"github.com/agentwarden/warden/proxy.observed[go.shape.struct { Principal *github.com/agentwarden/warden/authn.Principal; Op string }]": "warden/proxy.observed[...]",
		"github.com/hashicorp/golang-lru/v2.(*Cache[go.shape.uint64,go.shape.struct { k string; d []rules.Verdict }]).Get":                      "github.com/hashicorp/golang-lru/v2.(*Cache[...]).Get",
		"google.golang.org/grpc/internal/transport.(*loopyWriter).run":                                                                          "grpc/internal/transport.(*loopyWriter).run",
		"golang.org/x/net/http2.(*Framer).ReadFrame":                                                                                            "x/net/http2.(*Framer).ReadFrame",
		"slices.SortFunc[...]": "slices.SortFunc[...]",
	} {
		if got := ShortName(fn); got != want {
			t.Errorf("ShortName(%q) = %q, want %q", fn, got, want)
		}
	}
}

// TestCheckSampling: a profile that saw less than half the CPU measured
// over its run is flagged, in the record (undersampled) and in its
// description, instead of being summarized as if it were representative.
func TestCheckSampling(t *testing.T) {
	for _, tc := range []struct {
		name              string
		sampled, measured float64
		err               string
		want              bool
	}{
		{"2026-11-27's MCP tasks/get", 0.01, 0.16, "", true},
		{"just under half", 0.079, 0.16, "", true},
		{"half", 0.08, 0.16, "", false},
		{"sampled as measured", 0.20, 0.20, "", false},
		{"no measurement", 0.01, 0, "", false},
		{"no profile", 0, 0.16, "HTTP 500", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Profile{Group: "g", Side: Warden, Load: "500 req/s", Seconds: 10, SampledCores: tc.sampled, MeasuredCores: tc.measured, Throughput: 500, Error: tc.err}
			p.CheckSampling()
			if p.Undersampled != tc.want {
				t.Fatalf("undersampled %v, want %v", p.Undersampled, tc.want)
			}
			if got := strings.Contains(p.describe(), "UNDERSAMPLED"); got != tc.want {
				t.Errorf("description %q: flagged %v, want %v", p.describe(), got, tc.want)
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), `"undersampled":true`); got != tc.want {
				t.Errorf("record %s: flagged %v, want %v", b, got, tc.want)
			}
		})
	}
}

// With the null hop's profile beside it, Warden's section sets its CPU per
// 1,000/s by layer against the null hop's and lists the null hop's top
// functions; a baseline that could not be taken is said, and the section
// stays Warden's alone.
func TestMarkdownBaseline(t *testing.T) {
	warden := Profile{Group: "A2A GetTask", Side: Warden, Load: "1000 req/s", Seconds: 10, Samples: 400, SampledCores: 0.4, MeasuredCores: 0.41, Throughput: 1000,
		Layers:  []Share{{LayerSyscalls, 0.5, 0.5}, {LayerGC, 0.2, 0.2}, {LayerNetHTTP, 0.2, 0.8}, {LayerWarden, 0.1, 0.6}},
		TopFlat: []Share{{"syscall.Syscall6", 0.4, 0.4}}, TopCum: []Share{{"net/http.(*conn).serve", 0.01, 0.8}}}
	null := Profile{Group: "A2A GetTask", Side: NullHTTP, Load: "1000 req/s", File: "x-profiles/a2a-null-cpu.pprof", Seconds: 10, Samples: 330, SampledCores: 0.33,
		MeasuredCores: 0.34, Throughput: 1000, Layers: []Share{{LayerSyscalls, 0.6, 0.6}, {LayerGC, 0.1, 0.1}, {LayerNetHTTP, 0.3, 0.9}},
		TopFlat: []Share{{"runtime.futex", 0.3, 0.3}}, TopCum: []Share{{"net/http/httputil.(*ReverseProxy).ServeHTTP", 0.02, 0.7}}}
	failed := Profile{Side: NullHTTP, Error: "HTTP 404"}
	for _, tc := range []struct {
		name     string
		baseline *Profile
		want     []string
		not      []string
	}{
		{"beside the null hop", &null, []string{
			"| layer | flat | cum | null net/http hop flat | null net/http hop cum | Warden, core per 1,000/s | null net/http hop, core per 1,000/s | extra over the null hop |",
			// 0.5 x 41% = 20.5% against 0.6 x 34% = 20.4%
			"| syscalls (read, write, epoll, futex) | 50.0% | 50.0% | 60.0% | 60.0% | 20.5% | 20.4% | +0.1% |",
			"| runtime/gc (allocation, collection) | 20.0% | 20.0% | 10.0% | 10.0% | 8.2% | 3.4% | +4.8% |",
			"| net/http | 20.0% | 80.0% | 30.0% | 90.0% | 8.2% | 10.2% | -2.0% |",
			"| warden (decision, sidecars) | 10.0% | 60.0% | 0.0% | 0.0% | 4.1% | 0.0% | +4.1% |",
			"| all | 100% | | 100% | | 41.0% | 34.0% | +7.0% |",
			"| `syscall.Syscall6` | 40.0% | 40.0% | `net/http.(*conn).serve` | 1.0% | 80.0% |",
			"null net/http hop (CPU profile `x-profiles/a2a-null-cpu.pprof`; 1000 req/s (1000/s answered), 10 s, 330 samples",
			"| null net/http hop: top by flat | flat | cum | top by cum | flat | cum |",
			"| `runtime.futex` | 30.0% | 30.0% | `net/http/httputil.(*ReverseProxy).ServeHTTP` | 2.0% | 70.0% |",
			// the text report's line: largest extra first, syscalls' +0.1% left out
			"text: all +7.0%, runtime/gc (allocation, collection) +4.8%, warden (decision, sidecars) +4.1%, net/http -2.0%",
		}, nil},
		{"no baseline profile", &failed, []string{"(null net/http hop: no profile: HTTP 404)", "| layer | flat | cum |\n|---|---|---|\n| syscalls (read, write, epoll, futex) | 50.0% | 50.0% |"},
			[]string{"extra over the null hop", "null net/http hop: top by flat", "text: all"}},
		{"none", nil, []string{"| layer | flat | cum |\n", "| top by flat | flat | cum | top by cum | flat | cum |"}, []string{"null net/http hop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := warden
			p.Baseline = tc.baseline
			var b strings.Builder
			p.markdown(&b)
			b.WriteString("\ntext: " + p.extraText())
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("section lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("section has %q:\n%s", w, b.String())
				}
			}
		})
	}
}

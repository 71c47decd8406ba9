package report

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// Profile is what one CPU profile of a hop says about where its time goes,
// kept in the record beside the figures of its scenario.
type Profile struct {
	// Group is the scenario, as the figures' Group.
	Group string `json:"group"`
	// Side is the profiled hop (Warden) and Load the load it ran under
	// ("1000 msg/s", "saturation, 16 in flight").
	Side string `json:"side"`
	Load string `json:"load"`
	// File is the profile, relative to the record's directory.
	File string `json:"file,omitempty"`
	// Error, when set, says why there is no profile.
	Error string `json:"error,omitempty"`
	// Seconds is how long the profile ran; Samples how many CPU samples it
	// holds (100 a second of CPU: the figures below are that coarse).
	Seconds float64 `json:"seconds,omitempty"`
	Samples int64   `json:"samples,omitempty"`
	// SampledCores is the CPU the profile saw per second of it; MeasuredCores
	// the process's CPU from /proc over the same run (warm-up included).
	SampledCores  float64 `json:"sampled_cores,omitempty"`
	MeasuredCores float64 `json:"measured_cores,omitempty"`
	// Undersampled says the profile saw less than undersampledBelow of the
	// CPU measured (CheckSampling): its shares are of a biased sample and
	// the table says so.
	Undersampled bool `json:"undersampled,omitempty"`
	// Throughput is what the profiled run achieved (messages answered a
	// second), Failed how many of its messages failed or were dropped, and
	// FirstError the first failure: a profile of a run that did not carry
	// its load says little about the figures.
	Throughput float64 `json:"throughput_per_s,omitempty"`
	Failed     int64   `json:"failed,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
	// Layers is the CPU by layer (see Layers), in the order of Layers.
	Layers []Share `json:"layers,omitempty"`
	// TopFlat and TopCum are the functions with the most CPU of their own
	// and with the most CPU under them.
	TopFlat []Share `json:"top_flat,omitempty"`
	TopCum  []Share `json:"top_cum,omitempty"`
	// Baseline is the null hop's profile taken the same way right after
	// (same load, same length), when the scenario has one that can be
	// profiled: the report sets Warden's layers against it.
	Baseline *Profile `json:"baseline,omitempty"`
}

// Share is a layer's or a function's part of a profile's CPU: flat is the
// samples it was running itself (a function) or was charged with (a layer:
// see Summarize), cum the samples with it anywhere on the stack; both are
// fractions of the profile's total.
type Share struct {
	Name string  `json:"name"`
	Flat float64 `json:"flat"`
	Cum  float64 `json:"cum"`
}

// The layers a profile's CPU is charged to, in the order the report lists
// them. Syscalls and GC are told by function (runtime.futex, runtime.mallocgc,
// ...); the others by the package of a frame.
const (
	LayerSyscalls  = "syscalls (read, write, epoll, futex)"
	LayerGC        = "runtime/gc (allocation, collection)"
	LayerScheduler = "runtime (scheduler, other)"
	LayerNetHTTP   = "net/http"
	LayerHTTP2     = "x/net/http2 (framer, hpack)"
	LayerGRPC      = "grpc"
	LayerProtobuf  = "protobuf"
	LayerFrames    = "frames (proxy/frames)"
	LayerJSON      = "json"
	LayerOPA       = "opa"
	LayerAuthn     = "authn, crypto"
	LayerTelemetry = "metrics, logs, traces"
	LayerWarden    = "warden (decision, sidecars)"
	LayerOther     = "other"
)

// Layers are the layers in report order.
var Layers = []string{LayerSyscalls, LayerGC, LayerScheduler, LayerNetHTTP, LayerHTTP2, LayerGRPC, LayerProtobuf,
	LayerFrames, LayerJSON, LayerOPA, LayerAuthn, LayerTelemetry, LayerWarden, LayerOther}

// packageLayers map package path prefixes to layers, most specific first.
var packageLayers = []struct {
	prefix, layer string
}{
	{"github.com/agentwarden/warden/proxy/frames", LayerFrames},
	{"github.com/agentwarden/warden/policies", LayerOPA},
	{"github.com/agentwarden/warden/authn", LayerAuthn},
	{"github.com/agentwarden/warden/rules/jsonrpc", LayerJSON},
	{"github.com/agentwarden/warden/wire", LayerProtobuf},
	{"github.com/agentwarden/warden/decisionlog", LayerTelemetry},
	{"github.com/agentwarden/warden", LayerWarden},
	{"github.com/open-policy-agent/", LayerOPA},
	{"github.com/vektah/gqlparser", LayerOPA},
	{"github.com/go-jose/", LayerAuthn},
	{"github.com/lestrrat-go/", LayerAuthn},
	{"crypto/", LayerAuthn},
	{"golang.org/x/crypto/", LayerAuthn},
	{"encoding/json", LayerJSON},
	{"github.com/valyala/fastjson", LayerJSON},
	{"google.golang.org/grpc", LayerGRPC},
	{"google.golang.org/protobuf", LayerProtobuf},
	{"golang.org/x/net/http2", LayerHTTP2},
	{"vendor/golang.org/x/net/http2", LayerHTTP2},
	{"net/http", LayerNetHTTP},
	{"net/textproto", LayerNetHTTP},
	{"net/url", LayerNetHTTP},
	{"mime", LayerNetHTTP},
	{"golang.org/x/net/http", LayerNetHTTP},
	{"vendor/golang.org/x/net/http", LayerNetHTTP},
	{"github.com/prometheus/", LayerTelemetry},
	{"go.opentelemetry.io/", LayerTelemetry},
	{"log", LayerTelemetry},
}

// generic are the packages every layer calls (the standard library's
// plumbing): a sample in them is charged to the nearest caller outside them.
// So are C symbols (the race detector's).
var generic = []string{"runtime", "sync", "internal/", "bytes", "strings", "strconv", "sort", "slices", "maps",
	"unicode", "math", "reflect", "bufio", "io", "time", "context", "errors", "fmt", "container/", "hash/",
	"encoding/binary", "encoding/base64", "encoding/hex", "net", "os", "iter", "unique", "weak", "vendor/"}

// syscallPkgs and syscallFuncs are what enters the kernel.
var (
	syscallPkgs  = []string{"syscall", "internal/runtime/syscall", "golang.org/x/sys/unix"}
	syscallFuncs = []string{"runtime.futex", "runtime.epollwait", "runtime.usleep", "runtime.nanosleep",
		"runtime.osyield", "runtime.write1", "runtime.read", "runtime.madvise", "runtime.mmap", "runtime.sysMmap",
		"runtime.munmap", "runtime.tgkill", "runtime.rtsigprocmask", "runtime.sigaltstack"}
)

// gcPrefixes name the allocator's and the collector's functions.
var gcPrefixes = []string{"runtime.gc", "runtime.scan", "runtime.markroot", "runtime.greyobject", "runtime.findObject",
	"runtime.malloc", "runtime.newobject", "runtime.newarray", "runtime.makeslice", "runtime.growslice",
	"runtime.makemap", "runtime.rawstring", "runtime.rawbyteslice", "runtime.rawruneslice", "runtime.heapSetType",
	"runtime.nextFreeFast", "runtime.sweepone", "runtime.bgsweep", "runtime.bgscavenge", "runtime.wbBuf",
	"runtime.bulkBarrier", "runtime.(*mheap)", "runtime.(*mcache)", "runtime.(*mcentral)", "runtime.(*gcWork)",
	"runtime.(*gcControllerState)", "runtime.(*mspan)", "runtime.(*sweepLocked)", "runtime.(*pageAlloc)",
	"runtime.(*scavengerState)", "runtime.(*spanSet)", "runtime.(*gcBits)", "runtime.(*limiterEvent)"}

// roots are frames nearly every stack has: left out of the top by cum.
var roots = []string{"runtime.goexit", "runtime.main", "runtime.mcall", "runtime.mstart", "runtime.mstart0",
	"runtime.mstart1", "runtime.systemstack"}

// pkgOf is the package path of a function name as the profile spells it
// ("net/http.(*conn).serve" is in "net/http").
func pkgOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}

// inPackage reports whether pkg is one of the paths or below one; a path
// ending in '/' matches every package that starts with it.
func inPackage(pkg string, paths ...string) bool {
	for _, p := range paths {
		if pkg == p || strings.HasPrefix(pkg, p) && (strings.HasSuffix(p, "/") || pkg[len(p)] == '/') {
			return true
		}
	}
	return false
}

// layerOf is the layer a frame belongs to, and whether it is generic
// plumbing a sample is charged through to its caller.
func layerOf(fn string) (layer string, through bool) {
	pkg := pkgOf(fn)
	switch {
	case inPackage(pkg, syscallPkgs...) || slices.Contains(syscallFuncs, fn):
		return LayerSyscalls, false
	case pkg == "runtime" && slices.ContainsFunc(gcPrefixes, func(p string) bool { return strings.HasPrefix(fn, p) }):
		return LayerGC, false
	}
	for _, pl := range packageLayers {
		if inPackage(pkg, pl.prefix) {
			return pl.layer, false
		}
	}
	// a C symbol (no package: the race detector's, libc's) is plumbing too
	if inPackage(pkg, generic...) || !strings.Contains(fn, ".") {
		return LayerScheduler, true
	}
	return LayerOther, false
}

// Summarize reads a CPU profile: the CPU by layer and the top functions by
// flat and cum. A sample's flat is charged to the first frame from the leaf
// up that is not generic plumbing (runtime, sync, bytes, io, net, ...):
// a memmove under encoding/json is json's, a futex or a write anywhere is a
// syscall's, an allocation anywhere the allocator's, and a stack of nothing
// but the runtime the scheduler's. A layer's cum counts the samples with any
// of its frames on the stack.
func Summarize(p *profile.Profile, top int) (Profile, error) {
	cpu, count := -1, -1
	for i, st := range p.SampleType {
		switch {
		case st.Type == "cpu" && st.Unit == "nanoseconds":
			cpu = i
		case st.Type == "samples":
			count = i
		}
	}
	if cpu < 0 {
		return Profile{}, errors.New("not a CPU profile (no cpu/nanoseconds sample type)")
	}
	var total, samples int64
	layerFlat, layerCum := map[string]int64{}, map[string]int64{}
	fnFlat, fnCum := map[string]int64{}, map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[cpu]
		if v == 0 {
			continue
		}
		total += v
		if count >= 0 {
			samples += s.Value[count]
		}
		var stack []string // leaf first, inlined frames innermost first
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				if ln.Function != nil {
					stack = append(stack, ln.Function.Name)
				}
			}
		}
		charged := ""
		inLayer, inFn := map[string]bool{}, map[string]bool{}
		for _, fn := range stack {
			layer, through := layerOf(fn)
			if !through {
				inLayer[layer] = true
				if charged == "" {
					charged = layer
				}
			}
			if !inFn[fn] && !slices.Contains(roots, fn) {
				inFn[fn] = true
				fnCum[fn] += v
			}
		}
		switch {
		case len(stack) == 0:
			charged = LayerOther
		case charged == "": // nothing but plumbing: the scheduler's
			charged = LayerScheduler
		}
		if len(stack) > 0 {
			fnFlat[stack[0]] += v
		}
		inLayer[charged] = true
		layerFlat[charged] += v
		for l := range inLayer {
			layerCum[l] += v
		}
	}
	if total == 0 {
		return Profile{}, errors.New("the profile holds no CPU samples")
	}
	out := Profile{Samples: samples, Seconds: float64(p.DurationNanos) / 1e9}
	if p.DurationNanos > 0 {
		out.SampledCores = float64(total) / float64(p.DurationNanos)
	}
	frac := func(v int64) float64 { return float64(v) / float64(total) }
	for _, l := range Layers {
		if layerCum[l] > 0 {
			out.Layers = append(out.Layers, Share{Name: l, Flat: frac(layerFlat[l]), Cum: frac(layerCum[l])})
		}
	}
	topBy := func(by map[string]int64) []Share {
		s := make([]Share, 0, len(by))
		for fn := range by {
			s = append(s, Share{Name: fn, Flat: frac(fnFlat[fn]), Cum: frac(fnCum[fn])})
		}
		slices.SortFunc(s, func(a, b Share) int { return cmp.Or(cmp.Compare(by[b.Name], by[a.Name]), cmp.Compare(a.Name, b.Name)) })
		return s[:min(top, len(s))]
	}
	out.TopFlat, out.TopCum = topBy(fnFlat), topBy(fnCum)
	return out, nil
}

// shortNames shorten the module paths of function names for the table.
var shortNames = strings.NewReplacer("github.com/agentwarden/warden/", "warden/", "google.golang.org/grpc", "grpc",
	"google.golang.org/protobuf/", "protobuf/", "golang.org/x/net/", "x/net/", "github.com/open-policy-agent/opa/", "opa/")

// ShortName is a function name with its module path shortened and its
// type arguments left out ("observed[...]").
func ShortName(fn string) string {
	var b strings.Builder
	depth := 0
	for _, r := range fn {
		switch {
		case r == '[':
			if depth == 0 {
				b.WriteString("[...]")
			}
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return shortNames.Replace(b.String())
}

// undersampledBelow is the part of the measured CPU a profile must see not
// to be flagged: SIGPROF lands only when a kernel tick finds a thread
// running, so a process whose work keeps a fixed phase to the tick is seen
// far less than it runs (the 2026-11-27 bench's MCP tasks/get: 0.01 cores
// sampled of 0.16 measured).
const undersampledBelow = 0.5

// CheckSampling sets Undersampled when the profile saw less than
// undersampledBelow of the CPU measured over its run.
func (p *Profile) CheckSampling() { p.Undersampled = p.undersampled() }

// undersampled is CheckSampling's test; a record written before the flag
// existed is flagged when rendered again.
func (p Profile) undersampled() bool {
	return p.Error == "" && p.MeasuredCores > 0 && p.SampledCores < undersampledBelow*p.MeasuredCores
}

// describe says what the profile is: its load, length and samples.
func (p Profile) describe() string {
	if p.Error != "" {
		return "no profile: " + p.Error
	}
	d := fmt.Sprintf("%s (%.0f/s answered", p.Load, p.Throughput)
	if p.Failed > 0 {
		d += fmt.Sprintf(", %d failed: %s", p.Failed, p.FirstError)
	}
	d += fmt.Sprintf("), %.0f s, %d samples, %.2f cores sampled", p.Seconds, p.Samples, p.SampledCores)
	if p.MeasuredCores > 0 {
		d += fmt.Sprintf(", %.2f measured", p.MeasuredCores)
		if p.Throughput > 0 {
			d += fmt.Sprintf(" (%s per 1,000/s)", Format(100*p.MeasuredCores/(p.Throughput/1000), "% core"))
		}
	}
	if p.Undersampled || p.undersampled() {
		d += fmt.Sprintf("; UNDERSAMPLED: the profile saw %.0f%% of the CPU measured, its shares may be biased", 100*p.SampledCores/p.MeasuredCores)
	}
	return d
}

// layersText is the layers by flat, largest first, those under 1% left out.
func (p Profile) layersText() string {
	ls := slices.Clone(p.Layers)
	slices.SortStableFunc(ls, func(a, b Share) int { return cmp.Compare(b.Flat, a.Flat) })
	var parts []string
	for _, l := range ls {
		if l.Flat >= 0.01 {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", l.Name, 100*l.Flat))
		}
	}
	return strings.Join(parts, ", ")
}

// extraText is Warden's CPU per 1,000/s over its baseline's, by layer
// (each layer's flat share of the CPU measured), largest first, those
// under 0.5% of a core either way left out ("" without a baseline with
// both measured).
func (p Profile) extraText() string {
	n := p.Baseline
	if n == nil || p.perThousand() == 0 || n.perThousand() == 0 {
		return ""
	}
	wk, nk := p.perThousand(), n.perThousand()
	type extra struct {
		name string
		v    float64
	}
	var es []extra
	for _, name := range Layers {
		if v := p.layer(name).Flat*wk - n.layer(name).Flat*nk; math.Abs(v) >= 0.5 {
			es = append(es, extra{name, v})
		}
	}
	slices.SortStableFunc(es, func(a, b extra) int { return cmp.Compare(b.v, a.v) })
	parts := []string{fmt.Sprintf("all %+.1f%%", wk-nk)}
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%s %+.1f%%", e.name, e.v))
	}
	return strings.Join(parts, ", ")
}

// perThousand is the CPU the profiled run measured per 1,000 messages a
// second, in % of a core (0: not measured).
func (p Profile) perThousand() float64 {
	if p.Error != "" || p.MeasuredCores <= 0 || p.Throughput <= 0 {
		return 0
	}
	return 100 * p.MeasuredCores / (p.Throughput / 1000)
}

// layer is the share of the named layer (zero when the profile has none).
func (p Profile) layer(name string) Share {
	for _, l := range p.Layers {
		if l.Name == name {
			return l
		}
	}
	return Share{Name: name}
}

// markdown writes the profile's section: its layers by flat and cum, then
// the top functions by flat and by cum side by side. With a baseline, the
// layer table sets Warden's CPU per 1,000/s by layer against the null
// hop's (each layer's flat share of the CPU measured), and the null hop's
// top functions follow.
func (p Profile) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n**Where the time goes** (%s: CPU profile", p.Side)
	if p.File != "" {
		fmt.Fprintf(b, " `%s`", p.File)
	}
	fmt.Fprintf(b, "; %s; taken in a run of its own after the measured ones):\n\n", p.describe())
	if p.Error != "" || len(p.Layers) == 0 {
		return
	}
	n := p.Baseline
	if n != nil && (n.Error != "" || len(n.Layers) == 0) {
		fmt.Fprintf(b, "(%s: no profile: %s)\n\n", n.Side, n.Error)
		n = nil
	}
	if n == nil {
		b.WriteString("| layer | flat | cum |\n|---|---|---|\n")
		for _, l := range p.Layers {
			fmt.Fprintf(b, "| %s | %.1f%% | %.1f%% |\n", l.Name, 100*l.Flat, 100*l.Cum)
		}
		p.topTable(b, "top by flat")
		return
	}
	wk, nk := p.perThousand(), n.perThousand()
	perK := wk > 0 && nk > 0
	fmt.Fprintf(b, "| layer | flat | cum | %s flat | %s cum |", n.Side, n.Side)
	if perK {
		fmt.Fprintf(b, " %s, core per 1,000/s | %s, core per 1,000/s | extra over the null hop |", p.Side, n.Side)
	}
	b.WriteString("\n|---|---|---|---|---|")
	if perK {
		b.WriteString("---|---|---|")
	}
	b.WriteString("\n")
	for _, name := range Layers {
		w, o := p.layer(name), n.layer(name)
		if w.Cum == 0 && o.Cum == 0 {
			continue
		}
		fmt.Fprintf(b, "| %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% |", name, 100*w.Flat, 100*w.Cum, 100*o.Flat, 100*o.Cum)
		if perK {
			fmt.Fprintf(b, " %.1f%% | %.1f%% | %+.1f%% |", w.Flat*wk, o.Flat*nk, w.Flat*wk-o.Flat*nk)
		}
		b.WriteString("\n")
	}
	if perK {
		fmt.Fprintf(b, "| all | 100%% | | 100%% | | %.1f%% | %.1f%% | %+.1f%% |\n", wk, nk, wk-nk)
	}
	p.topTable(b, "top by flat")
	fmt.Fprintf(b, "\n%s (CPU profile", n.Side)
	if n.File != "" {
		fmt.Fprintf(b, " `%s`", n.File)
	}
	fmt.Fprintf(b, "; %s; taken right after %s's, the same way):\n", n.describe(), p.Side)
	n.topTable(b, n.Side+": top by flat")
}

// topTable writes the top functions by flat and by cum side by side.
func (p Profile) topTable(b *strings.Builder, head string) {
	fmt.Fprintf(b, "\n| %s | flat | cum | top by cum | flat | cum |\n|---|---|---|---|---|---|\n", head)
	for i := range max(len(p.TopFlat), len(p.TopCum)) {
		row := make([]string, 0, 6)
		for _, list := range [][]Share{p.TopFlat, p.TopCum} {
			if i < len(list) {
				s := list[i]
				row = append(row, "`"+cell(ShortName(s.Name))+"`", fmt.Sprintf("%.1f%%", 100*s.Flat), fmt.Sprintf("%.1f%%", 100*s.Cum))
			} else {
				row = append(row, "", "", "")
			}
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(row, " | "))
	}
}

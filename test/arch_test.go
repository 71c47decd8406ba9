// Package test holds Warden's black-box tests: the architecture rules checked
// on the source tree, and (with the sidecars) tests of the built binary
// against real peers.
package test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/agentwarden/warden"

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// otelAPI is the OpenTelemetry API a door's request span and its W3C trace
// context need; the SDK and the exporters are cmd/warden's alone.
var otelAPI = []string{"go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/codes", "go.opentelemetry.io/otel/propagation", "go.opentelemetry.io/otel/trace"}

// allowed lists, per package, the module's packages and the third-party
// modules it may import (DESIGN.md §3: arrows point down the table only).
var allowed = map[string][]string{
	"wire":     {"google.golang.org/protobuf", "google.golang.org/grpc"},
	"rules":    {module + "/wire", "google.golang.org/protobuf", "github.com/dchest/siphash", "golang.org/x/net/idna"}, // keyed id digests replicas can share; host names read as HTTP clients read them (A2A webhooks)
	"policies": {module + "/rules", "github.com/open-policy-agent/opa", "github.com/hashicorp/golang-lru"},
	"authn":    {"github.com/go-jose/go-jose", "github.com/hashicorp/golang-lru", "golang.org/x/sync"},
	"proxy":    append([]string{module + "/rules", module + "/policies", module + "/authn", module + "/proxy/owners", "google.golang.org/protobuf/proto"}, otelAPI...), // protocol-free (checkCore); a recorded message is a proto.Message
	// the owner table of MCP and A2A tasks and contexts: protocol-free
	"proxy/owners": {},
	// the transport adapters may also use gRPC (and net/http, go-control-plane)
	// and the listener bounds they share, which imports no adapter
	"proxy/listener": {"google.golang.org/grpc", module + "/authn"}, // authn.WithProof: a valid credential proves its connection
	// the shared state backend: Redis only; proxy declares what it consumes
	"proxy/state": {"github.com/redis/go-redis"},
	// what the HTTP adapters share: sealed handles and the relay of an exchange
	"proxy/handle": {"golang.org/x/crypto/chacha20poly1305"},
	"proxy/relay":  append([]string{module + "/rules/jsonrpc"}, otelAPI...), // Warden's own JSON-RPC errors; the trace context to the upstream
	// the JSON-RPC front door every MCP and A2A door admits through
	"proxy/gate": append([]string{module + "/proxy", module + "/rules", module + "/authn"}, otelAPI...),
	// the HTTP/2 frame relay: protocol-neutral, x/net/http2 only
	"proxy/frames":   {"golang.org/x/net/http2", "golang.org/x/net/http/httpguts"},
	"proxy/macp":     {module + "/proxy", module + "/rules", module + "/policies", module + "/authn", module + "/proxy/owners", module + "/wire", module + "/proxy/listener", module + "/proxy/frames", "google.golang.org/grpc", "google.golang.org/protobuf", "go.opentelemetry.io/", "golang.org/x/net/http2/hpack"},
	"proxy/mcp":      {module + "/proxy", module + "/proxy/gate", module + "/proxy/owners", module + "/rules", module + "/policies", module + "/authn", module + "/proxy/listener", module + "/proxy/handle", module + "/proxy/relay"},
	"proxy/a2a":      {module + "/proxy", module + "/proxy/gate", module + "/proxy/owners", module + "/rules", module + "/policies", module + "/authn", module + "/proxy/listener", module + "/proxy/handle", module + "/proxy/relay", "github.com/google/uuid"}, // the context id Warden gives a new conversation
	"proxy/extauthz": append([]string{module + "/proxy", module + "/proxy/gate", module + "/rules", module + "/authn", module + "/wire", module + "/proxy/listener", "google.golang.org/", "github.com/envoyproxy/go-control-plane"}, otelAPI...),
	"decisionlog":    {module + "/proxy", module + "/rules", "google.golang.org/protobuf"},                                                                                     // include_input writes MACP envelopes as protojson
	"gc":             {},                                                                                                                                                       // the standard library only
	"replay":         {module + "/proxy", module + "/rules", module + "/policies", module + "/authn", module + "/wire", module + "/decisionlog", "google.golang.org/protobuf"}, // what-if reads and writes decision logs
	"replay/whatif":  {module + "/replay", module + "/proxy", module + "/rules", module + "/policies", module + "/authn", module + "/wire", module + "/decisionlog", "google.golang.org/protobuf"},
	"replay/audit":   {module + "/wire", "google.golang.org/grpc", "google.golang.org/protobuf"}, // a client of the targets it audits: never Warden's own code
	"cmd":            {""},                                                                       // anything
}

// TestImportGraph checks every non-test import of every package.
func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		top := strings.SplitN(rel, "/", 2)[0]
		if parts := strings.SplitN(rel, "/", 3); (top == "proxy" || top == "replay") && len(parts) > 1 {
			top = parts[0] + "/" + parts[1]
		}
		rules, ok := allowed[top]
		if !ok {
			continue // test/, bench/: not imported by anything
		}
		checked++
		if top == "rules" {
			checkPure(t, p)
		}
		checkProtocols(t, rel, p)
		if rel == "proxy" {
			checkCore(t, p)
		}
		if rel == "proxy/extauthz" {
			checkNoSidecar(t, p)
		}
		for _, imp := range p.Imports {
			if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				continue // standard library
			}
			if imp == module+"/"+top || top != "proxy" && strings.HasPrefix(imp, module+"/"+top+"/") {
				continue // within the same subtree (proxy must not import its adapters)
			}
			if !permitted(imp, rules) {
				t.Errorf("%s imports %s; allowed: %v", p.ImportPath, imp, rules)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages", checked)
	}
}

// ioImports are the packages that reach outside the process: the network,
// files, the environment, processes, gRPC, Redis. The rules (rules/...) are
// pure: state and one message in, a verdict out; time is an argument.
var ioImports = []string{"net", "net/http", "net/rpc", "net/smtp", "net/mail", "os", "os/exec", "os/signal", "io/ioutil", "syscall", "plugin", "database/sql", "crypto/tls", "log", "log/slog", "google.golang.org/grpc", "github.com/redis/", "github.com/prometheus/", "go.opentelemetry.io/"}

// checkPure: a package under rules/ imports no I/O package.
func checkPure(t *testing.T, p pkg) {
	t.Helper()
	for _, imp := range p.Imports {
		for _, banned := range ioImports {
			if imp == banned || strings.HasPrefix(imp, strings.TrimSuffix(banned, "/")+"/") && imp != "net/netip" && imp != "net/url" {
				t.Errorf("%s imports %s: the rules do no I/O", p.ImportPath, imp)
			}
		}
	}
}

// protocols are the protocols Warden decides; each has its pure rules
// (rules/<p>) and its decision, admission and sidecar (proxy/<p>).
var protocols = []string{"macp", "mcp", "a2a"}

// checkProtocols: no protocol's package imports another protocol's.
func checkProtocols(t *testing.T, rel string, p pkg) {
	t.Helper()
	own := ""
	for _, proto := range protocols {
		for _, layer := range []string{"rules/", "proxy/"} {
			if rel == layer+proto || strings.HasPrefix(rel, layer+proto+"/") {
				own = proto
			}
		}
	}
	if own == "" {
		return
	}
	for _, imp := range p.Imports {
		for _, other := range protocols {
			if other == own {
				continue
			}
			for _, layer := range []string{"rules/", "proxy/"} {
				if d := module + "/" + layer + other; imp == d || strings.HasPrefix(imp, d+"/") {
					t.Errorf("%s (%s) imports %s: one protocol's packages import no other protocol's", p.ImportPath, own, imp)
				}
			}
		}
	}
}

// checkCore: the core (proxy: the Enforcer, Decision, ids, dry run, the
// observer) imports no protocol's rules and no wire: each protocol's
// decision lives in its own package (proxy/macp/sessions, proxy/mcp/tasks,
// proxy/a2a/tenancy) and decides on the core.
func checkCore(t *testing.T, p pkg) {
	t.Helper()
	for _, imp := range p.Imports {
		for _, banned := range append([]string{"wire"}, protocols...) {
			d := module + "/" + banned
			if banned != "wire" {
				d = module + "/rules/" + banned
			}
			if imp == d || strings.HasPrefix(imp, d+"/") {
				t.Errorf("%s imports %s: the core names no protocol", p.ImportPath, imp)
			}
		}
	}
}

// checkNoSidecar: ext_authz maps Envoy's CheckRequest onto each protocol's
// admission and decision, shared with the sidecars; it imports no sidecar.
func checkNoSidecar(t *testing.T, p pkg) {
	t.Helper()
	for _, imp := range p.Imports {
		for _, proto := range protocols {
			if imp == module+"/proxy/"+proto {
				t.Errorf("%s imports %s: ext_authz imports no sidecar", p.ImportPath, imp)
			}
		}
	}
}

// TestArchNoAliases: the module's packages are imported under their own
// names, in every Go file of the product, bench/ and deploy/ (tests
// included, generated code aside). An alias that differs from the package
// name makes the same package read under two names; one that repeats the
// name and the import path's last element says nothing. An alias equal to a
// package name that is not the path's last element (macpv1 for
// wire/macp/v1) names what the path does not, and stays.
func TestArchNoAliases(t *testing.T) {
	names := map[string]string{} // import path -> package name
	pkgName := func(imp string) string {
		if n, ok := names[imp]; ok {
			return n
		}
		dir := filepath.Join("..", filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")))
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		n := ""
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			if af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly); err == nil {
				n = af.Name.Name
				break
			}
		}
		names[imp] = n
		return n
	}
	checked := 0
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".peers", "vendor", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		checked++
		for _, is := range f.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			if is.Name == nil || is.Name.Name == "_" || is.Name.Name == "." || imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			switch n := pkgName(imp); {
			case n == "":
				t.Errorf("%s: imports %s, whose package name this test cannot read", p, imp)
			case is.Name.Name != n:
				t.Errorf("%s: imports %s (package %s) as %s", p, imp, n, is.Name.Name)
			case n == path.Base(imp):
				t.Errorf("%s: imports %s as %s, which is its name already", p, imp, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files", checked)
	}
}

func permitted(imp string, prefixes []string) bool {
	for _, p := range prefixes {
		if imp == p || strings.HasPrefix(imp, p) {
			return true
		}
	}
	return false
}

// TestProductModule: the product's go.mod lists what the product runs. The
// load harness's chart and histogram libraries (bench/) and the Kubernetes
// API types the manifests' tests decode (deploy/) live in modules of their
// own, outside every user's dependency review; and the product builds
// without them (its go.mod alone, whatever go.work a developer has).
func TestProductModule(t *testing.T) {
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"gonum.org/", "k8s.io/", "sigs.k8s.io/", "github.com/HdrHistogram/"} {
		if strings.Contains(string(b), banned) {
			t.Errorf("go.mod requires %s*: a module of bench/ or deploy/, not of the product", banned)
		}
	}
	for _, m := range []string{"../bench/go.mod", "../deploy/go.mod"} {
		if _, err := os.Stat(m); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	cmd := exec.Command("go", "list", "-deps", "./...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the product alone (GOWORK=off go list -deps ./...): %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module+"/bench") || strings.HasPrefix(p, module+"/deploy") {
			t.Errorf("the product depends on %s", p)
		}
	}
}

// grpcServerAPI is grpc-go's server side: what a package that serves
// clients with grpc-go names (the client side, toward the runtime, is
// grpc.NewClient, ClientConn, CallOption, StreamDesc and the like).
var grpcServerAPI = map[string]bool{
	"NewServer": true, "Server": true, "ServerOption": true, "ServerStream": true, "ServiceDesc": true, "MethodDesc": true,
	"ServerTransportStream": true, "SetHeader": true, "SetTrailer": true, "SendHeader": true, "MethodFromServerStream": true,
	"UnknownServiceHandler": true, "StreamHandler": true, "StreamServerInfo": true, "UnaryServerInfo": true,
	"UnaryServerInterceptor": true, "StreamServerInterceptor": true, "StreamInterceptor": true, "UnaryInterceptor": true,
	"ChainStreamInterceptor": true, "ChainUnaryInterceptor": true, "InTapHandle": true, "ForceServerCodec": true,
	"Creds": true, "MaxRecvMsgSize": true, "MaxSendMsgSize": true, "StatsHandler": true,
}

// TestProductMACPServesNoGRPC: the product build of proxy/macp (no build
// tags) serves MACP with the relay alone (issue 28): none of its files
// names grpc-go's server API, imports grpc/tap or otelgrpc's server
// handler; the grpc-go front door is in the files built only with
// -tags wardenoracle, the test oracle. Before, server.go built a
// grpc.Server in the product.
func TestProductMACPServesNoGRPC(t *testing.T) {
	files := func(tags string) (string, []string) {
		out, err := exec.Command("go", "list", "-tags", tags, "-f", "{{.Dir}}\n{{range .GoFiles}}{{.}}\n{{end}}", module+"/proxy/macp").Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		lines := strings.Fields(string(out))
		return lines[0], lines[1:]
	}
	dir, product := files("")
	_, oracle := files("wardenoracle")
	if extra := slices.DeleteFunc(oracle, func(f string) bool { return slices.Contains(product, f) }); len(extra) == 0 {
		t.Errorf("-tags wardenoracle builds no file of proxy/macp the product does not: %v", oracle)
	}
	for _, name := range product {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		grpcName, otelName := "", ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			local := path.Base(p)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			switch p {
			case "google.golang.org/grpc":
				grpcName = local
			case "go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc":
				otelName = local
			case "google.golang.org/grpc/tap":
				t.Errorf("proxy/macp/%s imports %s, grpc-go's server tap, in the product build", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			switch {
			case !ok:
			case x.Name == grpcName && grpcServerAPI[sel.Sel.Name], x.Name == otelName && sel.Sel.Name == "NewServerHandler":
				t.Errorf("proxy/macp/%s names %s.%s, grpc-go's server side, in the product build (it belongs in a file built with -tags wardenoracle)", name, x.Name, sel.Sel.Name)
			}
			return true
		})
	}
}

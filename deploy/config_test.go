package deploy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	k8syaml "sigs.k8s.io/yaml"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	binDir    string
)

// warden builds cmd/warden once per test binary.
func warden(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "warden-deploy-test")
		if buildErr != nil {
			return
		}
		binary = filepath.Join(binDir, "warden")
		// From the repository root: deploy is a module of its own.
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/warden")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = err
			binary = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build warden: %v\n%s", buildErr, binary)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// mounted makes the files the example configurations name under
// /etc/warden/ (and the Kubernetes pod's /etc/warden-tls/) in a temporary
// directory: a certificate and key, the MCP handle key, the operator
// policies from deploy/config. It returns the directory.
func mounted(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	put := func(name string, b []byte) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warden"}, DNSNames: []string{"warden"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	crt, k := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	put("warden/tls/tls.crt", crt)
	put("warden/tls/tls.key", k)
	put("warden-tls/tls.crt", crt)
	put("warden-tls/tls.key", k)
	put("warden/mcp.key", []byte("c2VjcmV0LWtleS1zaGFyZWQtYnktcmVwbGljYXMtMzI=\n"))
	put("warden-keys/mcp.key", []byte("c2VjcmV0LWtleS1zaGFyZWQtYnktcmVwbGljYXMtMzI=\n"))
	put("warden/a2a.key", []byte("YW5vdGhlci1rZXktc2hhcmVkLWJ5LXJlcGxpY2FzLTMy\n"))
	for _, f := range []string{"operator.rego", "operator-mcp.rego", "operator-a2a.rego"} {
		b, err := os.ReadFile(filepath.Join("config", f))
		if err != nil {
			t.Fatal(err)
		}
		put("warden/"+f, b)
	}
	return dir
}

// check runs `warden check --config` on config with its /etc/ paths moved
// under dir, and returns the output.
func check(t *testing.T, name, config, dir string) string {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, p := range etcPaths(doc) {
		if _, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(p, "/etc/"))); err != nil {
			t.Fatalf("%s names %s, which neither deploy/config nor the test provides", name, p)
		}
	}
	f := filepath.Join(t.TempDir(), "warden.yaml")
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(config, "/etc/", dir+"/")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(warden(t), "check", "--config", f).CombinedOutput()
	if err != nil {
		t.Fatalf("warden check --config %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// filePaths returns every string value of a key that names a file
// (*_file, files) in a decoded YAML document.
func filePaths(v any) []string {
	var out []string
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			out = append(out, filePaths(x)...)
		}
	case map[string]any:
		for k, x := range v {
			switch x := x.(type) {
			case string:
				if strings.HasSuffix(k, "_file") {
					out = append(out, x)
				}
			case []any:
				if k == "files" {
					for _, e := range x {
						if e, ok := e.(string); ok {
							out = append(out, e)
						}
					}
					continue
				}
			}
			out = append(out, filePaths(x)...)
		}
	}
	return out
}

// etcPaths returns every string value under /etc/ in a decoded YAML document.
func etcPaths(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "/etc/") {
			out = append(out, v)
		}
	case []any:
		for _, x := range v {
			out = append(out, etcPaths(x)...)
		}
	case map[string]any:
		for _, x := range v {
			out = append(out, etcPaths(x)...)
		}
	}
	return out
}

// TestExampleConfigs: every example configuration, one per mode, passes
// `warden check --config` as shipped (serve's own validation, every file it
// names present), run from deploy/config, the directory its relative paths
// resolve against (the image's WORKDIR /etc/warden); it names no absolute
// path; and it serves what its name says.
func TestExampleConfigs(t *testing.T) {
	want := map[string]string{
		"macp-sidecar.yaml": "serves: MACP sidecar on 0.0.0.0:50051",
		"mcp-sidecar.yaml":  "serves: MCP sidecar on 0.0.0.0:3001",
		"a2a-sidecar.yaml":  "serves: A2A sidecar on 0.0.0.0:8443",
		"extauthz.yaml":     "serves: ext_authz on 127.0.0.1:9191 (MACP: StreamSession refused, GetSession decided on the sessions ext_authz keeps, ListSessions and the watches refused and MCP at /mcp)",
	}
	files, err := filepath.Glob("config/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Fatalf("deploy/config holds %v, want one per mode: %v", files, want)
	}
	bin := warden(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := yaml.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			for _, p := range filePaths(doc) {
				if filepath.IsAbs(p) {
					t.Errorf("%s names the absolute path %s: a clone cannot check it as shipped", f, p)
				}
			}
			// from the repository's root: relative paths resolve against the
			// configuration file's directory, not the working directory
			cmd := exec.Command(bin, "check", "--config", filepath.Join("deploy", "config", filepath.Base(f)))
			cmd.Dir = ".."
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("warden check --config deploy/config/%s: %v\n%s", filepath.Base(f), err, out)
			}
			if w := want[filepath.Base(f)]; !strings.Contains(string(out), w) || strings.Count(string(out), "serves:") != 1 {
				t.Errorf("output lacks %q (and only it):\n%s", w, out)
			}
			if !strings.Contains(string(out), ": extends warden.") {
				t.Errorf("the example's operator policy is not reported:\n%s", out)
			}
		})
	}
	dir := mounted(t)
	for _, manifest := range []string{"kubernetes/warden.yaml", "kubernetes/extauthz-replicas.yaml", "kubernetes/mcp-replicas.yaml"} {
		t.Run(manifest+" ConfigMap", func(t *testing.T) {
			b, err := os.ReadFile(manifest)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range strings.Split(string(b), "\n---\n") {
				var cm corev1.ConfigMap
				if err := k8syaml.Unmarshal([]byte(doc), &cm); err != nil || cm.Kind != "ConfigMap" {
					continue
				}
				for name, data := range cm.Data { // the ConfigMap is mounted at /etc/warden
					if err := os.WriteFile(filepath.Join(dir, "warden", name), []byte(data), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				check(t, "the ConfigMap's warden.yaml", cm.Data["warden.yaml"], dir)
				return
			}
			t.Fatal("no ConfigMap")
		})
	}
}

// TestDockerfile: the image carries the configuration its CMD names, stamps
// the version, exposes every port the example configurations listen on and
// its build context leaves out what is installed or built locally.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var (
		copies  = map[string]string{} // destination -> source
		sources []string              // the last stage's COPY sources but --from
		exposed []string
		cmd     string
		workdir string // the last stage's
		df      = string(b)
	)
	sc := bufio.NewScanner(strings.NewReader(df))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "COPY":
			if !strings.HasPrefix(f[1], "--from") {
				copies[f[len(f)-1]] = f[1]
				sources = append(sources, f[1:len(f)-1]...)
			}
		case "FROM":
			workdir, sources = "", nil
		case "WORKDIR":
			workdir = f[1]
		case "EXPOSE":
			exposed = append(exposed, f[1:]...)
		case "CMD":
			cmd = strings.Join(f[1:], " ")
		}
	}
	m := regexp.MustCompile(`"--config", "([^"]+)"`).FindStringSubmatch(cmd)
	if m == nil {
		t.Fatalf("CMD %s names no --config", cmd)
	}
	src, ok := copies[m[1]]
	if !ok {
		t.Fatalf("CMD reads %s, which no COPY provides (copies: %v)", m[1], copies)
	}
	if _, err := os.Stat(filepath.Join("..", src)); err != nil {
		t.Fatalf("the image's configuration %s: %v", src, err)
	}
	// The examples' relative paths resolve against the configuration file's
	// directory; the image also runs from there.
	if workdir != filepath.Dir(m[1]) {
		t.Errorf("WORKDIR %q: the image's configuration %s resolves its relative paths against %s", workdir, m[1], filepath.Dir(m[1]))
	}
	// deploy/config's example TLS pair and handle keys are for warden check
	// and local runs only: an image holding them would serve with a key
	// anyone can read.
	for _, src := range sources {
		for _, secret := range []string{"config/tls/tls.key", "config/mcp.key", "config/a2a.key"} {
			if ok, _ := filepath.Match(src, "deploy/"+secret); ok || strings.HasPrefix("deploy/"+secret, strings.TrimSuffix(src, "/")+"/") || src == "." {
				t.Errorf("COPY %s puts the example secret deploy/%s into the image", src, secret)
			}
		}
	}
	if !strings.Contains(df, "ARG VERSION") || !strings.Contains(df, "-X main.version=${VERSION}") {
		t.Error("the build must take a VERSION build arg into -ldflags -X main.version")
	}
	files, _ := filepath.Glob("config/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]map[string]any
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, section := range []string{"macp", "mcp", "a2a", "extauthz", "admin"} {
			addr, _ := cfg[section]["listen"].(string)
			if addr == "" {
				continue
			}
			port := addr[strings.LastIndex(addr, ":")+1:]
			if !slices.Contains(exposed, port) {
				t.Errorf("%s: %s.listen %s, but the Dockerfile does not EXPOSE %s (EXPOSE %v)", f, section, addr, port, exposed)
			}
		}
	}
	ign, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(ign), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			patterns = append(patterns, f[0])
		}
	}
	for _, p := range []string{".git", ".peers", ".tools", "bin", "**/node_modules", "/warden"} {
		if !slices.Contains(patterns, p) {
			t.Errorf(".dockerignore lacks %s", p)
		}
	}
	for _, p := range patterns {
		if p == "deploy" || p == "deploy/config" || p == "cmd" || p == "go.mod" {
			t.Errorf(".dockerignore leaves out %s, which the build needs", p)
		}
	}
}

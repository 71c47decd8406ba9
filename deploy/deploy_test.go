// Package deploy holds Warden's deployment assets (Envoy, Kubernetes,
// systemd, container); its tests check that they parse and validate against
// the real schemas.
package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp"
)

// loadBootstrap decodes an Envoy YAML bootstrap into go-control-plane's
// Bootstrap, rejecting unknown fields, and runs its validation.
func loadBootstrap(t *testing.T, file string) *bootstrapv3.Bootstrap {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	j, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &bs); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &bs
}

func TestEnvoy(t *testing.T) {
	for _, tc := range []struct {
		file     string
		minBytes uint32 // the upstream's own message limit
	}{
		// Warden's own limits: Envoy must buffer whatever Warden would
		// accept, or a message Warden allows is refused (413) before it is asked.
		{"envoy/macp.yaml", macp.DefaultMaxMessageBytes + 5}, // one gRPC message and its 5-byte prefix
		{"envoy/mcp.yaml", listener.DefaultMaxBodyBytes},     // mcp.max_body_bytes
	} {
		t.Run(tc.file, func(t *testing.T) { checkEnvoy(t, tc.file, tc.minBytes) })
	}
}

func checkEnvoy(t *testing.T, file string, minBytes uint32) {
	bs := loadBootstrap(t, file)
	var hcm hcmv3.HttpConnectionManager
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	var ext extauthzv3.ExtAuthz
	found := false
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.ext_authz" {
			if err := f.GetTypedConfig().UnmarshalTo(&ext); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no ext_authz filter")
	}
	// What Warden's Check relies on (proxy/extauthz tests build requests so):
	// the whole body, as bytes, and no request through when Warden fails.
	wb := ext.GetWithRequestBody()
	switch {
	case ext.GetFailureModeAllow():
		t.Error("failure_mode_allow must be false: Warden fails closed")
	case wb == nil || !wb.GetPackAsBytes():
		t.Error("with_request_body.pack_as_bytes must be set: Check reads raw_body")
	case wb.GetAllowPartialMessage():
		t.Error("allow_partial_message must be false: Check refuses truncated frames")
	case wb.GetMaxRequestBytes() < minBytes:
		t.Errorf("max_request_bytes %d is below %d: large messages would be cut", wb.GetMaxRequestBytes(), minBytes)
	case ext.GetGrpcService().GetTimeout().AsDuration() <= 0:
		t.Error("the ext_authz call needs a timeout")
	}
}

// TestKubernetes decodes every manifest strictly (an unknown field fails)
// into the Kubernetes API types, and checks that only Warden is exposed and
// that Warden's configuration loads.
func TestKubernetes(t *testing.T) {
	b, err := os.ReadFile("kubernetes/warden.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		cm  corev1.ConfigMap
		dep appsv1.Deployment
		svc corev1.Service
	)
	kinds := map[string]any{"ConfigMap": &cm, "Deployment": &dep, "Service": &svc}
	seen := map[string]bool{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta metav1.TypeMeta
		if err := k8syaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		obj, ok := kinds[meta.Kind]
		if !ok {
			t.Fatalf("unexpected kind %q", meta.Kind)
		}
		if err := k8syaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
		seen[meta.Kind] = true
	}
	if len(seen) != 3 {
		t.Fatalf("kinds %v", seen)
	}
	var warden, runtime *corev1.Container
	for i, c := range dep.Spec.Template.Spec.Containers {
		switch c.Name {
		case "warden":
			warden = &dep.Spec.Template.Spec.Containers[i]
		case "runtime":
			runtime = &dep.Spec.Template.Spec.Containers[i]
		}
	}
	if warden == nil || runtime == nil {
		t.Fatal("the pod needs the runtime and the warden containers")
	}
	for _, e := range runtime.Env {
		if e.Name == "MACP_BIND_ADDR" && !strings.HasPrefix(e.Value, "127.0.0.1:") {
			t.Errorf("the runtime listens on %s: it must be reachable only through Warden", e.Value)
		}
	}
	if len(runtime.Ports) != 0 {
		t.Error("the runtime container must not expose ports")
	}
	if svc.Spec.Ports[0].TargetPort.StrVal != "macp" || warden.Ports[0].Name != "macp" {
		t.Error("the Service must target Warden's macp port")
	}
	if warden.ReadinessProbe.HTTPGet.Path != "/readyz" || warden.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("probes must use Warden's admin endpoints")
	}
	// The configuration in the ConfigMap decodes strictly as Warden's.
	var cfg struct {
		Authn    map[string]any `yaml:"authn"`
		MACP     map[string]any `yaml:"macp"`
		Policies map[string]any `yaml:"policies"`
		Admin    map[string]any `yaml:"admin"`
		Log      map[string]any `yaml:"log"`
	}
	dec := yaml.NewDecoder(strings.NewReader(cm.Data["warden.yaml"]))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("warden.yaml in the ConfigMap: %v", err)
	}
	if cm.Data["operator.rego"] == "" {
		t.Error("the ConfigMap carries no operator policy file")
	}
}

// TestKubernetesReplicas decodes each replicated manifest strictly and
// checks that the Wardens are replicated, share one Redis through its
// Service, are exposed on their listener's port, probed on /readyz (which
// reports Redis), and that a server beside them is reachable only through
// its Warden.
func TestKubernetesReplicas(t *testing.T) {
	for _, tc := range []struct {
		manifest, deployment, service, section string
	}{
		{"kubernetes/extauthz-replicas.yaml", "warden-extauthz", "warden-extauthz", "extauthz"},
		{"kubernetes/mcp-replicas.yaml", "mcp-server", "mcp-server", "mcp"},
	} {
		t.Run(tc.manifest, func(t *testing.T) {
			b, err := os.ReadFile(tc.manifest)
			if err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			deps := map[string]*appsv1.Deployment{}
			svcs := map[string]*corev1.Service{}
			for _, doc := range strings.Split(string(b), "\n---\n") {
				var meta struct {
					metav1.TypeMeta   `json:",inline"`
					metav1.ObjectMeta `json:"metadata"`
				}
				if err := k8syaml.Unmarshal([]byte(doc), &meta); err != nil {
					t.Fatal(err)
				}
				var obj any
				switch meta.Kind {
				case "ConfigMap":
					obj = &cm
				case "Deployment":
					deps[meta.Name] = &appsv1.Deployment{}
					obj = deps[meta.Name]
				case "Service":
					svcs[meta.Name] = &corev1.Service{}
					obj = svcs[meta.Name]
				default:
					t.Fatalf("unexpected kind %q", meta.Kind)
				}
				if err := k8syaml.UnmarshalStrict([]byte(doc), obj); err != nil {
					t.Fatalf("%s %s: %v", meta.Kind, meta.Name, err)
				}
			}
			w, r := deps[tc.deployment], deps["warden-redis"]
			if w == nil || r == nil || svcs[tc.service] == nil || svcs["warden-redis"] == nil {
				t.Fatalf("want the Deployments and Services %s and warden-redis: %v %v", tc.deployment, deps, svcs)
			}
			if w.Spec.Replicas == nil || *w.Spec.Replicas < 2 {
				t.Errorf("%s is not replicated", tc.deployment)
			}
			var c *corev1.Container
			for i, x := range w.Spec.Template.Spec.Containers {
				switch {
				case x.Name == "warden":
					c = &w.Spec.Template.Spec.Containers[i]
				case len(x.Ports) != 0:
					t.Errorf("container %s exposes ports: only Warden may be reachable", x.Name)
				}
			}
			if c == nil {
				t.Fatal("no warden container")
			}
			if c.ReadinessProbe.HTTPGet.Path != "/readyz" || svcs[tc.service].Spec.Ports[0].TargetPort.StrVal != c.Ports[0].Name {
				t.Error("the Service must target Warden's listener port and Warden be probed on /readyz")
			}
			var cfg map[string]struct {
				Listen string `yaml:"listen"`
				URL    string `yaml:"url"`
			}
			if err := yaml.Unmarshal([]byte(cm.Data["warden.yaml"]), &cfg); err != nil {
				t.Fatal(err)
			}
			redisPort := svcs["warden-redis"].Spec.Ports[0].Port
			if want := "redis://warden-redis:" + strconv.Itoa(int(redisPort)) + "/0"; cfg["state"].URL != want {
				t.Errorf("state.url %q, want the Redis Service %s", cfg["state"].URL, want)
			}
			if l := cfg[tc.section].Listen; !strings.HasSuffix(l, ":"+strconv.Itoa(int(c.Ports[0].ContainerPort))) {
				t.Errorf("%s.listen %q is not the container's port %d", tc.section, l, c.Ports[0].ContainerPort)
			}
			if args := strings.Join(r.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--appendonly no") {
				t.Errorf("Redis args %q: the manifest documents a Redis without persistence", args)
			}
		})
	}
}

// TestImageTags: every image the manifests run names a version, never
// latest or no tag, so a rollout runs what was reviewed.
func TestImageTags(t *testing.T) {
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	image := regexp.MustCompile(`(?m)^\s*(?:-\s*)?image:\s*(\S+)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms := image.FindAllStringSubmatch(string(b), -1)
		if len(ms) == 0 {
			t.Errorf("%s: no image", f)
		}
		for _, m := range ms {
			ref := m[1]
			tag := ""
			if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
				tag = ref[i+1:]
			}
			if tag == "" || tag == "latest" {
				t.Errorf("%s: image %s names no version", f, ref)
			}
		}
	}
}

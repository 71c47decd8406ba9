// Package deploy holds Warden's deployment assets (Envoy, Kubernetes,
// systemd, container); its tests check that they parse and validate against
// the real schemas.
package deploy

import (
	"encoding/json"
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"
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

func TestEnvoyMACP(t *testing.T) {
	bs := loadBootstrap(t, "envoy/macp.yaml")
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
	case wb.GetMaxRequestBytes() < 1<<20:
		t.Errorf("max_request_bytes %d is below the runtime's 1 MiB payload limit", wb.GetMaxRequestBytes())
	case ext.GetGrpcService().GetTimeout().AsDuration() <= 0:
		t.Error("the ext_authz call needs a timeout")
	}
}

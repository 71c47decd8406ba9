package extauthz

import (
	"context"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
)

type observed struct {
	mu sync.Mutex
	ds []proxy.Decision
}

func (o *observed) Decided(d proxy.Decision, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds = append(o.ds, d)
}

// TestCheckSource: under ext_authz a decision records Envoy's source
// address of the client (attributes.source.address), the request's
// x-request-id (Envoy's) or a minted one, the method and the path without
// its query, on every protocol's door. Before, none of them.
func TestCheckSource(t *testing.T) {
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: []authn.Method{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: "203.0.113.5", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}}
	tests := []struct {
		name   string
		cfg    Config
		method string
		path   string
		ct     string
		reqID  string
	}{
		{"mcp, no credentials", Config{MCP: true, AllowedHosts: []string{"mcp.local"}}, "POST", "/mcp?x=1", "application/json", "envoy-1"},
		{"a2a, no credentials", Config{A2A: true}, "POST", "/", "application/json", ""},
		{"macp, unknown method", Config{}, "POST", "/macp.v1.MACPRuntimeService/Nope", "application/grpc", "envoy-3"},
		{"macp, not framed as gRPC", Config{}, "GET", "/macp.v1.MACPRuntimeService/Send", "text/plain", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &observed{}
			enf, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: engine, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			tt.cfg.Listen = "unused"
			srv, err := New(tt.cfg, macpOn(t, enf), nil)
			if err != nil {
				t.Fatal(err)
			}
			headers := map[string]string{":authority": "mcp.local", ":method": tt.method, ":path": tt.path, "content-type": tt.ct}
			if tt.reqID != "" {
				headers["x-request-id"] = tt.reqID
			}
			req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Source: src, Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
				Method: tt.method, Path: tt.path, Host: "mcp.local", Protocol: "HTTP/2", Headers: headers, RawBody: []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`),
			}}}}
			if _, err := srv.Check(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if len(obs.ds) != 1 || obs.ds[0].Allow {
				t.Fatalf("decisions %+v, want one refusal", obs.ds)
			}
			s := obs.ds[0].Source
			path := tt.path
			if tt.name == "mcp, no credentials" {
				path = "/mcp"
			}
			if s.Client != "203.0.113.5:40000" || s.Method != tt.method || s.Path != path || (tt.reqID != "" && s.RequestID != tt.reqID) || len(s.RequestID) == 0 {
				t.Fatalf("source %+v", s)
			}
		})
	}
}

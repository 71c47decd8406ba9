package main

import (
	"context"
	"testing"
)

// TestTracingFromEnvironment: which configuration turns tracing on, and
// which OTLP transport the environment can ask for. The black-box test
// (test/observe_test.go TestObservedRequests) shows the spans arrive; the
// OTEL_* variables were ignored before.
func TestTracingFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     TracingConfig
		env     map[string]string
		on      bool
		wantErr bool
	}{
		{name: "nothing set", on: false},
		{name: "flag", cfg: TracingConfig{OTLPEndpoint: "127.0.0.1:4317"}, on: true},
		{name: "endpoint variable", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{name: "traces endpoint variable, grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true},
		{name: "http/json is not offered", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: true},
		{name: "the traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, on: true},
		{name: "flag over a bad variable", cfg: TracingConfig{OTLPEndpoint: "127.0.0.1:4317"}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, on: true},
		{name: "disabled", cfg: TracingConfig{OTLPEndpoint: "127.0.0.1:4317"}, env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, stop, err := newTracerProvider(context.Background(), tc.cfg, func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil {
				defer stop()
			}
			if (tp != nil) != tc.on {
				t.Fatalf("tracer provider %v, want on %v", tp, tc.on)
			}
		})
	}
}

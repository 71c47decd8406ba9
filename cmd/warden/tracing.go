package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// newTracerProvider returns nil when tracing is off; the returned function
// flushes and stops the exporter. getenv reads the environment (os.Getenv).
//
// Tracing is on when tracing.otlp_endpoint (--otlp-endpoint) is set: spans
// go to that OTLP/gRPC collector, sampled at tracing.sample_ratio. Without
// it, the standard OpenTelemetry variables turn it on and configure it:
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and
// OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL: http/protobuf, the
// default, or grpc), with the exporter's other OTEL_EXPORTER_OTLP_* variables
// (headers, timeout, certificates) read by the exporter. Configuration and
// flags win over the environment; OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG apply when tracing.sample_ratio is not set
// (else parent-based, every new trace); OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override the resource's service.name (warden).
// OTEL_SDK_DISABLED=true turns tracing off whatever else is set.
func newTracerProvider(ctx context.Context, cfg TracingConfig, getenv func(string) string) (trace.TracerProvider, func(), error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, func() {}, nil
	}
	exp, err := newExporter(ctx, cfg, getenv)
	if exp == nil || err != nil {
		return nil, func() {}, err
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("warden"), semconv.ServiceVersion(versionString())),
		resource.Environment())
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)), sdktrace.WithResource(res)}
	if cfg.SampleRatio > 0 || getenv("OTEL_TRACES_SAMPLER") == "" {
		ratio := cfg.SampleRatio
		if ratio <= 0 {
			ratio = 1
		}
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
	} // else the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
	tp := sdktrace.NewTracerProvider(opts...)
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}

// newExporter is the span exporter the configuration or, without
// tracing.otlp_endpoint, the environment names; nil when neither does.
func newExporter(ctx context.Context, cfg TracingConfig, getenv func(string) string) (sdktrace.SpanExporter, error) {
	if cfg.OTLPEndpoint != "" {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.OTLPEndpoint)}
		host, _, err := net.SplitHostPort(cfg.OTLPEndpoint)
		if err != nil {
			return nil, fmt.Errorf("tracing.otlp_endpoint: %w", err)
		}
		if ip := net.ParseIP(host); cfg.Insecure || host == "localhost" || ip != nil && ip.IsLoopback() {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp exporter: %w", err)
		}
		return exp, nil
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	protocol, err := otlpProtocol(getenv)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx) // endpoint and the rest from OTEL_EXPORTER_OTLP_*
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp exporter (from OTEL_EXPORTER_OTLP_*): %w", err)
	}
	return exp, nil
}

// otlpProtocol is the OTLP transport the environment asks for:
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf (the specification's default). http/json is not
// offered by the Go exporters.
func otlpProtocol(getenv func(string) string) (string, error) {
	p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		p = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p = strings.TrimSpace(p); p {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	}
	return "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %s is not supported (grpc or http/protobuf)", strconv.Quote(p))
}

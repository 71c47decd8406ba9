package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// newTracerProvider returns nil when tracing is off; the returned function
// flushes and stops the exporter.
func newTracerProvider(ctx context.Context, cfg TracingConfig) (trace.TracerProvider, func(), error) {
	if cfg.OTLPEndpoint == "" {
		return nil, func() {}, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.OTLPEndpoint)}
	host, _, err := net.SplitHostPort(cfg.OTLPEndpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing.otlp_endpoint: %w", err)
	}
	if ip := net.ParseIP(host); cfg.Insecure || host == "localhost" || ip != nil && ip.IsLoopback() {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp exporter: %w", err)
	}
	ratio := cfg.SampleRatio
	if ratio <= 0 {
		ratio = 1
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("warden"), semconv.ServiceVersion(versionString()))),
	)
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}

package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, http.StatusTeapot, json.RawMessage(`"a"`), jsonrpc.ErrInvalidParams, "m")
	if w.Code != http.StatusTeapot || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != `{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"m"}}` {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestEventMax(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want int
	}{{-1, 0}, {0, 0}, {1, 1}, {64 << 20, 64 << 20}} {
		if got := EventMax(tc.in); got != tc.want {
			t.Errorf("EventMax(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestOutbound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		strip bool
		want  http.Header
	}{
		{"credentials kept", false, http.Header{"Authorization": {"Bearer t"}, "X-Macp-Token": {"m"}, "A2a-Version": {"1.0"}, "Accept-Encoding": {"identity"}}},
		{"credentials stripped", true, http.Header{"X-Macp-Token": {"m"}, "A2a-Version": {"1.0"}, "Accept-Encoding": {"identity"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := httptest.NewRequest(http.MethodPost, "http://other-agent.internal/rpc", nil)
			in.Header = http.Header{"Authorization": {"Bearer t"}, "X-Macp-Token": {"m"}, "A2a-Version": {"1.0"},
				"X-Warden-Principal": {"mallory"}, "Connection": {"close"}, "Accept-Encoding": {"gzip, deflate"}}
			out := httptest.NewRequest(http.MethodPost, "http://upstream.test/rpc", nil)
			out.Header = http.Header{}
			Outbound(out, in, tc.strip, "Authorization")
			if out.Host != "upstream.test" {
				t.Errorf("Host = %q, want the upstream's, never the client's", out.Host)
			}
			if len(out.Header) != len(tc.want) {
				t.Fatalf("headers %v, want %v", out.Header, tc.want)
			}
			for k, v := range tc.want {
				if got := out.Header.Values(k); len(got) != 1 || got[0] != v[0] {
					t.Errorf("%s = %v, want %v", k, got, v)
				}
			}
		})
	}
}

func TestBehalf(t *testing.T) {
	in := http.Header{"Authorization": {"Bearer t"}, "X-Macp-Token": {"m"}, "Mcp-Protocol-Version": {"2025-11-25"}, "X-Other": {"o"}, "Accept-Encoding": {"gzip"}}
	keys := []string{"authorization", "X-Macp-Token", "mcp-protocol-version", "Absent", "Accept-Encoding"}
	for _, tc := range []struct {
		name  string
		strip bool
		want  http.Header
	}{
		{"credentials kept", false, http.Header{"Authorization": {"Bearer t"}, "X-Macp-Token": {"m"}, "Mcp-Protocol-Version": {"2025-11-25"}, "Accept-Encoding": {"identity"}}},
		{"credentials stripped", true, http.Header{"Mcp-Protocol-Version": {"2025-11-25"}, "Accept-Encoding": {"identity"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := httptest.NewRequest(http.MethodPost, "http://upstream/", nil)
			Behalf(out, in, tc.strip, keys, "Authorization", "X-Macp-Token")
			if !reflect.DeepEqual(out.Header, tc.want) {
				t.Fatalf("headers %v, want %v", out.Header, tc.want)
			}
		})
	}
}

// TestOutboundTraceContext: the upstream request carries the trace context
// of the span its context holds (Warden's server span, in the client's
// trace), replacing the client's traceparent; without a span the client's
// trace context passes as it came. Outbound copied the client's only before.
func TestOutboundTraceContext(t *testing.T) {
	const client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=x")
	warden := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		parent, st string
	}{
		{"traced", trace.ContextWithSpanContext(context.Background(), warden), "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01", "vendor=x"},
		{"not traced", context.Background(), client, "client=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := httptest.NewRequest(http.MethodPost, "http://warden/", nil)
			in.Header.Set("Traceparent", client)
			in.Header.Set("Tracestate", "client=1")
			out := httptest.NewRequest(http.MethodPost, "http://upstream/", nil).WithContext(tc.ctx)
			Outbound(out, in, false)
			if got := out.Header.Values("Traceparent"); len(got) != 1 || got[0] != tc.parent {
				t.Errorf("traceparent %q, want %q", got, tc.parent)
			}
			if got := out.Header.Values("Tracestate"); len(got) != 1 || got[0] != tc.st {
				t.Errorf("tracestate %q, want %q", got, tc.st)
			}
		})
	}
}

// TestCopyHeaders: end-to-end headers are copied, hop-by-hop ones are not,
// and a value added to the copy never reaches the source.
func TestCopyHeaders(t *testing.T) {
	src := http.Header{
		"A":                 make([]string, 1, 4),
		"B":                 {"1", "2"},
		"Connection":        {"close"},
		"Transfer-Encoding": {"chunked"},
		"Content-Length":    {"3"},
	}
	src["A"][0] = "a"
	dst := http.Header{}
	CopyHeaders(dst, src)
	want := http.Header{"A": {"a"}, "B": {"1", "2"}}
	if !reflect.DeepEqual(dst, want) {
		t.Fatalf("copied %v, want %v", dst, want)
	}
	dst.Add("A", "added")
	dst.Add("B", "added")
	if got := src["A"][:cap(src["A"])][1]; got != "" {
		t.Errorf("an added value reached the source's spare capacity: %q", got)
	}
	if len(src["B"]) != 2 {
		t.Errorf("the source's B changed: %v", src["B"])
	}
	dst.Set("B", "set")
	if src.Get("B") != "1" {
		t.Errorf("Set on the copy changed the source: %v", src["B"])
	}
}

package extauthz

import (
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/gate"
)

// request is the gate's Request of Envoy's HTTP attributes: the path as
// sent with its query cut (the gate refuses one), the headers (Envoy joins repeated ones with
// commas; its pseudo-headers are left out), the credentials, and the body
// Envoy buffered, over the limit when Envoy says it cut it
// (x-envoy-auth-partial-body, with_request_body.allow_partial_message).
func request(h *authv3.AttributeContext_HttpRequest, creds authn.Credentials, credErr error) *gate.Request {
	hdr := make(http.Header, len(h.GetHeaders()))
	values := make([]string, 0, len(h.GetHeaders())) // one backing array for every header's one value
	for k, v := range h.GetHeaders() {
		if !strings.HasPrefix(k, ":") {
			values = append(values, v)
			hdr[http.CanonicalHeaderKey(k)] = values[len(values)-1 : len(values) : len(values)]
		}
	}
	body := h.GetRawBody()
	if len(body) == 0 {
		body = []byte(h.GetBody())
	}
	partial := strings.EqualFold(hdr.Get("X-Envoy-Auth-Partial-Body"), "true")
	path, _, query := strings.Cut(h.GetPath(), "?")
	return &gate.Request{
		Method: h.GetMethod(), Path: path, Query: query, Host: h.GetHost(), TLS: h.GetScheme() == "https", Header: hdr,
		Creds: creds, CredErr: credErr, HasBody: len(body) > 0 || h.GetSize() > 0,
		Body: func(limit int64) ([]byte, error) {
			switch {
			case int64(len(body)) > limit:
				return body[:limit], gate.ErrTooBig
			case partial:
				return body, gate.ErrCut
			}
			return body, nil
		},
	}
}

// denyAnswer is a gate Answer as Envoy's denied CheckResponse: its status,
// headers and body for the client, and the gRPC status of the check.
func denyAnswer(a gate.Answer) *authv3.CheckResponse {
	var headers []*corev3.HeaderValueOption
	for _, kv := range a.Headers() {
		headers = append(headers, header(strings.ToLower(kv[0]), kv[1]))
	}
	grpcCode := code.Code_PERMISSION_DENIED
	switch a.Status {
	case 401:
		grpcCode = code.Code_UNAUTHENTICATED
	case 400, 413, 415:
		grpcCode = code.Code_INVALID_ARGUMENT
	case 503:
		grpcCode = code.Code_UNAVAILABLE
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(grpcCode), Message: string(a.Body)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode(a.Status)}, Headers: headers, Body: string(a.Body),
		}},
	}
}

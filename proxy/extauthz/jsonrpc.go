package extauthz

import (
	"fmt"
	"net/http"
	"strconv"
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
// commas: Joined; its pseudo-headers are left out), the credentials, and the body
// Envoy buffered, refused as cut (gate.ErrCut) unless it is the whole body
// (bufferedBody).
func request(h *authv3.AttributeContext_HttpRequest, creds authn.Credentials, credErr error) *gate.Request {
	hdr := make(http.Header, len(h.GetHeaders()))
	values := make([]string, 0, len(h.GetHeaders())) // one backing array for every header's one value
	for k, v := range h.GetHeaders() {
		if !strings.HasPrefix(k, ":") {
			values = append(values, v)
			hdr[http.CanonicalHeaderKey(k)] = values[len(values)-1 : len(values) : len(values)]
		}
	}
	body, cut := bufferedBody(h)
	path, _, query := strings.Cut(h.GetPath(), "?")
	return &gate.Request{
		Method: h.GetMethod(), Path: path, Query: query, Host: h.GetHost(), TLS: h.GetScheme() == "https", Header: hdr, Joined: true,
		Creds: creds, CredErr: credErr, HasBody: len(body) > 0 || h.GetSize() > 0 || cut != nil,
		Body: func(limit int64) ([]byte, error) {
			if int64(len(body)) > limit {
				return body[:limit], gate.ErrTooBig
			}
			return body, cut
		},
	}
}

// bufferedBody is the body Envoy buffered for h (raw_body with
// pack_as_bytes, else body), with gate.ErrCut when it may not be the whole
// body: Envoy marked it partial (x-envoy-auth-partial-body: true, under
// with_request_body.allow_partial_message), or its length is not the one the
// request announced (attributes.request.http.size when known, and the
// Content-Length header, which must be one decimal number and agree). A
// body whose length was not announced (chunked, HTTP/2 without
// Content-Length) is whole unless marked: Envoy answers 413 itself past
// max_request_bytes without allow_partial_message. The one check of every
// ext_authz door (MCP, A2A, MACP's gRPC frame).
func bufferedBody(h *authv3.AttributeContext_HttpRequest) ([]byte, error) {
	body := h.GetRawBody()
	if len(body) == 0 {
		body = []byte(h.GetBody())
	}
	hdr := h.GetHeaders()
	if strings.EqualFold(hdr["x-envoy-auth-partial-body"], "true") {
		return body, gate.ErrCut
	}
	if size := h.GetSize(); size > 0 && size != int64(len(body)) {
		return body, fmt.Errorf("%w: the request announced %d bytes, %d reached Warden", gate.ErrCut, size, len(body))
	}
	if v, ok := hdr["content-length"]; ok {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return body, fmt.Errorf("%w: Content-Length %q is not one length", gate.ErrCut, v)
		}
		if n != uint64(len(body)) {
			return body, fmt.Errorf("%w: the request announced %d bytes, %d reached Warden", gate.ErrCut, n, len(body))
		}
	}
	return body, nil
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

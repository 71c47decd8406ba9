package extauthz

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// denyJSONRPC answers an MCP or A2A client with a JSON-RPC error body.
func denyJSONRPC(status int, id []byte, rpc int, msg, decisionID string) *authv3.CheckResponse {
	headers := []*corev3.HeaderValueOption{header("content-type", "application/json")}
	if decisionID != "" {
		headers = append(headers, header("x-warden-decision", decisionID))
	}
	grpcCode := code.Code_PERMISSION_DENIED
	switch status {
	case 401:
		grpcCode = code.Code_UNAUTHENTICATED
	case 400, 413, 415:
		grpcCode = code.Code_INVALID_ARGUMENT
	case 503:
		grpcCode = code.Code_UNAVAILABLE
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(grpcCode), Message: fmt.Sprintf("%d %s", rpc, msg)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode(status)}, Headers: headers,
			Body: string(jsonrpc.ErrorBody(id, rpc, msg)),
		}},
	}
}

// jsonBody returns a JSON-RPC request's body as Envoy buffered it, or why it
// cannot be decided on: a Content-Encoding other than identity means the
// server reads other bytes than these (Node's body-parser inflates gzip,
// deflate and br).
func jsonBody(h *authv3.AttributeContext_HttpRequest) ([]byte, string) {
	if ce := strings.TrimSpace(h.GetHeaders()["content-encoding"]); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, "a request body with Content-Encoding " + ce + " is not decided on (send it uncompressed)"
	}
	body := h.GetRawBody()
	if len(body) == 0 {
		body = []byte(h.GetBody())
	}
	return body, ""
}

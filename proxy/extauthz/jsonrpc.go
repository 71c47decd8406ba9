package extauthz

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/agentwarden/warden/proxy/listener"
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
// cannot be decided on (listener.CheckBodyEncoding: a Content-Encoding other
// than identity).
func jsonBody(h *authv3.AttributeContext_HttpRequest) ([]byte, string) {
	if err := listener.CheckBodyEncoding(h.GetHeaders()["content-encoding"]); err != nil {
		return nil, err.Error()
	}
	body := h.GetRawBody()
	if len(body) == 0 {
		body = []byte(h.GetBody())
	}
	return body, ""
}

package gate

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Answer is a request's refusal (or a public document served in its
// place) as a value: the HTTP status, headers and body, and the id of the
// decision that refused it. Write renders it on an http.ResponseWriter;
// ext_authz renders it as Envoy's denied CheckResponse.
type Answer struct {
	Status   int
	Header   [][2]string // besides Content-Type and X-Warden-Decision
	Body     []byte
	Decision string
}

// Headers are every header of the answer, Content-Type and
// X-Warden-Decision first.
func (a Answer) Headers() [][2]string {
	h := [][2]string{{"Content-Type", "application/json"}}
	if a.Decision != "" {
		h = append(h, [2]string{"X-Warden-Decision", a.Decision})
	}
	return append(h, a.Header...)
}

// Write sends the answer.
func (a Answer) Write(w http.ResponseWriter) {
	for _, kv := range a.Headers() {
		w.Header().Set(kv[0], kv[1])
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// jsonrpcAnswer is a JSON-RPC error answer.
func jsonrpcAnswer(status int, id json.RawMessage, rpc int, msg, decision string) Answer {
	return Answer{Status: status, Body: jsonrpc.ErrorBody(id, rpc, msg), Decision: decision}
}

// restAnswer is an answer in the HTTP+JSON binding's error shape (A2A
// §11.6), for paths that are not the JSON-RPC endpoint.
func restAnswer(status int, msg, decision string) Answer {
	text := strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "status": text, "message": msg}})
	return Answer{Status: status, Body: b, Decision: decision}
}

// Document is a public document served in a refusal's place (ext_authz
// answers Envoy with it): status 200, JSON.
func Document(body []byte) Answer { return Answer{Status: http.StatusOK, Body: body} }

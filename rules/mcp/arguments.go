package mcp

import (
	"encoding/json"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// The bounds on params.arguments before an operator policy reads them
// (jsonrpc.PolicyValue's, shared with A2A's message metadata).
const (
	MaxArgumentBytes = jsonrpc.MaxPolicyBytes
	MaxArgumentDepth = jsonrpc.MaxPolicyDepth
)

// PolicyArguments decodes params.arguments for the policy, bounded and with
// every member name checked (jsonrpc.PolicyValue): nil when absent or null.
func PolicyArguments(raw json.RawMessage) (any, rules.Verdict) {
	return jsonrpc.PolicyValue(raw, "params.arguments")
}

// PolicyInputResponses decodes params.inputResponses for the policy,
// bounded as PolicyArguments: nil when absent.
func PolicyInputResponses(raw json.RawMessage) (any, rules.Verdict) {
	return jsonrpc.PolicyValue(raw, "params.inputResponses")
}

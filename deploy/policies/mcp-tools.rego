# Example operator policy: only these tools for this principal.
#
# A principal listed in allowed_tools may call (tools/call) only the tools
# listed for it; a principal not listed is not restricted here. Load it with
# `warden serve --policy deploy/policies/mcp-tools.rego` (or policies.files),
# test it with `warden check --policy deploy/policies/mcp-tools.rego
# --policy deploy/policies/mcp-tools_test.rego`.
package warden.mcp

import rego.v1

# principal id -> the tools it may call.
allowed_tools := {"agent://support-bot": {"test_simple_text", "get_weather"}}

# The tool called, "" when the input has none: OPA evaluates a call's
# arguments before "not", so `not input.mcp.tool in ...` would be undefined,
# and refuse nothing, for an input without the member. Warden always sets it;
# the rule stays closed if it ever did not.
default called_tool := ""

called_tool := input.mcp.tool

deny contains {
	"code": "FORBIDDEN",
	"msg": sprintf("%s may call only these tools: %s", [input.principal.id, concat(", ", sort(allowed_tools[input.principal.id]))]),
} if {
	input.message.type == "tools/call"
	not called_tool in allowed_tools[input.principal.id]
}

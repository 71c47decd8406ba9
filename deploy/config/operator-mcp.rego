# Operator rules for MCP task methods, compiled with Warden's defaults, in
# package warden.mcp.
package warden.mcp

import rego.v1

# For example, one principal may create tasks but never steer them:
# deny contains {"code": "FORBIDDEN", "msg": "this agent may not steer"} if {
# 	input.message.type == "tasks/steer"
# 	input.principal.id == "agent://intern"
# }

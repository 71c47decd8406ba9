# Operator rules for A2A requests, compiled with Warden's defaults, in
# package warden.a2a.
package warden.a2a

import rego.v1

# For example, the extended agent card only for one client:
# deny contains {"code": "FORBIDDEN", "msg": "the extended card is for partners"} if {
# 	input.message.type == "GetExtendedAgentCard"
# 	input.principal.id != "agent://partner"
# }

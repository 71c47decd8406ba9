# A candidate operator policy: agent://worker may no longer send TaskComplete.
package warden.macp

import rego.v1

deny contains {"code": "FORBIDDEN", "reason": "operator_policy", "msg": "worker may not complete"} if {
	input.principal.id == "agent://worker"
	input.message.type == "TaskComplete"
}

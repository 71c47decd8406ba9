# A candidate operator policy: agent://worker may no longer accept a task.
# Its later messages depend on the acceptance: what-if must still decide
# them on the state the runtime saw (the acceptance committed).
package warden.macp

import rego.v1

deny contains {"code": "FORBIDDEN", "reason": "operator_policy", "msg": "worker may not accept"} if {
	input.principal.id == "agent://worker"
	input.message.type == "TaskAccept"
}

# Warden's default A2A policy (A2A 1.0, JSON-RPC binding).
#
# Authority over a task or context comes from the matrix in a2a_matrix.json:
# the roles the Enforcer computed for the caller (owner: the principal that
# created the task or context the request names, proven by its handle; new: a
# message that names none) and, where the spec restricts a method, the task
# states it is allowed in (no message to, and no subscription on, a task in
# a terminal state). A caller that does not own what it names gets
# TASK_NOT_FOUND, the answer a made-up id gets, so ids cannot be probed.
#
# Operators add `deny contains {...} if {...}` rules to this package, for
# example to say which principals may read the extended agent card.
package warden.a2a

import rego.v1

rank_authority := data.warden.ranks.coarse_authority

rank_status := data.warden.ranks.fine_authority

matrix := data.warden.a2a_matrix

holds(roles) if "*" in roles

holds(roles) if {
	some r in roles
	r in input.roles
}

deny contains {
	"code": "TASK_NOT_FOUND",
	"reason": "not_task_owner",
	"rank": rank_authority,
	"msg": "Task not found",
} if {
	entry := matrix[input.message.type]
	not holds(entry.roles)
	not "ownership_unknown" in input.roles
}

deny contains {
	"code": "INVALID_TASK_STATE",
	"reason": "task_state",
	"rank": rank_status,
	"msg": sprintf("%s is not allowed while the task is %s", [input.message.type, input.session.state]),
} if {
	entry := matrix[input.message.type]
	entry.statuses
	input.session.state != ""
	not input.session.state in entry.statuses
}

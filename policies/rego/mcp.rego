# Warden's default MCP tasks policy.
#
# Authority over a task comes from the matrix in mcp_matrix.json: the roles the
# Enforcer computed for the caller (owner: the principal that created the task)
# and, for the SEP-2669 rules, the statuses a method is allowed in. A caller
# that does not own a task gets TASK_NOT_FOUND, the answer an unknown task
# gets, so task IDs cannot be probed.
#
# Operators add `deny contains {...} if {...}` rules to this package, for
# example to say which principals may steer.
package warden.mcp

import rego.v1

# Ranks from data.warden.ranks (macp.RankNames).
rank_authority := data.warden.ranks.coarse_authority

rank_status := data.warden.ranks.fine_authority

matrix := data.warden.mcp_matrix

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
	"msg": sprintf("%s is not allowed while the task is %s (allowed: %s)", [input.message.type, input.session.state, concat(", ", entry.statuses)]),
} if {
	entry := matrix[input.message.type]
	entry.statuses
	input.session.state != ""
	not input.session.state in entry.statuses
}

# Example operator policy: only these MACP payload field values.
#
# Warden hands the policy the payload of each envelope as its rules decoded
# it, input.macp.payload, with the proto field names (proposal_id, vote,
# reason, ...): one reading of the bytes, the one the rules and the runtime
# make, with the values the runtime compares without regard to case
# normalized (a Vote's vote is "APPROVE", "REJECT" or "ABSTAIN" however the
# sender spelt it). Every field is present, unset ones as "", 0, false, []
# or null. A payload over 64 KiB is refused (PAYLOAD_TOO_LARGE) when a
# policy reads it.
#
# - A vote to reject a proposal gives a reason.
# - A quorum's ApprovalRequest asks for one of the actions listed.
#
# Test it with `warden check --policy deploy/policies/macp-payload.rego
# --policy deploy/policies/macp-payload_test.rego`.
package warden.macp

import rego.v1

approval_actions := {"deploy.staging", "refund.small"}

# The action, "" when the input has none (a payload the rules could not
# read, null): `not input.macp.payload.action in ...` would refuse nothing
# then.
default approval_action := ""

approval_action := input.macp.payload.action

deny contains {"code": "FORBIDDEN", "msg": "a REJECT vote must give a reason"} if {
	input.message.mode == "macp.mode.decision.v1"
	input.message.type == "Vote"
	input.macp.payload.vote == "REJECT"
	trim_space(input.macp.payload.reason) == ""
}

deny contains {
	"code": "FORBIDDEN",
	"msg": sprintf("approval may be requested only for these actions: %s", [concat(", ", sort(approval_actions))]),
} if {
	input.message.mode == "macp.mode.quorum.v1"
	input.message.type == "ApprovalRequest"
	not approval_action in approval_actions
}

# Rego unit tests of the default MACP policy; run by `go test ./policies/`
# and `warden check`.
package warden.macp_test

import rego.v1

import data.warden.macp

msg(mode, typ) := {"mode": mode, "type": typ, "sender": "agent://x", "id": "m1", "session_id": "s1"}

codes(result) := {d.code | some d in result}

test_active_assignee_may_update if {
	count(macp.deny) == 0 with input as {"message": msg("macp.mode.task.v1", "TaskUpdate"), "roles": ["participant", "active_assignee"]}
}

test_requester_may_not_update if {
	d := macp.deny with input as {"message": msg("macp.mode.task.v1", "TaskUpdate"), "roles": ["initiator", "participant", "commitment_authority"]}
	some x in d
	x.code == "FORBIDDEN"
	x.rank == 3
}

# A retransmission had its authority when first accepted: the active
# assignee's TaskComplete again, after the report ended that role.
test_retransmission_keeps_its_authority if {
	count(macp.deny) == 0 with input as {"message": msg("macp.mode.task.v1", "TaskComplete"), "roles": ["participant"], "verdict": {"code": "", "reason": "duplicate", "rank": 0}}
	d := macp.deny with input as {"message": msg("macp.mode.task.v1", "TaskComplete"), "roles": ["participant"], "verdict": {"code": "", "reason": "allowed", "rank": 0}}
	codes(d) == {"FORBIDDEN"}
}

# ... but not the credential's scopes.
test_retransmission_meets_the_scopes if {
	d := macp.deny with input as {"message": msg("macp.mode.task.v1", "TaskComplete"), "roles": ["participant"], "verdict": {"code": "", "reason": "duplicate", "rank": 0}, "principal": {"scopes": {"allowed_modes": ["macp.mode.decision.v1"]}}}
	codes(d) == {"FORBIDDEN"}
}

test_outsider_refused_before_mode_checks if {
	d := macp.deny with input as {"message": msg("macp.mode.decision.v1", "Vote"), "roles": []}
	some x in d
	x.code == "FORBIDDEN"
	x.rank == 1
}

test_only_offer_target_accepts if {
	count(macp.deny) == 0 with input as {"message": msg("macp.mode.handoff.v1", "HandoffAccept"), "roles": ["participant", "offer_target"]}
	d := macp.deny with input as {"message": msg("macp.mode.handoff.v1", "HandoffAccept"), "roles": ["participant"]}
	codes(d) == {"FORBIDDEN"}
}

test_unknown_type_needs_participant if {
	count(macp.deny) == 0 with input as {"message": msg("macp.mode.task.v1", "Bogus"), "roles": ["participant"]}
	count(macp.deny) == 1 with input as {"message": msg("macp.mode.task.v1", "Bogus"), "roles": []}
}

test_scopes_can_start_sessions if {
	d := macp.deny with input as {"message": msg("macp.mode.task.v1", "SessionStart"), "roles": ["initiator"], "principal": {"scopes": {"can_start_sessions": false}}}
	codes(d) == {"FORBIDDEN"}
}

test_scopes_allowed_modes if {
	d := macp.deny with input as {"message": msg("macp.mode.task.v1", "TaskUpdate"), "roles": ["participant", "active_assignee"], "principal": {"scopes": {"allowed_modes": ["macp.mode.handoff.v1"]}}}
	codes(d) == {"FORBIDDEN"}
	count(macp.deny) == 0 with input as {"message": msg("macp.mode.task.v1", "TaskUpdate"), "roles": ["participant", "active_assignee"], "principal": {"scopes": {"allowed_modes": ["macp.mode.task.v1"]}}}
}

commit(mode, facts, rules) := {
	"message": msg(mode, "Commitment"),
	"roles": ["initiator", "participant", "commitment_authority"],
	"facts": facts,
	"governance": {"id": "p", "schema_version": 2, "rules": rules},
}

test_positive_commitment_after_task_fail_refused if {
	d := macp.deny with input as commit("macp.mode.task.v1", {"outcome_positive": true, "report": "failed", "has_output": false}, {})
	codes(d) == {"POLICY_DENIED"}
}

test_negative_commitment_after_task_fail_allowed if {
	count(macp.deny) == 0 with input as commit("macp.mode.task.v1", {"outcome_positive": false, "report": "failed", "has_output": false}, {})
}

test_require_output if {
	d := macp.deny with input as commit("macp.mode.task.v1", {"outcome_positive": true, "report": "completed", "has_output": false}, {"completion": {"require_output": true}})
	codes(d) == {"POLICY_DENIED"}
	count(macp.deny) == 0 with input as commit("macp.mode.task.v1", {"outcome_positive": true, "report": "completed", "has_output": true}, {"completion": {"require_output": true}})
}

test_handoff_polarity if {
	count(macp.deny) == 0 with input as commit("macp.mode.handoff.v1", {"outcome_positive": true, "accepted": true, "declined": false}, {})
	count(macp.deny) == 1 with input as commit("macp.mode.handoff.v1", {"outcome_positive": true, "accepted": false, "declined": true}, {})
	count(macp.deny) == 1 with input as commit("macp.mode.handoff.v1", {"outcome_positive": false, "accepted": true, "declined": false}, {})
}

quorum(approvals, rejections, abstentions, eligible, required, positive) := {
	"approvals": approvals, "rejections": rejections, "abstentions": abstentions,
	"eligible": eligible, "required_approvals": required, "outcome_positive": positive,
}

test_quorum_threshold_reached if {
	count(macp.deny) == 0 with input as commit("macp.mode.quorum.v1", quorum(2, 0, 0, 3, 2, true), {})
}

test_quorum_not_ready if {
	d := macp.deny with input as commit("macp.mode.quorum.v1", quorum(1, 0, 0, 3, 2, true), {})
	"INVALID_ENVELOPE" in codes(d)
}

test_quorum_unreachable_allows_decline_only if {
	count(macp.deny) == 0 with input as commit("macp.mode.quorum.v1", quorum(0, 2, 0, 3, 2, false), {})
	d := macp.deny with input as commit("macp.mode.quorum.v1", quorum(0, 2, 0, 3, 2, true), {})
	"POLICY_DENIED" in codes(d)
}

test_quorum_policy_threshold_overrides_request if {
	# the request asks for 1 of 4; the policy wants 75% -> 3
	d := macp.deny with input as commit("macp.mode.quorum.v1", quorum(2, 0, 0, 4, 1, true), {"threshold": {"type": "percentage", "value": 75}})
	"INVALID_ENVELOPE" in codes(d)
	count(macp.deny) == 0 with input as commit("macp.mode.quorum.v1", quorum(3, 0, 0, 4, 1, true), {"threshold": {"type": "percentage", "value": 0.75}})
}

votes(list) := [{"proposal": "p1", "voter": v[0], "vote": v[1]} | some v in list]

decision(vote_list, positive) := {
	"outcome_positive": positive,
	"votes": votes(vote_list),
	"evaluations": [],
	"objections": [],
	"participants": ["a", "b", "c"],
}

test_majority_passed if {
	count(macp.deny) == 0 with input as commit("macp.mode.decision.v1", decision([["a", "APPROVE"], ["b", "APPROVE"], ["c", "REJECT"]], true), {"voting": {"algorithm": "majority"}})
}

test_majority_failed_positive_denied if {
	d := macp.deny with input as commit("macp.mode.decision.v1", decision([["a", "REJECT"], ["b", "REJECT"], ["c", "APPROVE"]], true), {"voting": {"algorithm": "majority"}})
	codes(d) == {"POLICY_DENIED"}
}

test_decline_guard if {
	# no votes: a decline needs an explicit reject
	d := macp.deny with input as commit("macp.mode.decision.v1", decision([], false), {"voting": {"algorithm": "majority"}})
	codes(d) == {"POLICY_DENIED"}
	count(macp.deny) == 0 with input as commit("macp.mode.decision.v1", decision([["a", "REJECT"]], false), {"voting": {"algorithm": "majority"}})
}

test_unanimous if {
	count(macp.deny) == 0 with input as commit("macp.mode.decision.v1", decision([["a", "APPROVE"], ["b", "APPROVE"], ["c", "APPROVE"]], true), {"voting": {"algorithm": "unanimous"}})
	count(macp.deny) == 1 with input as commit("macp.mode.decision.v1", decision([["a", "APPROVE"], ["b", "APPROVE"]], true), {"voting": {"algorithm": "unanimous"}})
}

test_weighted_electorate if {
	# c is outside the weights map: its approve weighs nothing
	rules := {"voting": {"algorithm": "weighted", "threshold": 0.5, "weights": {"a": 1, "b": 3}}}
	count(macp.deny) == 1 with input as commit("macp.mode.decision.v1", decision([["a", "APPROVE"], ["b", "REJECT"], ["c", "APPROVE"]], true), rules)
	count(macp.deny) == 0 with input as commit("macp.mode.decision.v1", decision([["a", "REJECT"], ["b", "APPROVE"]], true), rules)
}

test_critical_objection_veto if {
	facts := object.union(decision([["a", "APPROVE"]], true), {"objections": [{"proposal": "p1", "severity": "critical", "sender": "b"}]})
	d := macp.deny with input as commit("macp.mode.decision.v1", facts, {"objection_handling": {"critical_severity_vetoes": true}})
	codes(d) == {"POLICY_DENIED"}
	count(macp.deny) == 0 with input as commit("macp.mode.decision.v1", facts, {})
}

test_vote_quorum if {
	rules := {"voting": {"algorithm": "majority", "quorum": {"type": "count", "value": 2}}, "commitment": {"require_vote_quorum": true}}
	count(macp.deny) == 1 with input as commit("macp.mode.decision.v1", decision([["a", "APPROVE"]], true), rules)
	count(macp.deny) == 0 with input as commit("macp.mode.decision.v1", decision([["a", "APPROVE"], ["b", "APPROVE"]], true), rules)
}

test_operator_denial_shape if {
	# the engine maps unknown reasons to operator_policy; the embedded policy
	# only uses reasons from Warden's closed set
	allowed := {"sender_not_authorized", "governance_denied", "outcome_mismatch", "commitment_not_eligible"}
	d := macp.deny with input as commit("macp.mode.task.v1", {"outcome_positive": true, "report": "failed"}, {})
	every x in d {
		x.reason in allowed
	}
}

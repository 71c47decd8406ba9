package warden.macp_payload_test

import rego.v1

msg(mode, typ, payload) := {
	"protocol": "macp",
	"principal": {"id": "alice", "method": "jwt", "scopes": {}},
	"message": {"mode": mode, "type": typ, "sender": "alice", "id": "m1", "session_id": "s1"},
	"session": {"state": "Open", "policy": "policy.default"},
	"roles": ["participant"],
	"macp": {"payload": payload, "timestamp_unix_ms": 1764237600000},
	"time": {"now_ns": 1764237600000000000},
}

vote(v, reason) := msg("macp.mode.decision.v1", "Vote", {"proposal_id": "p1", "vote": v, "reason": reason})

approval(action) := msg("macp.mode.quorum.v1", "ApprovalRequest", {"request_id": "r1", "action": action, "summary": "", "details": "", "required_approvals": 2})

refused(doc, text) if {
	some d in data.warden.macp.deny with input as doc
	contains(d.msg, text)
}

test_reject_vote_needs_reason if {
	refused(vote("REJECT", ""), "must give a reason")
	refused(vote("REJECT", "  "), "must give a reason")
	not refused(vote("REJECT", "the budget is too high"), "must give a reason")
}

test_other_votes_need_none if {
	not refused(vote("APPROVE", ""), "must give a reason")
	not refused(vote("ABSTAIN", ""), "must give a reason")
}

test_listed_action_allowed if {
	not refused(approval("deploy.staging"), "approval may be requested")
}

test_other_action_refused if {
	refused(approval("deploy.production"), "approval may be requested only for these actions: deploy.staging, refund.small")
	refused(approval("Deploy.Staging"), "approval may be requested") # exact names
}

test_unread_payload_refused if {
	# A payload the rules could not read reaches the policy as null.
	refused(msg("macp.mode.quorum.v1", "ApprovalRequest", null), "approval may be requested")
}

test_other_types_untouched if {
	not refused(msg("macp.mode.quorum.v1", "Approve", {"request_id": "r1", "reason": ""}), "approval")
	not refused(msg("macp.mode.decision.v1", "Objection", {"proposal_id": "p1", "reason": "", "severity": "high"}), "reason")
}

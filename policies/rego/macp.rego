# Warden's default MACP policy.
#
# The policy decides authority (from the matrices in matrix.json and the roles
# the rules package computed for the sender) and governance (RFC-MACP-0012:
# voting, quorum thresholds, objections, plus the consistency rules the
# reference runtime leaves open). It returns a set of denials; an empty set
# allows the message. Each denial carries the MACP error code, a reason from
# Warden's closed set, and a rank that orders it among the checks.
#
# Operators extend the policy by adding `deny contains {...} if {...}` rules to
# this package from their own files.
package warden.macp

import rego.v1

# Ranks: data.warden.ranks, filled from macp.RankNames (the order of checks
# is written once, in Go).
rank_coarse := data.warden.ranks.coarse_authority

rank_fine := data.warden.ranks.fine_authority

rank_mode_post := data.warden.ranks.mode_post

rank_governance := data.warden.ranks.governance

matrix := data.warden.matrix

entry := e if {
	e := matrix[input.message.mode][input.message.type]
} else := e if {
	e := matrix["*"][input.message.type]
} else := {"coarse": ["participant"]}

holds(roles) if "*" in roles

holds(roles) if {
	some r in roles
	r in input.roles
}

# --- authority -------------------------------------------------------------

# A retransmission of a message accepted from its sender had the sender's
# authority when it was accepted; the roles it had then may have moved on (a
# terminal report ends the active assignee's). The other rules, the scopes of
# the credential and the operator's, decide it as any message.
retransmission if input.verdict.reason == "duplicate"

deny contains {
	"code": "FORBIDDEN",
	"reason": "sender_not_authorized",
	"rank": rank_coarse,
	"msg": sprintf("%s may be sent only by: %s", [input.message.type, concat(", ", entry.coarse)]),
} if {
	not retransmission
	not holds(entry.coarse)
}

deny contains {
	"code": "FORBIDDEN",
	"reason": "sender_not_authorized",
	"rank": rank_fine,
	"msg": sprintf("%s may be sent only by: %s", [input.message.type, concat(", ", entry.fine)]),
} if {
	not retransmission
	entry.fine
	not holds(entry.fine)
}

# Scopes of the caller's credential (the runtime's macp_scopes / static token
# attributes).
deny contains {
	"code": "FORBIDDEN",
	"reason": "sender_not_authorized",
	"rank": rank_coarse,
	"msg": "this credential may not start sessions",
} if {
	input.message.type == "SessionStart"
	input.principal.scopes.can_start_sessions == false
}

deny contains {
	"code": "FORBIDDEN",
	"reason": "sender_not_authorized",
	"rank": rank_coarse,
	"msg": sprintf("this credential may not use mode %s", [input.message.mode]),
} if {
	input.message.mode != ""
	allowed := input.principal.scopes.allowed_modes
	count(allowed) > 0
	not input.message.mode in allowed
}

# --- governance: commitments -----------------------------------------------

commitment if {
	input.message.type == "Commitment"
	input.facts
}

gov := g if {
	g := input.governance.rules
} else := {}

positive := input.facts.outcome_positive

setting(keys, default_value) := object.get(gov, keys, default_value)

deny contains {"code": "POLICY_DENIED", "reason": "governance_denied", "rank": rank_governance, "msg": m} if {
	commitment
	some m in governance_denials
}

deny contains {"code": "POLICY_DENIED", "reason": "outcome_mismatch", "rank": rank_governance, "msg": m} if {
	commitment
	some m in consistency_denials
}

deny contains {"code": "INVALID_ENVELOPE", "reason": "commitment_not_eligible", "rank": rank_mode_post, "msg": m} if {
	commitment
	some m in eligibility_denials
}

# Task (RFC-MACP-0009, task-rules.schema.json).
governance_denials contains "policy requires task output before commitment" if {
	input.message.mode == "macp.mode.task.v1"
	setting(["completion", "require_output"], false) == true
	positive
	not input.facts.has_output
}

consistency_denials contains "a positive commitment needs a completed task" if {
	input.message.mode == "macp.mode.task.v1"
	positive
	input.facts.report != "completed"
}

# Handoff (RFC-MACP-0010).
consistency_denials contains "a positive commitment needs an accepted offer" if {
	input.message.mode == "macp.mode.handoff.v1"
	positive
	not input.facts.accepted
}

consistency_denials contains "a negative commitment contradicts an accepted offer" if {
	input.message.mode == "macp.mode.handoff.v1"
	not positive
	input.facts.accepted
}

# Proposal (RFC-MACP-0008, proposal-rules.schema.json).
governance_denials contains sprintf("counter-proposal limit exceeded: %d of %d allowed", [input.facts.counter_proposals, max]) if {
	input.message.mode == "macp.mode.proposal.v1"
	max := setting(["counter_proposal", "max_rounds"], 0)
	max > 0
	input.facts.counter_proposals > max
	positive
}

consistency_denials contains "a positive commitment needs a proposal accepted by the required parties" if {
	input.message.mode == "macp.mode.proposal.v1"
	positive
	input.facts.phase != "Converged"
}

# Quorum (RFC-MACP-0011, quorum-rules.schema.json). A policy threshold
# replaces the request's required_approvals; a percentage value is a fraction
# when <= 1 and a percent otherwise.
quorum_required := n if {
	t := setting(["threshold", "value"], 0)
	t > 0
	setting(["threshold", "type"], "n_of_m") == "percentage"
	n := ceil(fraction(t) * input.facts.eligible)
} else := n if {
	t := setting(["threshold", "value"], 0)
	t > 0
	n := floor(t)
} else := input.facts.required_approvals

fraction(t) := t / 100 if {
	t > 1
} else := t

quorum_remaining := ((input.facts.eligible - input.facts.approvals) - input.facts.rejections) - input.facts.abstentions

eligibility_denials contains sprintf("threshold neither reached nor unreachable: %d of %d approvals, %d ballots outstanding", [input.facts.approvals, quorum_required, quorum_remaining]) if {
	input.message.mode == "macp.mode.quorum.v1"
	input.facts.approvals < quorum_required
	input.facts.approvals + quorum_remaining >= quorum_required
}

governance_denials contains sprintf("approval threshold not met: %d of %d required approvals", [input.facts.approvals, quorum_required]) if {
	input.message.mode == "macp.mode.quorum.v1"
	positive
	input.facts.approvals < quorum_required
}

consistency_denials contains "a negative commitment contradicts a reached approval threshold" if {
	input.message.mode == "macp.mode.quorum.v1"
	not positive
	input.facts.approvals >= quorum_required
}

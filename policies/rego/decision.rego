# Decision Mode governance (RFC-MACP-0007 §6.2, RFC-MACP-0012 §4.1,
# decision-rules.schema.json), evaluated on the tallies the rules package
# passes as facts. It follows the reference runtime's evaluator: evaluation
# confidence, critical-objection vetoes, vote quorum, then the voting
# algorithm mapped to the requested outcome with the decline guard.
package warden.macp

import rego.v1

decision if {
	commitment
	input.message.mode == "macp.mode.decision.v1"
}

algorithm := setting(["voting", "algorithm"], "none")

votes := input.facts.votes

approve_count := count([v | some v in votes; v.vote == "APPROVE"])

reject_count := count([v | some v in votes; v.vote == "REJECT"])

voters := {v.voter | some v in votes}

participant_count := count(input.facts.participants)

weights := setting(["voting", "weights"], {})

decisive_rejects := count([v |
	some v in votes
	v.vote == "REJECT"
	object.get(weights, v.voter, 0) > 0
]) if {
	algorithm == "weighted"
} else := reject_count

# 1. Evaluations.
qualifying_evaluations := [e | some e in input.facts.evaluations; e.recommendation != "REVIEW"]

min_confidence := setting(["evaluation", "minimum_confidence"], 0)

governance_denials contains sprintf("no qualifying evaluation meets minimum confidence threshold: %v", [min_confidence]) if {
	decision
	setting(["evaluation", "required_before_voting"], false) == true
	min_confidence > 0
	not any_confident
}

any_confident if {
	some e in qualifying_evaluations
	e.confidence >= min_confidence
}

governance_denials contains "evaluations required before voting but none provided (REVIEW evaluations are informational only)" if {
	decision
	setting(["evaluation", "required_before_voting"], false) == true
	min_confidence <= 0
	count(qualifying_evaluations) == 0
}

# 2. Critical objections.
critical_objections := count([o | some o in input.facts.objections; o.severity == "critical"])

vetoed if {
	setting(["objection_handling", "critical_severity_vetoes"], false) == true
	critical_objections >= setting(["objection_handling", "veto_threshold"], 1)
}

objection_action := setting(["objection_handling", "critical_objection_action"], "deny")

governance_denials contains sprintf("blocked by %d critical objection(s) (critical_objection_action=%s)", [critical_objections, objection_action]) if {
	decision
	vetoed
	objection_action in {"deny", "hold"}
}

governance_denials contains sprintf("veto blocks a positive commitment: %d critical objection(s)", [critical_objections]) if {
	decision
	vetoed
	objection_action == "finalize_decline"
	positive
}

objection_authorized_decline if {
	vetoed
	objection_action == "finalize_decline"
	not positive
}

# 3. Vote quorum.
quorum_type := setting(["voting", "quorum", "type"], "count")

quorum_value := setting(["voting", "quorum", "value"], 0)

quorum_met if {
	quorum_type == "percentage"
	participant_count > 0
	(count(voters) / participant_count) * 100 >= quorum_value
} else if {
	quorum_type == "percentage"
	participant_count == 0
	quorum_value <= 0
} else if {
	quorum_type != "percentage"
	count(voters) >= quorum_value
}

governance_denials contains sprintf("vote quorum not met: %d voters of %d participants", [count(voters), participant_count]) if {
	decision
	setting(["commitment", "require_vote_quorum"], false) == true
	not quorum_met
}

# 4. Voting algorithm -> "passed" | "failed" | "no_votes".
threshold := setting(["voting", "threshold"], 0.5)

weighted_total := sum([object.get(weights, v.voter, 0) | some v in votes; v.vote in {"APPROVE", "REJECT"}])

weighted_approve := sum([object.get(weights, v.voter, 0) | some v in votes; v.vote == "APPROVE"])

all_approved if {
	every p in input.facts.participants {
		some v in votes
		v.voter == p
		v.vote == "APPROVE"
	}
}

result := "failed" if {
	algorithm == "weighted"
	weighted_total < 0
} else := "no_votes" if {
	algorithm == "weighted"
	weighted_total == 0
} else := r if {
	algorithm == "weighted"
	r := pass_fail(weighted_approve / weighted_total >= threshold)
} else := "no_votes" if {
	approve_count + reject_count == 0
} else := r if {
	algorithm == "majority"
	r := pass_fail(approve_count / (approve_count + reject_count) >= threshold)
} else := r if {
	algorithm == "supermajority"
	r := pass_fail(approve_count / (approve_count + reject_count) >= supermajority_threshold)
} else := r if {
	algorithm == "unanimous"
	r := pass_fail(unanimous)
} else := r if {
	algorithm == "plurality"
	r := pass_fail(approve_count > reject_count)
} else := "failed"

supermajority_threshold := threshold if {
	threshold > 0.5
} else := 2 / 3

unanimous if {
	all_approved
	reject_count == 0
}

pass_fail(true) := "passed"

pass_fail(false) := "failed"

voting_applies if {
	decision
	algorithm != "none"
	not objection_authorized_decline
}

governance_denials contains "vote passed but a decline was requested; commitment.allow_decline_over_approval is not set" if {
	voting_applies
	result == "passed"
	not positive
	setting(["commitment", "allow_decline_over_approval"], false) != true
}

governance_denials contains "decline over a passing vote needs at least one decisive REJECT" if {
	voting_applies
	result == "passed"
	not positive
	setting(["commitment", "allow_decline_over_approval"], false) == true
	decisive_rejects == 0
}

governance_denials contains sprintf("%s vote failed: %d approve, %d reject", [algorithm, approve_count, reject_count]) if {
	voting_applies
	result == "failed"
	positive
}

governance_denials contains "approval threshold not met but no decisive REJECT justifies a decline" if {
	voting_applies
	result == "failed"
	not positive
	decisive_rejects == 0
}

governance_denials contains sprintf("no decisive votes cast: under schema_version %d the %s algorithm does not authorize a positive commitment", [input.governance.schema_version, algorithm]) if {
	voting_applies
	result == "no_votes"
	positive
	input.governance.schema_version >= 3
}

governance_denials contains "no votes cast" if {
	voting_applies
	result == "no_votes"
	positive
	input.governance.schema_version < 3
	setting(["commitment", "require_vote_quorum"], false) == true
}

governance_denials contains "no votes cast; a decline requires at least one decisive REJECT" if {
	voting_applies
	result == "no_votes"
	not positive
}

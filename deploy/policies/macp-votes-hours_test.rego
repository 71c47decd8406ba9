package warden.macp_votes_hours_test

import rego.v1

decision := "macp.mode.decision.v1"

# A message of type typ in a session of mode, decided at the RFC 3339 time at.
msg(mode, typ, at) := {
	"protocol": "macp",
	"principal": {"id": "alice", "method": "jwt", "scopes": {}},
	"message": {"mode": mode, "type": typ, "sender": "alice", "id": "m1", "session_id": "s1"},
	"session": {"state": "Open", "policy": "policy.default"},
	"roles": ["participant"],
	"macp": {"payload": {"proposal_id": "p1", "vote": "APPROVE", "reason": ""}, "timestamp_unix_ms": 0},
	"time": {"now_ns": time.parse_rfc3339_ns(at)},
}

refused(doc) if {
	some d in data.warden.macp.deny with input as doc
	startswith(d.msg, "votes are accepted 09:00-17:00 (Europe/Paris)")
}

test_vote_in_business_hours if {
	not refused(msg(decision, "Vote", "2026-11-27T09:00:00+01:00")) # a Friday, at opening
	not refused(msg(decision, "Vote", "2026-11-27T16:59:00+01:00"))
	not refused(msg(decision, "Vote", "2026-11-27T14:30:00Z")) # 15:30 in Paris
}

test_vote_outside_business_hours if {
	refused(msg(decision, "Vote", "2026-11-27T08:59:00+01:00"))
	refused(msg(decision, "Vote", "2026-11-27T17:00:00+01:00")) # closing is exclusive
	refused(msg(decision, "Vote", "2026-11-27T16:30:00Z")) # 17:30 in Paris
	refused(msg(decision, "Vote", "2026-11-28T10:00:00+01:00")) # a Saturday
}

test_zone_follows_summer_time if {
	not refused(msg(decision, "Vote", "2026-07-01T07:30:00Z")) # 09:30 CEST
	refused(msg(decision, "Vote", "2026-07-01T15:30:00Z")) # 17:30 CEST
}

test_other_messages_untouched if {
	not refused(msg(decision, "Proposal", "2026-11-27T23:00:00+01:00"))
	not refused(msg(decision, "Evaluation", "2026-11-27T23:00:00+01:00"))
	not refused(msg("macp.mode.quorum.v1", "Approve", "2026-11-27T23:00:00+01:00"))
}

test_no_time_refused if {
	refused(object.remove(msg(decision, "Vote", "2026-11-27T10:00:00+01:00"), ["time"]))
	refused(json.patch(msg(decision, "Vote", "2026-11-27T10:00:00+01:00"), [{"op": "replace", "path": "/time/now_ns", "value": null}]))
}

test_sender_timestamp_ignored if {
	# A vote at night backdated to 10:00 by its sender is still refused.
	doc := json.patch(msg(decision, "Vote", "2026-11-27T23:00:00+01:00"), [{"op": "replace", "path": "/macp/timestamp_unix_ms", "value": time.parse_rfc3339_ns("2026-11-27T10:00:00+01:00") / 1000000}])
	refused(doc)
}

# Example operator policy: MACP votes only during business hours.
#
# A Vote in a decision session (macp.mode.decision.v1) is refused outside
# 09:00-17:00, Monday to Friday, in the time zone of vote_hours. The other
# messages of the session (proposals, evaluations, objections, the
# Commitment) are not restricted here.
#
# The time is Warden's clock when it decides, input.time.now_ns, to the
# minute: never the envelope's timestamp_unix_ms (input.macp), which is the
# sender's clock and which Warden bounds only from above, so a sender could
# backdate its vote into business hours. Reading input.time, not calling
# time.now_ns(), keeps decisions memoized (for a minute) and lets `warden
# what-if` decide a recorded log again at the times it was recorded.
#
# Load it with `warden serve --policy deploy/policies/macp-votes-hours.rego`
# (or policies.files), test it with `warden check --policy
# deploy/policies/macp-votes-hours.rego --policy
# deploy/policies/macp-votes-hours_test.rego`.
package warden.macp

import rego.v1

# When votes are accepted: from opens:00 to closes:00 (exclusive) on days,
# in zone (an IANA time zone name).
vote_hours := {
	"zone": "Europe/Paris",
	"opens": 9,
	"closes": 17,
	"days": {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"},
}

deny contains {
	"code": "FORBIDDEN",
	"msg": sprintf("votes are accepted %02d:00-%02d:00 (%s), %s only", [vote_hours.opens, vote_hours.closes, vote_hours.zone, concat(", ", sort(vote_hours.days))]),
} if {
	input.message.mode == "macp.mode.decision.v1"
	input.message.type == "Vote"
	not vote_hours_open # closed too when the input has no time
}

vote_hours_open if {
	[hour, _, _] := time.clock([input.time.now_ns, vote_hours.zone])
	hour >= vote_hours.opens
	hour < vote_hours.closes
	time.weekday([input.time.now_ns, vote_hours.zone]) in vote_hours.days
}

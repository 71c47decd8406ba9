# Example operator policy: only these A2A skills.
#
# A principal listed in allowed_skills may send messages (SendMessage,
# SendStreamingMessage, and a message continuing a task or context) only
# naming one of the skills listed for it; a message naming no skill is
# refused too, or leaving the skill out would walk around the rule. A
# principal not listed is not restricted here.
#
# A2A 1.0's Message has no skill field: Warden reads the skill from the
# message's metadata, params.message.metadata.skill (a string, the id of one
# of the Agent Card's skills), as input.a2a.skill. Load it with
# `warden serve --policy deploy/policies/a2a-skills.rego` (or
# policies.files), test it with `warden check --policy
# deploy/policies/a2a-skills.rego --policy deploy/policies/a2a-skills_test.rego`.
package warden.a2a

import rego.v1

# principal id -> the skills its messages may name.
allowed_skills := {"agent://support-bot": {"weather", "faq"}}

# The skill, "" when the input has none: OPA evaluates a call's arguments
# before "not", so `not input.a2a.skill in ...` would be undefined, and
# refuse nothing, for an input without the member. Warden always sets it
# ("" when the message names none); the rule stays closed if it ever did not.
default asked_skill := ""

asked_skill := input.a2a.skill

sends := {"SendMessage", "SendStreamingMessage", "SendMessage:continue"}

deny contains {
	"code": "FORBIDDEN",
	"msg": sprintf("%s may ask only for these skills: %s", [input.principal.id, concat(", ", sort(allowed_skills[input.principal.id]))]),
} if {
	input.message.type in sends
	not asked_skill in allowed_skills[input.principal.id]
}

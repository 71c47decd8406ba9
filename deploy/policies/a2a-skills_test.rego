package warden.a2a_skills_test

import rego.v1

send(principal, method, skill) := {
	"protocol": "a2a",
	"principal": {"id": principal, "method": "jwt", "scopes": {}},
	"message": {"type": method, "sender": principal},
	"roles": ["new"],
	"a2a": {"skill": skill, "parts": ["text"], "metadata": {"skill": skill}},
}

refusal := "agent://support-bot may ask only for these skills: faq, weather"

refused(doc) if {
	some d in data.warden.a2a.deny with input as doc
	d.msg == refusal
}

test_listed_skill_allowed if {
	not refused(send("agent://support-bot", "SendMessage", "weather"))
	not refused(send("agent://support-bot", "SendStreamingMessage", "faq"))
}

test_other_skill_refused if {
	refused(send("agent://support-bot", "SendMessage", "admin"))
	refused(send("agent://support-bot", "SendStreamingMessage", "admin"))
	refused(send("agent://support-bot", "SendMessage:continue", "admin"))
}

test_no_skill_refused if {
	refused(send("agent://support-bot", "SendMessage", ""))
}

test_no_a2a_member_refused if {
	refused(object.remove(send("agent://support-bot", "SendMessage", ""), ["a2a"]))
}

test_skill_name_is_exact if {
	refused(send("agent://support-bot", "SendMessage", "Weather"))
	refused(send("agent://support-bot", "SendMessage", "weather "))
}

test_unlisted_principal_unrestricted if {
	count(data.warden.a2a.deny) == 0 with input as send("agent://ops", "SendMessage", "admin")
}

test_other_methods_untouched if {
	not refused(send("agent://support-bot", "GetTask", ""))
}

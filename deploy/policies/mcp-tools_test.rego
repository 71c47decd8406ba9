package warden.mcp_tools_test

import rego.v1

call(principal, tool) := {
	"protocol": "mcp",
	"principal": {"id": principal, "method": "jwt", "scopes": {}},
	"message": {"type": "tools/call", "sender": principal},
	"roles": [],
	"mcp": {"tool": tool, "prompt": "", "uri": "", "arguments": {}},
}

refusal := "agent://support-bot may call only these tools: get_weather, test_simple_text"

refused(doc) if {
	some d in data.warden.mcp.deny with input as doc
	d.msg == refusal
}

test_listed_tool_allowed if {
	not refused(call("agent://support-bot", "test_simple_text"))
}

test_other_tool_refused if {
	refused(call("agent://support-bot", "test_image_content"))
}

test_tool_name_is_exact if {
	refused(call("agent://support-bot", "Test_Simple_Text"))
	refused(call("agent://support-bot", "test_simple_text "))
}

test_unlisted_principal_unrestricted if {
	count(data.warden.mcp.deny) == 0 with input as call("agent://ops", "test_image_content")
}

test_other_methods_untouched if {
	doc := object.union(call("agent://support-bot", ""), {"message": {"type": "resources/read", "sender": "agent://support-bot"}})
	not refused(doc)
}

# An input without input.mcp (Warden always sets it) is still refused for a
# listed principal: the rule reads the tool through a default.
test_missing_tool_member_refused if {
	doc := json.remove(call("agent://support-bot", "test_simple_text"), ["mcp"])
	refused(doc)
}

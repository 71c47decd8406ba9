package warden.mcp_arguments_test

import rego.v1

call(method, args) := {
	"protocol": "mcp",
	"principal": {"id": "agent://ops", "method": "jwt", "scopes": {}},
	"message": {"type": method, "sender": "agent://ops"},
	"roles": [],
	"mcp": {"tool": "read_file", "prompt": "", "uri": "", "arguments": args},
}

refused(doc) if {
	some d in data.warden.mcp.deny with input as doc
	contains(d.msg, "matches a forbidden pattern")
}

test_plain_arguments_allowed if {
	not refused(call("tools/call", {"path": "docs/readme.md", "lines": 10}))
	not refused(call("tools/call", null))
}

test_traversal_refused_at_any_depth if {
	refused(call("tools/call", {"path": "../../etc/passwd"}))
	refused(call("tools/call", {"files": [{"path": "a/../../b"}]}))
}

# A Json[T] string arrives as the value it holds (the sidecar reads it as
# the tool does): {"b":{"paths":"[\"..\\u002fetc/passwd\"]"}} is judged as
# {"b":{"paths":["../etc/passwd"]}}.
test_json_string_judged_as_its_value if {
	refused(call("tools/call", {"b": {"paths": ["../etc/passwd"]}}))
	not refused(call("tools/call", {"b": {"paths": ["docs/a.md"]}}))
}

test_member_names_checked if {
	refused(call("tools/call", {"opts": {"../x": true}}))
}

test_prompt_arguments_checked if {
	refused(call("prompts/get", {"q": "please DROP  TABLE users"}))
}

test_key_material_refused if {
	refused(call("tools/call", {"note": "-----BEGIN RSA PRIVATE KEY-----\nMII..."}))
}

test_other_methods_untouched if {
	not refused(call("tasks/get", {"path": "../x"}))
}

# Example operator policy: no arguments matching these patterns.
#
# A tools/call or prompts/get whose arguments hold, at any depth, a string
# (a value or a member name) matching one of forbidden_argument_patterns
# (RE2 syntax) is refused. Warden hands the policy the arguments as parsed
# JSON, bounded before they get here: arguments over 64 KiB or nested deeper
# than 16 are refused by Warden itself, so no argument escapes the patterns
# by size or depth. A string the tool's inputSchema says holds JSON
# (pydantic's Json[T]) arrives as the value it holds, escapes decoded, so
# "[\"..\\u002fetc\"]" is judged as ["../etc"] (docs/policies.md).
package warden.mcp

import rego.v1

forbidden_argument_patterns := {
	`\.\./`, # path traversal
	`-----BEGIN [A-Z ]*PRIVATE KEY-----`, # key material
	`(?i)\bdrop\s+table\b`,
}

deny contains {
	"code": "FORBIDDEN",
	"msg": sprintf("argument %s matches a forbidden pattern", [json.marshal(path)]),
} if {
	input.message.type in {"tools/call", "prompts/get"}
	walk(input.mcp.arguments, [path, value])
	some s in array.concat([value], path)
	is_string(s)
	some pattern in forbidden_argument_patterns
	regex.match(pattern, s)
}

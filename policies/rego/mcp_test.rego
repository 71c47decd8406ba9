package warden.mcp_test

import rego.v1

import data.warden.mcp

owner_get := {"protocol": "mcp", "message": {"type": "tasks/get"}, "roles": ["owner"], "session": {"state": "working"}}

test_owner_may_get if count(mcp.deny) == 0 with input as owner_get

test_other_gets_not_found if {
	some d in mcp.deny with input as object.union(owner_get, {"roles": []})
	d.code == "TASK_NOT_FOUND"
	d.msg == "Task not found"
}

test_steer_on_terminal_refused if {
	some d in mcp.deny with input as {"message": {"type": "tasks/steer"}, "roles": ["owner"], "session": {"state": "completed"}}
	d.code == "INVALID_TASK_STATE"
}

test_steer_while_paused_allowed if {
	count(mcp.deny) == 0 with input as {"message": {"type": "tasks/steer"}, "roles": ["owner"], "session": {"state": "paused"}}
}

test_pause_only_from_working_or_input_required if {
	count(mcp.deny) == 0 with input as {"message": {"type": "tasks/pause"}, "roles": ["owner"], "session": {"state": "input_required"}}
	some d in mcp.deny with input as {"message": {"type": "tasks/pause"}, "roles": ["owner"], "session": {"state": "paused"}}
	d.code == "INVALID_TASK_STATE"
}

test_resume_only_from_paused if {
	count(mcp.deny) == 0 with input as {"message": {"type": "tasks/resume"}, "roles": ["owner"], "session": {"state": "paused"}}
	some d in mcp.deny with input as {"message": {"type": "tasks/resume"}, "roles": ["owner"], "session": {"state": "working"}}
	d.code == "INVALID_TASK_STATE"
}

test_update_refused_while_paused if {
	some d in mcp.deny with input as {"message": {"type": "tasks/update"}, "roles": ["owner"], "session": {"state": "paused"}}
	d.reason == "task_state"
}

test_non_owner_refused_before_status if {
	ds := mcp.deny with input as {"message": {"type": "tasks/resume"}, "roles": [], "session": {"state": "working"}}
	some d in ds
	d.code == "TASK_NOT_FOUND"
	d.rank == 1
}

test_list_and_call_open if {
	count(mcp.deny) == 0 with input as {"message": {"type": "tasks/list"}, "roles": []}
	count(mcp.deny) == 0 with input as {"message": {"type": "tools/call"}, "roles": []}
}

# ext_authz cannot know owners: the ownership rule stands aside, the status
# rules and operator rules still run.
test_ownership_unknown_not_refused_for_ownership if {
	count(mcp.deny) == 0 with input as object.union(owner_get, {"roles": ["ownership_unknown"]})
}

test_ownership_unknown_status_rules_apply if {
	some d in mcp.deny with input as {"message": {"type": "tasks/steer"}, "roles": ["ownership_unknown"], "session": {"state": "completed"}}
	d.code == "INVALID_TASK_STATE"
}

package warden.a2a_test

import rego.v1

import data.warden.a2a

owner_get := {"protocol": "a2a", "message": {"type": "GetTask"}, "roles": ["owner"], "session": {"state": "TASK_STATE_WORKING"}}

test_owner_may_get if count(a2a.deny) == 0 with input as owner_get

test_other_gets_not_found if {
	some d in a2a.deny with input as object.union(owner_get, {"roles": []})
	d.code == "TASK_NOT_FOUND"
	d.msg == "Task not found"
}

test_every_task_method_owner_only if {
	every m in ["GetTask", "CancelTask", "SubscribeToTask", "SendMessage:continue", "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"] {
		some d in a2a.deny with input as {"message": {"type": m}, "roles": [], "session": {"state": ""}}
		d.code == "TASK_NOT_FOUND"
	}
}

test_new_message_needs_no_task if {
	count(a2a.deny) == 0 with input as {"message": {"type": "SendMessage"}, "roles": ["new"], "session": {"state": ""}}
	count(a2a.deny) == 0 with input as {"message": {"type": "SendStreamingMessage"}, "roles": ["new"], "session": {"state": ""}}
}

test_no_message_to_a_terminal_task if {
	some d in a2a.deny with input as {"message": {"type": "SendMessage:continue"}, "roles": ["owner"], "session": {"state": "TASK_STATE_COMPLETED"}}
	d.code == "INVALID_TASK_STATE"
	count(a2a.deny) == 0 with input as {"message": {"type": "SendMessage:continue"}, "roles": ["owner"], "session": {"state": "TASK_STATE_INPUT_REQUIRED"}}
}

test_no_subscription_to_a_terminal_task if {
	some d in a2a.deny with input as {"message": {"type": "SubscribeToTask"}, "roles": ["owner"], "session": {"state": "TASK_STATE_CANCELED"}}
	d.reason == "task_state"
}

test_list_and_card_for_anyone_authenticated if {
	count(a2a.deny) == 0 with input as {"message": {"type": "ListTasks"}, "roles": [], "session": {"state": ""}}
	count(a2a.deny) == 0 with input as {"message": {"type": "GetExtendedAgentCard"}, "roles": [], "session": {"state": ""}}
}

test_ownership_unknown_decides_the_rest if {
	count(a2a.deny) == 0 with input as {"message": {"type": "GetTask"}, "roles": ["ownership_unknown"], "session": {"state": ""}}
}

package macp

import (
	"slices"

	"github.com/agentwarden/warden/rules"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// report is a task's terminal report.
type report uint8

// The terminal reports, named as reportNames spells them.
const (
	reportNone report = iota
	reportCompleted
	reportFailed
)

var reportNames = [...]string{"", "completed", "failed"}

func (r report) String() string { return reportNames[r] }

// taskState is RFC-MACP-0009's task: one request, one active assignee.
type taskState struct {
	taskID            string
	requestedAssignee string
	active            string
	rejected          rare[string] // participants whose TaskReject was accepted
	// completionID is the message_id of the first accepted TaskComplete or
	// TaskFail: with task_id and assignee, the outcome idempotency key of
	// RFC-MACP-0009 §8.
	completionID string
	report       report
	requested    bool
	hasOutput    bool
}

func (t *taskState) step(c *stepCtx) rules.Verdict {
	s := c.next
	switch c.env.GetMessageType() {
	case "TaskRequest":
		var p taskv1.TaskRequestPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		switch {
		case t.requested:
			return invalid(rules.RankMode, rules.ReasonStateConflict, "the session already has a TaskRequest (one per session)")
		case p.GetTaskId() == "":
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "task_id is empty")
		case p.GetRequestedAssignee() != "" && !s.IsParticipant(p.GetRequestedAssignee()):
			return invalid(rules.RankMode, rules.ReasonInvalidParticipants, "requested_assignee "+p.GetRequestedAssignee()+" is not a participant")
		}
		t.requested, t.taskID, t.requestedAssignee = true, p.GetTaskId(), c.next.name(p.GetRequestedAssignee())
		return rules.Verdict{}

	case "TaskAccept":
		var p taskv1.TaskAcceptPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		if v := t.matches(p.GetTaskId()); !v.OK() {
			return v
		}
		if t.active != "" {
			return invalid(rules.RankMode, rules.ReasonStateConflict, "task already has an active assignee "+t.active)
		}
		if len(t.rejected.all()) > 0 {
			if g, v := s.bound(); !v.OK() {
				return v
			} else if !g.allowReassignmentOnReject {
				return deny(rules.RankMode, rules.CodePolicyDenied, rules.ReasonPolicyForbids, "reassignment after rejection not allowed by policy")
			}
		}
		if p.GetAssignee() != "" && p.GetAssignee() != c.sender {
			return invalid(rules.RankMode, rules.ReasonIdentityMismatch, "TaskAccept.assignee "+p.GetAssignee()+" is not the sender")
		}
		if t.eligible(s, c.sender) {
			c.role(RoleEligibleAssignee)
		}
		t.active = s.name(c.sender) // the session's copy, not the request's
		return rules.Verdict{}

	case "TaskReject":
		var p taskv1.TaskRejectPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		if v := t.matches(p.GetTaskId()); !v.OK() {
			return v
		}
		if t.active != "" {
			if t.active != c.sender {
				return invalid(rules.RankMode, rules.ReasonStateConflict, "only the active assignee may reject an assigned task")
			}
			if g, v := s.bound(); !v.OK() {
				return v
			} else if !g.allowReassignmentOnReject {
				return deny(rules.RankMode, rules.CodePolicyDenied, rules.ReasonPolicyForbids, "active assignee cannot reject without allow_reassignment_on_reject policy")
			}
		}
		if p.GetAssignee() != "" && p.GetAssignee() != c.sender {
			return invalid(rules.RankMode, rules.ReasonIdentityMismatch, "TaskReject.assignee "+p.GetAssignee()+" is not the sender")
		}
		if t.active == c.sender {
			c.role(RoleActiveAssignee)
		} else if t.eligible(s, c.sender) {
			c.role(RoleEligibleAssignee)
		}
		if slices.Contains(t.rejected.all(), c.sender) {
			// The runtime checks this after authority: rank it there.
			return invalid(rules.RankModePost, rules.ReasonStateConflict, c.sender+" already rejected this task")
		}
		if t.active == c.sender {
			t.active = "" // RFC-MACP-0009 3c: back to the pre-assignment state
		}
		t.rejected = t.rejected.with(s.name(c.sender))
		return rules.Verdict{}

	case "TaskUpdate":
		var f [5][]byte
		if v, ok := readPayload(c, taskUpdateFlat, f[:]); !ok {
			return v
		}
		id := f[0]
		if v := t.matchesID(id); !v.OK() {
			return v
		}
		t.activeRole(c)
		c.out.RecordOnly = true // progress on the running task; nothing else changes
		return rules.Verdict{}

	case "TaskComplete", "TaskFail":
		complete := c.env.GetMessageType() == "TaskComplete"
		var taskID, assignee string
		var output bool
		if complete {
			var p taskv1.TaskCompletePayload
			if v, ok := decode(c, &p); !ok {
				return v
			}
			taskID, assignee, output = p.GetTaskId(), p.GetAssignee(), len(p.GetOutput()) > 0
		} else {
			var p taskv1.TaskFailPayload
			if v, ok := decode(c, &p); !ok {
				return v
			}
			taskID, assignee = p.GetTaskId(), p.GetAssignee()
		}
		if v := t.matches(taskID); !v.OK() {
			return v
		}
		t.activeRole(c)
		if assignee != "" && assignee != c.sender {
			return invalid(rules.RankModePost, rules.ReasonIdentityMismatch, c.env.GetMessageType()+".assignee "+assignee+" is not the sender")
		}
		t.report, t.hasOutput, t.completionID = reportFailed, false, c.env.GetMessageId()
		if complete {
			t.report, t.hasOutput = reportCompleted, output
		}
		return rules.Verdict{}

	case TypeCommitment:
		if _, v := commitment(c); !v.OK() {
			return v
		}
		if t.report == reportNone {
			return invalid(rules.RankModePost, rules.ReasonNotEligible, "no TaskComplete or TaskFail has been accepted")
		}
		c.fact("report", t.report.String())
		c.fact("has_output", t.hasOutput)
		return rules.Verdict{}
	}
	return unknownType(c)
}

// matches checks that a message refers to the session's requested task.
func (t *taskState) matches(taskID string) rules.Verdict {
	if !t.requested {
		return invalid(rules.RankMode, rules.ReasonUnknownReference, "no TaskRequest has been accepted")
	}
	if taskID == "" || taskID != t.taskID {
		return invalid(rules.RankMode, rules.ReasonUnknownReference, "task_id "+taskID+" is not the session's task "+t.taskID)
	}
	return rules.Verdict{}
}

// matchesID is matches for a task_id read in place, converted to a string
// only for a refusal's words.
func (t *taskState) matchesID(id []byte) rules.Verdict {
	if t.requested && len(id) > 0 && string(id) == t.taskID {
		return rules.Verdict{}
	}
	return t.matches(string(id))
}

// eligible reports whether sender may accept or reject the request.
func (t *taskState) eligible(s *Session, sender string) bool {
	if t.requestedAssignee != "" {
		return sender == t.requestedAssignee
	}
	return s.IsParticipant(sender) && sender != s.Initiator
}

// activeRole grants the active-assignee role while the task is running: after
// a terminal report nobody holds it, so late reports are refused as the runtime
// refuses them (FORBIDDEN).
func (t *taskState) activeRole(c *stepCtx) {
	if t.report == reportNone && t.active != "" && t.active == c.sender {
		c.role(RoleActiveAssignee)
	}
}

func (t *taskState) summary(_ *Session, out map[string]any) {
	t = orZero(t)
	out["task_id"] = t.taskID
	out["active_assignee"] = t.active
	out["report"] = t.report.String()
	out["rejected"] = slices.Clone(t.rejected.all())
	out["completion_message_id"] = t.completionID
}

func (t *taskState) clone() modal {
	if t == nil {
		return &taskState{}
	}
	c := *t
	return &c
}

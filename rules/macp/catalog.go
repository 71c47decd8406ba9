package macp

import (
	"slices"

	"github.com/agentwarden/warden/rules"
)

// ModeTypes is MACP's vocabulary: each mode's message types (RFC-MACP-0007
// to 0011 and the runtime's ext.multi_round.v1). The decoding in this
// package, the authority matrices (policies/rego/matrix.json), replay's
// payload table and the metric labels are tested against it, so a type
// added in one place and not the others fails a test instead of becoming
// "other" or an unknown message silently.
var ModeTypes = map[string][]string{
	ModeTask:       {"TaskRequest", "TaskAccept", "TaskReject", "TaskUpdate", "TaskComplete", "TaskFail"},
	ModeHandoff:    {"HandoffOffer", "HandoffContext", "HandoffAccept", "HandoffDecline"},
	ModeDecision:   {"Proposal", "Evaluation", "Objection", "Vote"},
	ModeProposal:   {"Proposal", "CounterProposal", "Accept", "Reject", "Withdraw"},
	ModeQuorum:     {"ApprovalRequest", "Approve", "Reject", "Abstain"},
	ModeMultiRound: {"Contribute"},
}

// CoreTypes are the message types every mode shares.
var CoreTypes = []string{TypeSessionStart, TypeCommitment, TypeSignal, TypeProgress}

// ModePayloadPrefix is the prefix of a mode's payload types in the
// conformance-fixture format ("task.TaskRequest").
var ModePayloadPrefix = map[string]string{
	ModeTask: "task", ModeHandoff: "handoff", ModeDecision: "decision",
	ModeProposal: "proposal", ModeQuorum: "quorum", ModeMultiRound: "multi_round",
}

// Roles are the roles a sender can hold, the names the matrices use.
var Roles = []string{
	RoleInitiator, RoleParticipant, RoleCommitmentAuthority, RoleEligibleAssignee,
	RoleActiveAssignee, RoleOfferOwner, RoleOfferTarget, RoleProposalAuthor,
}

// MessageTypes returns every MACP message type, core and mode, and the
// control operations, sorted and without repeats.
func MessageTypes() []string {
	out := slices.Concat(CoreTypes, []string{OpCancel, OpSuspend, OpResume})
	for _, ts := range ModeTypes {
		out = append(out, ts...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// PayloadTypes returns every payload type name of the fixture format: the
// core types by name, mode types with their mode's prefix.
func PayloadTypes() []string {
	out := slices.Clone(CoreTypes)
	for mode, ts := range ModeTypes {
		for _, t := range ts {
			out = append(out, ModePayloadPrefix[mode]+"."+t)
		}
	}
	slices.Sort(out)
	return out
}

// RankNames names the ranks for the policies: the Rego modules read their
// rank numbers from data.warden.ranks, filled from this table, so the
// order of checks is written once, in Go.
var RankNames = map[string]rules.Rank{
	"pre": rules.RankPre, "coarse_authority": rules.RankCoarseAuthority, "mode": rules.RankMode, "fine_authority": rules.RankFineAuthority,
	"mode_post": rules.RankModePost, "governance": rules.RankGovernance, "operator": rules.RankOperator,
}

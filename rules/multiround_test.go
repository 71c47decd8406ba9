package rules

import (
	"testing"

	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
)

func contribute(from, value string, want expect) msg {
	return msg{from: from, typ: "Contribute", body: &multiroundv1.ContributePayload{Value: value}, want: want}
}

func contributeRaw(from, payload string, want expect) msg {
	return msg{from: from, typ: "Contribute", raw: []byte(payload), want: want}
}

func TestMultiRound(t *testing.T) {
	def := setup{mode: ModeMultiRound, initiator: "coord", participants: []string{"coord", "alice", "bob"}}
	coord := lead
	converge := msg{from: "coord", typ: TypeCommitment, body: commit("multi_round.converged", true),
		want: accepted(coord...).withFacts(map[string]any{"outcome_positive": true, "action": "multi_round.converged"})}
	notConverged := msg{from: "coord", typ: TypeCommitment, body: commit("multi_round.converged", true), want: bad(ReasonNotEligible, RankModePost, coord...)}
	malformed := bad(ReasonMalformedPayload, RankMode, rP)

	runModeCases(t, def, []modeCase{
		// The conformance fixture multi_round_happy_path.json.
		{name: "happy path", state: StateResolved, msgs: []msg{
			contribute("alice", "option_a", accepted(rP)),
			contribute("bob", "option_b", accepted(rP)),
			notConverged,
			contribute("bob", "option_a", accepted(rP)),
			notConverged, // the coordinator is listed: it must contribute too (the fixture omits it; see test/conformance)
			contribute("coord", "option_a", accepted(coord...)),
			converge,
		}, final: map[string]any{"round": 4, "converged": true, "contributions": map[string]any{"alice": "option_a", "bob": "option_a", "coord": "option_a"}}},

		{name: "legacy JSON payloads", state: StateResolved, msgs: []msg{
			contributeRaw("alice", `{"value":"x"}`, accepted(rP)),
			contributeRaw("bob", ` { "value" : "y", "note": 1 } `, accepted(rP)),
			contributeRaw("bob", `{"value":"x"}`, accepted(rP)),
			contributeRaw("coord", `{"value":"x"}`, accepted(coord...)),
			converge,
		}, final: map[string]any{"round": 4, "contributions": map[string]any{"alice": "x", "bob": "x", "coord": "x"}}},
		{name: "legacy JSON and protobuf agree", msgs: []msg{
			contributeRaw("alice", `{"value":"x"}`, accepted(rP)),
			contribute("bob", "x", accepted(rP)),
			contribute("coord", "x", accepted(coord...)),
		}, final: map[string]any{"converged": true}},
		{name: "an empty legacy value is a value", msgs: []msg{
			contributeRaw("alice", `{"value":""}`, accepted(rP)),
			contributeRaw("bob", `{"value":""}`, accepted(rP)),
			contributeRaw("coord", `{"value":""}`, accepted(coord...)),
		}, final: map[string]any{"converged": true, "contributions": map[string]any{"alice": "", "bob": "", "coord": ""}}},
		{name: "payloads that do not decode", msgs: []msg{
			{from: "alice", typ: "Contribute", want: malformed},
			// A protobuf empty value encodes to no bytes at all.
			contribute("alice", "", malformed),
			contributeRaw("alice", `{"value":null}`, malformed),
			contributeRaw("alice", `{"value":7}`, malformed),
			contributeRaw("alice", `{"value":"x"`, malformed),
			contributeRaw("alice", "\xff\xff", malformed),
		}, final: map[string]any{"round": 0, "contributions": map[string]any{}}},

		{name: "rounds count changes of value", msgs: []msg{
			contribute("alice", "a", accepted(rP)),
			contribute("alice", "a", accepted(rP)),
			contribute("alice", "b", accepted(rP)),
			contribute("alice", "b", accepted(rP)),
		}, final: map[string]any{"round": 2, "converged": false, "contributions": map[string]any{"alice": "b"}}},

		// Convergence: every listed participant, the initiator included when
		// listed, has contributed and all contributions are equal (the
		// runtime's check_convergence).
		{name: "a listed initiator must contribute", msgs: []msg{
			contribute("alice", "a", accepted(rP)),
			contribute("bob", "a", accepted(rP)),
			notConverged,
		}, final: map[string]any{"converged": false}},
		{name: "an initiator that is not listed need not", setup: &setup{mode: ModeMultiRound, initiator: "coord", participants: []string{"alice", "bob"}}, msgs: []msg{
			contribute("alice", "a", accepted(rP)),
			contribute("bob", "a", accepted(rP)),
		}, final: map[string]any{"converged": true}},
		{name: "a contribution of the initiator must agree", msgs: []msg{
			contribute("coord", "z", accepted(coord...)),
			contribute("alice", "a", accepted(rP)),
			contribute("bob", "a", accepted(rP)),
			notConverged,
			contribute("coord", "a", accepted(coord...)),
			converge,
		}, state: StateResolved, final: map[string]any{"round": 4}},
		{name: "a contribution from outside is the policy's", msgs: []msg{
			contribute("mallory", "z", authz()),
			contribute("alice", "a", accepted(rP)),
			contribute("bob", "a", accepted(rP)),
			contribute("coord", "a", accepted(coord...)),
		}, final: map[string]any{"converged": true}},
		{name: "one other participant", setup: &setup{mode: ModeMultiRound, initiator: "coord", participants: []string{"coord", "alice"}}, msgs: []msg{
			contribute("alice", "a", accepted(rP)),
			contribute("coord", "a", accepted(coord...)),
			converge,
		}, state: StateResolved},
		{name: "the initiator alone", setup: &setup{mode: ModeMultiRound, initiator: "coord", participants: []string{"coord"}}, msgs: []msg{
			notConverged,
			contribute("coord", "a", accepted(coord...)),
		}, final: map[string]any{"converged": true}},

		{name: "nothing after convergence", msgs: []msg{
			contribute("alice", "a", accepted(rP)),
			contribute("bob", "a", accepted(rP)),
			contribute("coord", "a", accepted(coord...)),
			contribute("bob", "b", bad(ReasonStateConflict, RankMode, rP)),
			contributeRaw("bob", "\xff", bad(ReasonStateConflict, RankMode, rP)),
			contribute("coord", "b", bad(ReasonStateConflict, RankMode, coord...)),
		}, final: map[string]any{"round": 3, "contributions": map[string]any{"alice": "a", "bob": "a", "coord": "a"}}},

		{name: "commitment", msgs: []msg{
			// Convergence is checked before the payload.
			{from: "coord", typ: TypeCommitment, raw: []byte{0xff}, want: bad(ReasonNotEligible, RankModePost, coord...)},
			contribute("alice", "a", accepted(rP)),
			contribute("bob", "a", accepted(rP)),
			contribute("coord", "a", accepted(coord...)),
			{from: "coord", typ: TypeCommitment, raw: []byte{0xff}, want: bad(ReasonMalformedPayload, RankModePost, coord...)},
			{from: "coord", typ: TypeCommitment, body: commit("multi_round.failed", true), want: bad(ReasonOutcomeMismatch, RankModePost, coord...)},
			{from: "alice", typ: TypeCommitment, body: commit("multi_round.converged", true), want: authz(rP)},
			converge,
		}, state: StateResolved},

		{name: "message types of other modes", msgs: []msg{
			{from: "alice", typ: "Vote", want: bad(ReasonUnknownMessageType, RankMode, rP)},
			{from: "alice", typ: "contribute", body: &multiroundv1.ContributePayload{Value: "a"}, want: bad(ReasonUnknownMessageType, RankMode, rP)},
		}},
	})
}

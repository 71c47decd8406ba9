package macp

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
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
	notConverged := msg{from: "coord", typ: TypeCommitment, body: commit("multi_round.converged", true), want: bad(rules.ReasonNotEligible, rules.RankModePost, coord...)}
	malformed := bad(rules.ReasonMalformedPayload, rules.RankMode, rP)

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
			contribute("bob", "b", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			contributeRaw("bob", "\xff", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			contribute("coord", "b", bad(rules.ReasonStateConflict, rules.RankMode, coord...)),
		}, final: map[string]any{"round": 3, "contributions": map[string]any{"alice": "a", "bob": "a", "coord": "a"}}},

		{name: "commitment", msgs: []msg{
			// Convergence is checked before the payload.
			{from: "coord", typ: TypeCommitment, raw: []byte{0xff}, want: bad(rules.ReasonNotEligible, rules.RankModePost, coord...)},
			contribute("alice", "a", accepted(rP)),
			contribute("bob", "a", accepted(rP)),
			contribute("coord", "a", accepted(coord...)),
			{from: "coord", typ: TypeCommitment, raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankModePost, coord...)},
			{from: "coord", typ: TypeCommitment, body: commit("multi_round.failed", true), want: bad(rules.ReasonOutcomeMismatch, rules.RankModePost, coord...)},
			{from: "alice", typ: TypeCommitment, body: commit("multi_round.converged", true), want: authz(rP)},
			converge,
		}, state: StateResolved},

		{name: "message types of other modes", msgs: []msg{
			{from: "alice", typ: "Vote", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
			{from: "alice", typ: "contribute", body: &multiroundv1.ContributePayload{Value: "a"}, want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
		}},
	})
}

// TestContributeReadsAsTheRuntime: a Contribute payload has one reading,
// the runtime's (parse_contribute_value of macp-modes 0.13.0 at semantics
// revision 3 and later): serde_json's reading of {"value": ...} unless the
// bytes are also canonical protobuf, else protobuf. Warden's old reader
// (Go's encoding/json first) read the first five rows otherwise: a payload
// the runtime took as another value, or refused, converged Warden's state.
func TestContributeReadsAsTheRuntime(t *testing.T) {
	canonical := func(v string) string {
		b, err := proto.Marshal(&multiroundv1.ContributePayload{Value: v})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	v32 := `{"value":"` + strings.Repeat("b", 20) + `"}`
	v123 := `"value":"` + strings.Repeat("c", 112) + `"}`
	deep := `{"value":"a","x":` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}`
	for _, tc := range []struct {
		name, payload string
		want          string // "" for refused
	}{
		{"canonical protobuf that is JSON too, length 13", canonical(`{"value":"x"}`), `{"value":"x"}`},
		{"canonical protobuf that is JSON too, length 32", canonical(v32), v32},
		{"canonical protobuf that is JSON too, length 123", canonical(v123), v123},
		{"a lone surrogate in the value", `{"value":"\ud800"}`, ""},
		{"invalid UTF-8 in the value", "{\"value\":\"\xff\"}", ""},
		{"an array of one string", ` ["x"] `, "x"},
		{"nesting past encoding/json's limit in a skipped value", deep, "a"},

		{"legacy JSON", `{"value":"x"}`, "x"},
		{"whitespace around", "\t{ \"value\" : \"x\" }\r\n", "x"},
		{"an escaped key", `{"valu\u0065":"k"}`, "k"},
		{"a surrogate pair", `{"value":"\ud83d\ude00"}`, "\U0001F600"},
		{"skipped values of every kind", `{"n":null,"value":"a","x":[1,-2.5e+3,true,{"y":"\udc00"}],"z":{}}`, "a"},
		{"protobuf", canonical("hello"), "hello"},
		{"an empty value", `{"value":""}`, ""},

		{"a duplicate value", `{"value":"a","value":"b"}`, ""},
		// stricter than the runtime, which skips the unknown field: every
		// payload Warden decides on is decoded by wire/strictpb (issue 24 item 2)
		{"protobuf with an unknown field", canonical("v") + "\x10\x01", ""},
		{"a trailing comma", `{"value":"a",}`, ""},
		{"trailing bytes", `{"value":"a"} x`, ""},
		{"null", `{"value":null}`, ""},
		{"a number", `{"value":7}`, ""},
		{"a leading zero in a skipped number", `{"value":"a","x":01}`, ""},
		{"an array of two", `["x","y"]`, ""},
		{"an empty array", `[]`, ""},
		{"no value", `{"x":"a"}`, ""},
		{"not JSON nor protobuf", "\xff\xff", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := contributeValue([]byte(tc.payload))
			switch {
			case tc.want == "" && tc.name != "an empty value":
				if err == nil {
					t.Errorf("read as %q, want refused (the runtime refuses it)", got)
				}
			case err != nil:
				t.Errorf("refused (%v), want %q", err, tc.want)
			case got != tc.want:
				t.Errorf("read as %q, want %q", got, tc.want)
			}
		})
	}
}

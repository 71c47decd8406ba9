package macp

import (
	"strings"
	"testing"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestDescriptorOfReadsRulesAsTheRuntime: a registered policy's rules are
// read as the runtime reads them (serde_json, {} for what it does not
// parse). Go's encoding/json read the first three rows as rules the runtime
// never bound (a participant allowed to commit where the runtime allows only
// the initiator), and refused sessions binding the next two, which the
// runtime binds with no rules.
func TestDescriptorOfReadsRulesAsTheRuntime(t *testing.T) {
	const anyone = `"commitment":{"authority":"any_participant"}`
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, rules string
		want        string // the commitment authority bound; "" for an error
	}{
		{"a lone surrogate", `{` + anyone + `,"_x":"\ud800"}`, "initiator_only"},
		{"nesting 128 deep", `{` + anyone + `,"_x":` + nest(127) + `}`, "initiator_only"},
		{"a number out of range", `{` + anyone + `,"_x":1e400}`, "initiator_only"},
		{"empty", ``, "initiator_only"},
		{"not JSON", `{authority: any}`, "initiator_only"},

		{"nesting 127 deep", `{` + anyone + `,"_x":` + nest(126) + `}`, "any_participant"},
		{"a surrogate pair", `{` + anyone + `,"_x":"\ud83d\ude00"}`, "any_participant"},
		{"plain", `{` + anyone + `}`, "any_participant"},
		{"not an object", `[1]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DescriptorOf(&macpv1.PolicyDescriptor{PolicyId: "p", Mode: "*", SchemaVersion: 1, Rules: tc.rules})
			if tc.want == "" {
				if err == nil {
					t.Errorf("read as %v, want an error", d.Rules)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g, err := Bind(d)
			if err != nil || g.authority != tc.want {
				t.Errorf("bound %v (%v), want commitment authority %s", g, err, tc.want)
			}
		})
	}
}

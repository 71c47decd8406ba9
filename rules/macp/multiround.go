package macp

import (
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentwarden/warden/rules"
	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

type contribution struct{ sender, value string }

// multiRoundState is the runtime's ext.multi_round.v1: participants contribute
// values until every contributor holds the same one.
type multiRoundState struct {
	round         int
	contributions []contribution
	converged     bool
}

func (m *multiRoundState) step(c *stepCtx) rules.Verdict {
	s := c.next
	switch c.env.GetMessageType() {
	case "Contribute":
		if m.converged {
			return invalid(rules.RankMode, rules.ReasonStateConflict, "the session has converged")
		}
		value, err := contributeValue(c.env.GetPayload())
		if err != nil {
			return badPayload(c, err)
		}
		c.out.Payload = PayloadOf(&multiroundv1.ContributePayload{Value: value}) // the runtime's reading, JSON or protobuf
		found := false
		for i := range m.contributions {
			if m.contributions[i].sender == c.sender {
				found = true
				if m.contributions[i].value != value {
					m.contributions[i].value = value
					m.round++
				}
			}
		}
		if !found {
			m.contributions = append(m.contributions, contribution{sender: c.sender, value: value})
			m.round++
		}
		m.converged = m.convergedOn(s)
		return rules.Verdict{}

	case TypeCommitment:
		if !m.converged {
			return invalid(rules.RankModePost, rules.ReasonNotEligible, "the contributions have not converged")
		}
		if _, v := commitment(c); !v.OK() {
			return v
		}
		return rules.Verdict{}
	}
	return unknownType(c)
}

// convergedOn reports whether every listed participant, the initiator
// included when listed, has contributed and all contributions are equal: the
// runtime's check_convergence (macp-modes 0.13.0). Counting fewer would let
// Warden refuse the contributions the runtime still waits for, and the
// session could never resolve through Warden.
func (m *multiRoundState) convergedOn(s *Session) bool {
	for _, id := range s.Participants {
		found := false
		for _, ct := range m.contributions {
			found = found || ct.sender == id
		}
		if !found {
			return false
		}
	}
	for _, ct := range m.contributions[1:] {
		if ct.value != m.contributions[0].value {
			return false
		}
	}
	return len(m.contributions) > 0
}

// contributeValue reads a Contribute payload as the runtime reads it at
// semantics revision 3 and later (every session macp-runtime 0.13 starts is
// at revision 4): parse_contribute_value of macp-modes 0.13.0. A payload is
// the legacy JSON {"value": "..."} when serde_json reads it so (serde.go),
// unless the same bytes are also the canonical protobuf encoding of a
// ContributePayload (at value lengths 13, 32 and 123 a canonical payload can
// read as JSON too): then, and for every payload that is not such JSON, it is
// protobuf. Each byte string has one reading, the runtime's, so Warden never
// decides convergence on a value the runtime did not read.
func contributeValue(payload []byte) (string, error) {
	if len(payload) == 0 {
		return "", errEmptyPayload
	}
	if utf8.Valid(payload) {
		p := serde{b: payload}
		if v, ok := p.oneStringField("value"); ok && !canonicalContribute(payload) {
			return v, nil
		}
	}
	var p multiroundv1.ContributePayload
	if err := strictpb.Unmarshal(payload, &p); err != nil {
		return "", err
	}
	return p.GetValue(), nil
}

// canonicalContribute reports whether payload is exactly how prost encodes
// a ContributePayload: field 1 with a non-empty UTF-8 value, length minimal,
// nothing else (prost keeps no unknown fields, so its re-encoding of
// anything else differs).
func canonicalContribute(payload []byte) bool {
	num, typ, n := protowire.ConsumeTag(payload)
	if n != 1 || num != 1 || typ != protowire.BytesType {
		return false
	}
	v, m := protowire.ConsumeBytes(payload[n:])
	return m > 0 && n+m == len(payload) && len(v) > 0 && utf8.Valid(v) &&
		m == protowire.SizeBytes(len(v))
}

type payloadError string

func (e payloadError) Error() string { return string(e) }

const errEmptyPayload = payloadError("empty payload")

func (m *multiRoundState) summary(_ *Session, out map[string]any) {
	m = orZero(m)
	values := map[string]any{}
	for _, ct := range m.contributions {
		values[ct.sender] = ct.value
	}
	out["round"] = m.round
	out["contributions"] = values
	out["converged"] = m.converged
}

func (m *multiRoundState) clone() modal {
	if m == nil {
		return &multiRoundState{}
	}
	c := *m
	c.contributions = slices.Clone(m.contributions)
	return &c
}

package rules

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"

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

func (m *multiRoundState) step(c *stepCtx) Verdict {
	s := c.next
	switch c.env.GetMessageType() {
	case "Contribute":
		if m.converged {
			return invalid(RankMode, ReasonStateConflict, "the session has converged")
		}
		value, err := contributeValue(c.env.GetPayload())
		if err != nil {
			return badPayload(c, err)
		}
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
		return Verdict{}

	case TypeCommitment:
		if !m.converged {
			return invalid(RankModePost, ReasonNotEligible, "the contributions have not converged")
		}
		if _, v := commitment(c); !v.OK() {
			return v
		}
		return Verdict{}
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

// contributeValue reads a Contribute payload: the legacy JSON object
// {"value": "..."} the runtime still accepts (tried first, as it does, and
// read as strictly as its reader: the key is case-sensitive, unknown keys are
// ignored, a repeated "value" is an error), else protobuf.
func contributeValue(payload []byte) (string, error) {
	if len(payload) == 0 {
		return "", errEmptyPayload
	}
	if v, ok := legacyContribute(payload); ok {
		return v, nil
	}
	var p multiroundv1.ContributePayload
	if err := strictpb.Unmarshal(payload, &p); err != nil {
		return "", err
	}
	return p.GetValue(), nil
}

// legacyContribute parses the JSON form; ok is false when payload is not
// exactly one JSON object with one string "value".
func legacyContribute(payload []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	value, found := "", false
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey {
			return "", false
		}
		if key != "value" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return "", false
			}
			continue
		}
		var raw json.RawMessage
		if found || dec.Decode(&raw) != nil || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &value) != nil {
			return "", false // a second value, or not a string (null included)
		}
		found = true
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false
	}
	return value, found
}

type payloadError string

func (e payloadError) Error() string { return string(e) }

const errEmptyPayload = payloadError("empty payload")

func (m *multiRoundState) summary(_ *Session, out map[string]any) {
	values := map[string]any{}
	for _, ct := range m.contributions {
		values[ct.sender] = ct.value
	}
	out["round"] = m.round
	out["contributions"] = values
	out["converged"] = m.converged
}

func (m *multiRoundState) clone() modal {
	c := *m
	c.contributions = slices.Clone(m.contributions)
	return &c
}

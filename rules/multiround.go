package rules

import (
	"encoding/json"

	"google.golang.org/protobuf/proto"

	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
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

// convergedOn reports whether every participant other than the coordinating
// initiator has contributed and all contributions are equal.
func (m *multiRoundState) convergedOn(s *Session) bool {
	for _, id := range s.Participants {
		if id == s.Initiator {
			continue
		}
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

// contributeValue reads a Contribute payload: protobuf, or the legacy JSON
// object {"value": "..."} the runtime still accepts (tried first, as it does).
func contributeValue(payload []byte) (string, error) {
	if len(payload) == 0 {
		return "", errEmptyPayload
	}
	var legacy struct {
		Value *string `json:"value"`
	}
	if json.Unmarshal(payload, &legacy) == nil && legacy.Value != nil {
		return *legacy.Value, nil
	}
	var p multiroundv1.ContributePayload
	if err := proto.Unmarshal(payload, &p); err != nil {
		return "", err
	}
	return p.GetValue(), nil
}

type payloadError string

func (e payloadError) Error() string { return string(e) }

const errEmptyPayload = payloadError("empty payload")

func (m *multiRoundState) summary(out map[string]any) {
	values := map[string]any{}
	for _, ct := range m.contributions {
		values[ct.sender] = ct.value
	}
	out["round"] = m.round
	out["contributions"] = values
	out["converged"] = m.converged
}

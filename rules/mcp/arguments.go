package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentwarden/warden/rules"
)

// The bounds on params.arguments before an operator policy reads them: the
// policy engine evaluates what it is given, so an unbounded document would
// cost every decision on it. Arguments over a bound are refused, not left
// out: a policy that rules on arguments ("no argument matching this
// pattern") would otherwise pass the very call it was written to stop.
const (
	MaxArgumentBytes = 64 << 10
	MaxArgumentDepth = 16
)

// PolicyArguments decodes params.arguments for the policy: nil when absent
// or null, else the parsed JSON (numbers as json.Number, so a policy sees
// them as written). Arguments over MaxArgumentBytes or nested deeper than
// MaxArgumentDepth are refused (-32602).
func PolicyArguments(raw json.RawMessage) (any, rules.Verdict) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, rules.Verdict{}
	}
	if len(raw) > MaxArgumentBytes {
		return nil, tooLarge(fmt.Sprintf("params.arguments of %d bytes exceeds the limit of %d", len(raw), MaxArgumentBytes))
	}
	if d := depth(raw); d > MaxArgumentDepth {
		return nil, tooLarge(fmt.Sprintf("params.arguments nested %d deep exceeds the limit of %d", d, MaxArgumentDepth))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		// Parse already held the message to valid JSON.
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest, Detail: "params.arguments does not decode: " + err.Error()}
	}
	return v, rules.Verdict{}
}

func tooLarge(detail string) rules.Verdict {
	return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonArgumentsTooLarge, Detail: detail}
}

// depth returns the deepest nesting of objects and arrays in valid JSON.
func depth(raw []byte) int {
	d, most, inString, escaped := 0, 0, false, false
	for _, b := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch b {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			d++
			most = max(most, d)
		case b == '}' || b == ']':
			d--
		}
	}
	return most
}

package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentwarden/warden/rules"
)

// The bounds on a JSON value a request carries before an operator policy
// reads it (MCP params.arguments, A2A params.message.metadata): the policy
// engine evaluates what it is given, so an unbounded document would cost
// every decision on it. A value over a bound is refused, not left out: a
// policy that rules on it ("no argument matching this pattern") would
// otherwise pass the very request it was written to stop.
const (
	MaxPolicyBytes = 64 << 10
	MaxPolicyDepth = 16
)

// PolicyValue decodes raw, the member what of a request, for the policy: nil
// when absent or null, else the parsed JSON (numbers as json.Number, so a
// policy sees them as written). Refused (-32602): a value over
// MaxPolicyBytes or nested deeper than MaxPolicyDepth, and an object, at any
// depth, with a member name given twice or two names that fold alike
// (Fold): peers read those differently (first or last wins; encoding/json
// matches struct fields case-insensitively), so the policy could rule on a
// value the server never reads.
func PolicyValue(raw json.RawMessage, what string) (any, rules.Verdict) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, rules.Verdict{}
	}
	if len(raw) > MaxPolicyBytes {
		return nil, badValue(rules.ReasonArgumentsTooLarge, fmt.Sprintf("%s of %d bytes exceeds the limit of %d", what, len(raw), MaxPolicyBytes))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		var deep errTooDeep
		if errors.As(err, &deep) {
			return nil, badValue(rules.ReasonArgumentsTooLarge, fmt.Sprintf("%s nested deeper than the limit of %d", what, MaxPolicyDepth))
		}
		return nil, badValue(rules.ReasonMalformedRequest, "invalid params: "+what+": "+err.Error())
	}
	return v, rules.Verdict{}
}

func badValue(reason rules.Reason, detail string) rules.Verdict {
	return rules.Verdict{Code: rules.CodeInvalidParams, Reason: reason, Detail: detail}
}

type errTooDeep struct{}

func (errTooDeep) Error() string { return "nested too deep" }

// decodeValue reads one JSON value at nesting depth (0 for the top).
func decodeValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth++; depth > MaxPolicyDepth {
		return nil, errTooDeep{}
	}
	if d == '[' {
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ]
		return list, err
	}
	obj, folded := map[string]any{}, map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		f := Fold(k)
		if prev, dup := folded[f]; dup {
			if prev == k {
				return nil, fmt.Errorf("member %s given twice", strconv.Quote(k))
			}
			return nil, fmt.Errorf("members %s and %s differ only in case", strconv.Quote(prev), strconv.Quote(k))
		}
		folded[f] = k
		if obj[k], err = decodeValue(dec, depth); err != nil {
			return nil, err
		}
	}
	_, err = dec.Token() // }
	return obj, err
}

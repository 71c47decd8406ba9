package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
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
// them as written). Refused (-32602): arguments over MaxArgumentBytes or
// nested deeper than MaxArgumentDepth, and an object with a member name
// given twice or two names that fold alike (jsonrpc.Fold): peers read those
// differently (first or last wins; encoding/json matches struct fields
// case-insensitively), so the policy could rule on a value the tool never
// reads.
func PolicyArguments(raw json.RawMessage) (any, rules.Verdict) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, rules.Verdict{}
	}
	if len(raw) > MaxArgumentBytes {
		return nil, badArguments(rules.ReasonArgumentsTooLarge, fmt.Sprintf("params.arguments of %d bytes exceeds the limit of %d", len(raw), MaxArgumentBytes))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		var deep errTooDeep
		if errors.As(err, &deep) {
			return nil, badArguments(rules.ReasonArgumentsTooLarge, fmt.Sprintf("params.arguments nested deeper than the limit of %d", MaxArgumentDepth))
		}
		return nil, badArguments(rules.ReasonMalformedRequest, "invalid params: params.arguments: "+err.Error())
	}
	return v, rules.Verdict{}
}

func badArguments(reason rules.Reason, detail string) rules.Verdict {
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
	if depth++; depth > MaxArgumentDepth {
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
		f := jsonrpc.Fold(k)
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

package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
// policy sees them as written). Refused (-32602): a number that a 64-bit
// float does not hold exactly as written (ReadsAsDouble: the policy engine
// compares decimals exactly, the server reads the float, and 999.99999999999999999
// is below 1000 to the one and 1000 to the other), a value over
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
	if !Valid(raw) {
		// encoding/json's own words for what is wrong.
		var v any
		return nil, badValue(rules.ReasonMalformedRequest, "invalid params: "+what+": "+json.Unmarshal(raw, &v).Error())
	}
	v, _, err := policyValue(raw, SkipSpace(raw, 0), 0)
	if err != nil {
		return nil, valueRefused(what, err)
	}
	return v, rules.Verdict{}
}

// valueRefused is the verdict on the member what that could not be read for
// the policy (err).
func valueRefused(what string, err error) rules.Verdict {
	var deep errTooDeep
	if errors.As(err, &deep) {
		return badValue(rules.ReasonArgumentsTooLarge, fmt.Sprintf("%s nested deeper than the limit of %d", what, MaxPolicyDepth))
	}
	return badValue(rules.ReasonMalformedRequest, "invalid params: "+what+": "+err.Error())
}

func badValue(reason rules.Reason, detail string) rules.Verdict {
	return rules.Verdict{Code: rules.CodeInvalidParams, Reason: reason, Detail: detail}
}

type errTooDeep struct{}

func (errTooDeep) Error() string { return "nested too deep" }

// policyValue reads the JSON value at raw[i] (valid JSON: PolicyValue
// checked it whole) at nesting depth (0 for the top) as encoding/json decodes
// it into any with UseNumber, and returns it with the index just past it. It
// reads the bytes in place (scan.go) instead of through json.Decoder's
// tokens, which cost a dozen allocations for the smallest arguments;
// FuzzPolicyValue holds it to the decoder's values and refusals.
func policyValue(raw []byte, i, depth int) (any, int, error) {
	switch raw[i] {
	case '"':
		end, _ := StringEnd(raw, i)
		s, err := policyString(raw[i:end])
		return s, end, err
	case 't':
		return true, i + len("true"), nil
	case 'f':
		return false, i + len("false"), nil
	case 'n':
		return nil, i + len("null"), nil
	case '[', '{':
	default:
		end := ValueEnd(raw, i)
		n := json.Number(raw[i:end])
		if !ReadsAsDouble(string(n)) {
			return nil, 0, fmt.Errorf("the number %.40s is not one a 64-bit float holds (a server reading it as JavaScript, Python or encoding/json do reads another)", n)
		}
		return n, end, nil
	}
	if depth++; depth > MaxPolicyDepth {
		return nil, 0, errTooDeep{}
	}
	if raw[i] == '[' {
		list := []any{}
		i = SkipSpace(raw, i+1)
		for raw[i] != ']' {
			v, end, err := policyValue(raw, i, depth)
			if err != nil {
				return nil, 0, err
			}
			list = append(list, v)
			if i = SkipSpace(raw, end); raw[i] == ',' {
				i = SkipSpace(raw, i+1)
			}
		}
		return list, i + 1, nil
	}
	obj := map[string]any{}
	// The names so far, to find two that fold alike: compared in place while
	// few (Fold builds a string for most names), by their Fold past that.
	var few [8]string
	names := few[:0]
	var folded map[string]string
	i = SkipSpace(raw, i+1)
	for raw[i] != '}' {
		end, _ := StringEnd(raw, i)
		k, err := policyString(raw[i:end])
		if err != nil {
			return nil, 0, err
		}
		prev, dup := "", false
		if folded == nil && len(names) < cap(few) {
			for _, n := range names {
				if foldEqualString(n, k) {
					prev, dup = n, true
					break
				}
			}
			names = append(names, k)
		} else {
			if folded == nil {
				folded = make(map[string]string, 2*len(names))
				for _, n := range names {
					folded[Fold(n)] = n
				}
			}
			f := Fold(k)
			prev, dup = folded[f]
			folded[f] = k
		}
		if dup {
			if prev == k {
				return nil, 0, fmt.Errorf("member %s given twice", strconv.Quote(k))
			}
			return nil, 0, fmt.Errorf("members %s and %s differ only in case", strconv.Quote(prev), strconv.Quote(k))
		}
		i = SkipSpace(raw, SkipSpace(raw, end)+1) // past the colon
		v, end, err := policyValue(raw, i, depth)
		if err != nil {
			return nil, 0, err
		}
		obj[k] = v
		if i = SkipSpace(raw, end); raw[i] == ',' {
			i = SkipSpace(raw, i+1)
		}
	}
	return obj, i + 1, nil
}

// policyString decodes the string literal lit as encoding/json does.
func policyString(lit []byte) (string, error) {
	if s, ok := PlainString(lit); ok {
		return s, nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

// ReadsAsDouble reports whether the JSON number lit has the value of the
// 64-bit float it reads as (JSON.parse, Python's float, encoding/json into
// any): its decimal value is that of the float's shortest spelling, so a
// rule on the written number and a server acting on the float see one
// number. 0.1, 1e3, -0 and 9007199254740992 do; 999.99999999999999999 (read
// as 1000), 9007199254740993 (read as ...992) and 1e999 (Infinity) do not.
func ReadsAsDouble(lit string) bool {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false // ±Inf, or not a number
	}
	a, ok := decimalOf(lit)
	if !ok {
		return false
	}
	b, _ := decimalOf(strconv.FormatFloat(f, 'e', -1, 64))
	return a == b
}

// decimal is a number's value as its significant digits (no leading or
// trailing zero; "" for zero) times ten to exp, with its sign.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// decimalOf reads a JSON number (or a Go 'e' spelling) as a decimal,
// without expanding its exponent.
func decimalOf(s string) (decimal, bool) {
	var d decimal
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		d.neg, s = true, rest
	}
	mant, x, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		var err error
		if exp, err = strconv.Atoi(x); err != nil {
			return d, false // an exponent past int: never a float's
		}
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	if trimmed == "" {
		return decimal{}, true // zero, whatever its sign and exponent
	}
	d.digits, d.exp = trimmed, exp
	return d, true
}

package mcp

import (
	"encoding/json"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// plainID decodes the ids that need no decoder, exactly as idValue's
// decoder would: a string literal without escapes, control characters or
// invalid UTF-8, and an integer in canonical form; each must be all of raw.
// ok is false for anything else, which idValue then decodes.
func plainID(raw []byte) (v any, ok bool) {
	if len(raw) > 0 && raw[0] == '"' {
		s, ok := jsonrpc.PlainString(raw)
		return s, ok
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || digits[0] == '0' && len(digits) > 1 {
		return nil, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, false
		}
	}
	return json.Number(raw), true
}

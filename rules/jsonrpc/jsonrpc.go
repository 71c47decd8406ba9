// Package jsonrpc reads the JSON-RPC 2.0 envelope the way every peer reads
// it, for the protocols Warden speaks over it (MCP, A2A): objects read for
// splicing (Object) with exact member names (no two that fold alike, Check),
// canonical ids, and Warden's own error answers.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is what a JSON-RPC message is.
type Kind uint8

// The kinds of message.
const (
	KindRequest Kind = iota + 1
	KindNotification
	KindResponse
)

// Error is a malformed message, with the JSON-RPC code to answer it with.
type Error struct {
	Code    int // -32700 parse error, -32600 invalid request
	Message string
}

func (e *Error) Error() string { return e.Message }

// CodeOf is the JSON-RPC code to answer a read error with: an Error's own
// code, else a parse error. Every JSON-RPC adapter answers with it.
func CodeOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrParse
}

// The JSON-RPC error codes Warden answers with.
const (
	ErrParse          = -32700
	ErrInvalidRequest = -32600
	ErrMethodNotFound = -32601
	ErrInvalidParams  = -32602
	ErrInternal       = -32603
)

// Fold returns the case-folded form of a member name: two names have the
// same Fold exactly when encoding/json's struct decoding takes one for the
// other (ASCII letters upper-cased, any other rune replaced by the smallest
// rune of its Unicode simple-folding orbit, so 'ſ' is 'S' and the Kelvin
// sign is 'K'; bytes.EqualFold is the same relation).
func Fold(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= utf8.RuneSelf || ('a' <= c && c <= 'z') {
			ascii = false
			break
		}
	}
	if ascii {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name { // invalid UTF-8 reads as U+FFFD, as decoders read it
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteByte(byte(r))
			continue
		}
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// Unscored is name without its underscores. Peers read a member under its
// name without them as well as under the name itself: ProtoJSON parsers (the
// A2A Python SDK's) take a Protocol Buffers field name (task_id) for its JSON
// name (taskId), and pydantic models with populate_by_name (the MCP Python
// SDK's, alias_generator=to_camel) take the field's Python name (task_id,
// meta) for its alias (taskId, _meta). A name Warden reads is therefore
// refused in any spelling equal to it under Fold once both are Unscored.
func Unscored(name string) string {
	if strings.IndexByte(name, '_') < 0 {
		return name
	}
	return strings.ReplaceAll(name, "_", "")
}

// underscored reports whether either name holds an underscore (only then
// may two names of different lengths read alike).
func underscored(a []byte, name string) bool {
	return strings.IndexByte(name, '_') >= 0 || bytes.IndexByte(a, '_') >= 0
}

// foldEqualString reports whether Fold(a) == Fold(b), without building
// either.
func foldEqualString(a, b string) bool {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		a, b = a[na:], b[nb:]
		if ra == rb {
			continue
		}
		if foldASCII(ra) != foldASCII(rb) {
			return false
		}
	}
	return a == b
}

// foldASCII is the rune Fold writes for r.
func foldASCII(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	return foldRune(r)
}

// foldRune returns the smallest rune of r's simple-folding orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// String decodes a JSON string; ok is false for anything else.
func String(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// MaxID is the largest integer id magnitude: every integer up to 2^53 has
// one float64, so every peer reads it as the same number.
const MaxID = 1 << 53

// ValidID reports whether a raw JSON-RPC request id is one every peer reads
// and echoes alike: a string, or an integer in canonical form (no fraction,
// exponent, leading zero, plus sign or "-0") within ±2^53.
func ValidID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		_, ok := String(raw)
		return ok
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 16 || (digits[0] == '0' && len(raw) > 1) {
		return false // "-0" and "01" are not canonical
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(string(digits), 10, 64)
	return err == nil && n <= MaxID
}

// IDValue decodes a raw JSON-RPC id as SameID reads one: numbers kept as
// their literal (json.Number). The ids peers send (a plain string, an
// integer in canonical form) are read without a decoder. Space around the
// id is not part of it (a number's literal is the number's alone).
func IDValue(raw []byte) (any, bool) {
	raw = trimSpace(raw)
	if s, ok := PlainString(raw); ok {
		return s, true
	}
	if canonicalInt(raw) || len(raw) > 0 && (raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9') && json.Valid(raw) {
		return json.Number(raw), true
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// trimSpace is b without the JSON whitespace around it.
func trimSpace(b []byte) []byte {
	i, j := SkipSpace(b, 0), len(b)
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\r' || b[j-1] == '\n') {
		j--
	}
	return b[i:j]
}

// canonicalInt reports whether raw is all an integer in canonical form (no
// fraction, exponent, leading zero or plus sign), of any size: valid JSON
// that a decoder with UseNumber reads as json.Number(raw).
func canonicalInt(raw []byte) bool {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || digits[0] == '0' && len(digits) > 1 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// IsID reports whether raw, an answer's id, is the request's id: SameID of
// IDValue(raw), without decoding or a copy when raw is the request's id as
// written, a plain string or an integer in canonical form (what peers echo).
func IsID(raw []byte, id json.RawMessage) bool {
	if len(raw) > 0 && bytes.Equal(raw, bytes.TrimSpace(id)) && (canonicalInt(raw) || plainLiteral(raw)) {
		return true
	}
	v, ok := IDValue(raw)
	return ok && SameID(v, id)
}

// plainLiteral reports whether raw is a string literal PlainString reads
// (no escape, control character or invalid UTF-8), without the copy.
func plainLiteral(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(in)
}

// SameID reports whether v, an answer's id as a decoder with UseNumber
// gives it, is the request's raw id: strings by value (encoders escape
// differently), numbers by their literal, as peers echo them. Anything else
// (null, a missing id, an object) is no request's id.
func SameID(v any, raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch got := v.(type) {
	case string:
		if raw[0] != '"' {
			return false
		}
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
			return string(raw[1:len(raw)-1]) == got // no escapes: the bytes are the value
		}
		var w string
		return json.Unmarshal(raw, &w) == nil && w == got
	case json.Number:
		return json.Valid(raw) && string(raw) == string(got)
	}
	return false
}

// ErrorBody is a JSON-RPC error response; a missing id is null.
func ErrorBody(id json.RawMessage, code int, message string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message}})
	if err != nil { // an id that is not JSON: answer with null
		return ErrorBody(nil, code, message)
	}
	return b
}

// Encode writes v as JSON without HTML escaping, so that text Warden passes
// on (an upstream's answer, a rewritten notification) keeps its characters
// as they were ("<", ">", "&" stay as they are), and without the trailing
// newline json.Encoder adds.
func Encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Package replay runs MACP transcripts in the conformance-fixture format
// (reference/macp/conformance/README.md) through Warden's Enforcer offline:
// every message is authenticated as its fixture sender, decided by the rules
// and policies, and committed when allowed, as in ext_authz mode where the
// upstream's answer is not seen. It reports each decision and whether the
// outcomes match the fixture's expectations.
//
// Warden extends the format with optional fields used by its attack
// transcripts: per message, "principal" (the authenticated identity when it
// differs from the envelope's sender), "message_id", "advance_ms" (move the
// clock before the message), "op" (a control RPC: CancelSession,
// SuspendSession, ResumeSession), "mode" and "macp_version" overrides, and
// payload_type "raw" (payload is base64 bytes). A transcript whose messages
// include a SessionStart does not get one synthesized from its header.
package replay

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Fixture is one transcript.
type Fixture struct {
	Mode                 string                  `json:"mode"`
	Initiator            string                  `json:"initiator"`
	Participants         []string                `json:"participants"`
	ModeVersion          string                  `json:"mode_version"`
	ConfigurationVersion string                  `json:"configuration_version"`
	PolicyVersion        string                  `json:"policy_version"`
	TTLMs                int64                   `json:"ttl_ms"`
	Policy               *rules.PolicyDescriptor `json:"policy"`
	Messages             []FixtureMessage        `json:"messages"`
	ExpectedFinalState   string                  `json:"expected_final_state"`
	ExpectedResolution   map[string]any          `json:"expected_resolution"`
	ExpectedModeState    map[string]any          `json:"expected_mode_state"`
	ResolutionPresent    *bool                   `json:"expect_resolution_present"`
}

// FixtureMessage is one message of a transcript.
type FixtureMessage struct {
	Sender            string          `json:"sender"`
	MessageType       string          `json:"message_type"`
	PayloadType       string          `json:"payload_type"`
	Payload           json.RawMessage `json:"payload"`
	Expect            string          `json:"expect"`
	ExpectedErrorCode string          `json:"expected_error_code"`
	// Warden's extensions.
	Principal   string `json:"principal"`
	MessageID   string `json:"message_id"`
	AdvanceMs   int64  `json:"advance_ms"`
	Op          string `json:"op"`
	Mode        string `json:"mode"`
	MacpVersion string `json:"macp_version"`
}

// Line is the decision on one message.
type Line struct {
	File     string       `json:"file"`
	Index    string       `json:"index"`
	Sender   string       `json:"sender"`
	Type     string       `json:"message_type"`
	Accept   bool         `json:"accept"`
	Code     rules.Code   `json:"code,omitempty"`
	Reason   rules.Reason `json:"reason"`
	Detail   string       `json:"detail,omitempty"`
	Roles    []string     `json:"roles"`
	Expected string       `json:"expect,omitempty"`
	Match    bool         `json:"match"`
}

// String formats the line as `warden replay` prints it.
func (l Line) String() string {
	verdict, code := "accept", "-"
	if !l.Accept {
		verdict, code = "reject", string(l.Code)
	}
	return fmt.Sprintf("%s:%s %s %s %s %s %s", l.File, l.Index, l.Sender, l.Type, verdict, code, l.Reason)
}

// Result is the outcome of one transcript.
type Result struct {
	File     string   `json:"file"`
	Lines    []Line   `json:"lines"`
	Failures []string `json:"failures"`
}

// OK reports whether every expectation held.
func (r Result) OK() bool { return len(r.Failures) == 0 }

// epoch is the replay clock's start: fixed, so runs are repeatable.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Run replays the transcript in file against a fresh Enforcer that uses
// engine for its policies.
func Run(ctx context.Context, engine *policies.Engine, file string) (Result, error) {
	res := Result{File: file}
	b, err := os.ReadFile(file)
	if err != nil {
		return res, fmt.Errorf("read transcript: %w", err)
	}
	var fx Fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		return res, fmt.Errorf("decode transcript %s: %w", file, err)
	}
	clock := epoch
	auth, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		return res, err
	}
	enf, err := proxy.New(proxy.Config{Sessions: 64}, proxy.Options{Authenticator: auth, Policies: engine, Now: func() time.Time { return clock }})
	if err != nil {
		return res, err
	}
	if fx.Policy != nil {
		if err := enf.Policies().Register(*fx.Policy); err != nil {
			return res, fmt.Errorf("transcript %s: %w", file, err)
		}
	}
	sum := sha256.Sum256([]byte(filepath.Base(file)))
	sid := uuidV4(sum[:16])
	name := filepath.Base(file)

	msgs := fx.Messages
	hasStart := false
	for _, m := range msgs {
		hasStart = hasStart || m.MessageType == rules.TypeSessionStart
	}
	if !hasStart {
		start, err := json.Marshal(map[string]any{
			"participants": fx.Participants, "mode_version": fx.ModeVersion, "configuration_version": fx.ConfigurationVersion,
			"policy_version": fx.PolicyVersion, "ttl_ms": fx.TTLMs, "intent": "replay",
		})
		if err != nil {
			return res, err
		}
		msgs = append([]FixtureMessage{{Sender: fx.Initiator, MessageType: rules.TypeSessionStart, PayloadType: "SessionStart", Payload: start, Expect: "accept", MessageID: "start"}}, msgs...)
	}

	for i, m := range msgs {
		index := strconv.Itoa(i)
		if !hasStart {
			index = strconv.Itoa(i - 1)
			if i == 0 {
				index = "start"
			}
		}
		clock = clock.Add(time.Millisecond + time.Duration(m.AdvanceMs)*time.Millisecond)
		principal := m.Principal
		if principal == "" {
			principal = m.Sender
		}
		req := proxy.Request{Credentials: authn.Credentials{Bearer: principal}}
		if m.Op != "" {
			req.Op, req.SessionID = m.Op, sid
		} else {
			payload, err := encodePayload(m.PayloadType, m.Payload)
			if err != nil {
				return res, fmt.Errorf("%s:%s: %w", name, index, err)
			}
			id := m.MessageID
			if id == "" {
				id = "m-" + index
			}
			mode, version := fx.Mode, rules.ProtocolVersion
			if m.Mode != "" {
				mode = m.Mode
			}
			if m.MacpVersion != "" {
				version = m.MacpVersion
			}
			req.Envelope = &macpv1.Envelope{
				MacpVersion: version, Mode: mode, MessageType: m.MessageType, MessageId: id,
				SessionId: sid, Sender: m.Sender, TimestampUnixMs: clock.UnixMilli(), Payload: payload,
			}
		}
		d, err := enf.Enforce(ctx, req)
		if err != nil {
			return res, fmt.Errorf("%s:%s: could not decide: %w", name, index, err)
		}
		d.Settle(d.Allow) // no upstream: an allowed message is taken as accepted
		typ := m.MessageType
		if m.Op != "" {
			typ = m.Op
		}
		line := Line{File: name, Index: index, Sender: m.Sender, Type: typ, Accept: d.Allow, Code: d.Code, Reason: d.Reason,
			Detail: d.Message, Roles: d.Roles, Expected: m.Expect, Match: true}
		switch {
		case m.Expect == "accept" && !d.Allow:
			line.Match = false
			res.Failures = append(res.Failures, fmt.Sprintf("%s:%s: expected accept, got reject %s (%s: %s)", name, index, d.Code, d.Reason, d.Message))
		case m.Expect == "reject" && d.Allow:
			line.Match = false
			res.Failures = append(res.Failures, fmt.Sprintf("%s:%s: expected reject, got accept", name, index))
		case m.Expect == "reject" && m.ExpectedErrorCode != "" && string(d.Code) != m.ExpectedErrorCode:
			line.Match = false
			res.Failures = append(res.Failures, fmt.Sprintf("%s:%s: expected %s, got %s (%s: %s)", name, index, m.ExpectedErrorCode, d.Code, d.Reason, d.Message))
		}
		res.Lines = append(res.Lines, line)
	}

	s, err := enf.Session(ctx, sid)
	if err != nil {
		return res, err
	}
	res.Failures = append(res.Failures, checkFinal(name, &fx, s)...)
	return res, nil
}

// checkFinal compares the session's final state with the fixture's
// expectations.
func checkFinal(name string, fx *Fixture, s *rules.Session) []string {
	var fails []string
	if s == nil {
		if fx.ExpectedFinalState != "" {
			fails = append(fails, fmt.Sprintf("%s: expected final state %s, but the session was never started", name, fx.ExpectedFinalState))
		}
		return fails
	}
	if fx.ExpectedFinalState != "" && fx.ExpectedFinalState != s.State.String() {
		fails = append(fails, fmt.Sprintf("%s: expected final state %s, got %s", name, fx.ExpectedFinalState, s.State))
	}
	if fx.ResolutionPresent != nil && *fx.ResolutionPresent != (s.Resolution != nil) {
		fails = append(fails, fmt.Sprintf("%s: expected resolution present=%v, got %v", name, *fx.ResolutionPresent, s.Resolution != nil))
	}
	if len(fx.ExpectedResolution) > 0 {
		if s.Resolution == nil {
			fails = append(fails, name+": expected a resolution, got none")
		} else {
			got := map[string]any{
				"action": s.Resolution.Action, "outcome_positive": s.Resolution.OutcomePositive,
				"mode_version": s.Resolution.ModeVersion, "configuration_version": s.Resolution.ConfigVersion,
				"policy_version": s.Resolution.PolicyVersion,
			}
			for _, k := range sortedKeys(fx.ExpectedResolution) {
				if !reflect.DeepEqual(fx.ExpectedResolution[k], got[k]) {
					fails = append(fails, fmt.Sprintf("%s: expected resolution %s=%v, got %v", name, k, fx.ExpectedResolution[k], got[k]))
				}
			}
		}
	}
	if len(fx.ExpectedModeState) > 0 {
		fails = append(fails, subset(name+": mode state", fx.ExpectedModeState, normalize(s.ModeState()))...)
	}
	return fails
}

// subset reports where want is not contained in got.
func subset(at string, want, got any) []string {
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: expected %v, got %v", at, want, got)}
		}
		return nil
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: expected an object, got %v", at, got)}
	}
	var fails []string
	for _, k := range sortedKeys(wm) {
		fails = append(fails, subset(at+"."+k, wm[k], gm[k])...)
	}
	return fails
}

// normalize round-trips v through JSON so it compares with decoded fixtures.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// uuidV4 formats 16 bytes as a lowercase version-4 UUID.
func uuidV4(b []byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

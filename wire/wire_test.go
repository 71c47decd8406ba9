package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
	proposalv1 "github.com/agentwarden/warden/wire/modes/proposal/v1"
	quorumv1 "github.com/agentwarden/warden/wire/modes/quorum/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// Envelope.mode identifiers of the standard modes and the runtime's built-in
// multi_round extension mode.
const (
	modeTask       = "macp.mode.task.v1"
	modeHandoff    = "macp.mode.handoff.v1"
	modeDecision   = "macp.mode.decision.v1"
	modeProposal   = "macp.mode.proposal.v1"
	modeQuorum     = "macp.mode.quorum.v1"
	modeMultiRound = "ext.multi_round.v1"
)

// payloadKind maps an Envelope (mode, message_type) to its payload message.
type payloadKind struct {
	mode        string // "" for core message types, valid in every mode
	messageType string
	sample      proto.Message // every field set; never mutate
}

// payloadKinds lists one fully populated message of every payload type.
var payloadKinds = []payloadKind{
	// macp.v1 core payloads.
	{"", "SessionStart", &macpv1.SessionStartPayload{
		Intent:               "Select a vendor",
		Participants:         []string{"agent://orchestrator", "agent://security"},
		ModeVersion:          "1.0.0",
		ConfigurationVersion: "runtime-2026.03.01",
		PolicyVersion:        "org-procurement-2026.02",
		TtlMs:                900000,
		Roots:                []*macpv1.Root{{Uri: "file:///srv/data", Name: "data"}},
		ContextId:            "ctx:procurement",
		Extensions:           map[string][]byte{"x.trace": {0x01, 0x02}, "x.empty": {}},
		MaxSuspendMs:         60000,
	}},
	{"", "Commitment", &macpv1.CommitmentPayload{
		CommitmentId:         "d4f9c5c0-3c7b-4b70-9f0c-2d57f6a3b1a2",
		Action:               "vendor.select",
		AuthorityScope:       "procurement",
		Reason:               "meets constraints",
		ModeVersion:          "1.0.0",
		PolicyVersion:        "org-procurement-2026.02",
		ConfigurationVersion: "runtime-2026.03.01",
		OutcomePositive:      true,
		Supersedes:           &macpv1.CommitmentRef{SessionId: "prev-session", CommitmentHash: "sha256:00ff"},
	}},
	{"", "Signal", &macpv1.SignalPayload{
		SignalType:           "observation.latency",
		Data:                 []byte{0, 1, 2, 3, 4},
		Confidence:           0.92,
		CorrelationSessionId: "corr-1",
	}},
	{"", "Progress", &macpv1.ProgressPayload{
		ProgressToken:   "tok-1",
		Progress:        3,
		Total:           10,
		Message:         "working",
		TargetMessageId: "msg-1",
	}},
	{"", "SessionCancel", &macpv1.SessionCancelPayload{Reason: "user requested", CancelledBy: "user://alice"}},
	{"", "SessionSuspend", &macpv1.SessionSuspendPayload{Reason: "maintenance", SuspendedBy: "runtime://macp"}},
	{"", "SessionResume", &macpv1.SessionResumePayload{Reason: "done", ResumedBy: "runtime://macp", BankedMs: 1234}},

	// macp.modes.task.v1
	{modeTask, "TaskRequest", &taskv1.TaskRequestPayload{
		TaskId: "task-001", Title: "Summarize", Instructions: "Do it", RequestedAssignee: "agent://worker",
		Input: []byte(`{"a":1}`), DeadlineUnixMs: 1773479400000,
	}},
	{modeTask, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "task-001", Assignee: "agent://worker", Reason: "ok"}},
	{modeTask, "TaskReject", &taskv1.TaskRejectPayload{TaskId: "task-001", Assignee: "agent://worker", Reason: "busy"}},
	{modeTask, "TaskUpdate", &taskv1.TaskUpdatePayload{
		TaskId: "task-001", Status: "in_progress", Progress: 0.5, Message: "half", PartialOutput: []byte("part"),
	}},
	{modeTask, "TaskComplete", &taskv1.TaskCompletePayload{
		TaskId: "task-001", Assignee: "agent://worker", Output: []byte("out"), Summary: "done",
	}},
	{modeTask, "TaskFail", &taskv1.TaskFailPayload{
		TaskId: "task-001", Assignee: "agent://worker", ErrorCode: "TIMEOUT", Reason: "slow", Retryable: true,
	}},

	// macp.modes.handoff.v1
	{modeHandoff, "HandoffOffer", &handoffv1.HandoffOfferPayload{
		HandoffId: "handoff-001", TargetParticipant: "agent://specialist", Scope: "payments", Reason: "expertise",
	}},
	{modeHandoff, "HandoffContext", &handoffv1.HandoffContextPayload{
		HandoffId: "handoff-001", ContentType: "application/json", Context: []byte(`{"case":7}`),
	}},
	{modeHandoff, "HandoffAccept", &handoffv1.HandoffAcceptPayload{
		HandoffId: "handoff-001", AcceptedBy: "agent://specialist", Reason: "ok", Implicit: true,
	}},
	{modeHandoff, "HandoffDecline", &handoffv1.HandoffDeclinePayload{
		HandoffId: "handoff-001", DeclinedBy: "agent://specialist", Reason: "no",
	}},

	// macp.modes.decision.v1
	{modeDecision, "Proposal", &decisionv1.ProposalPayload{
		ProposalId: "p1", Option: "vendor-b", Rationale: "cheapest", SupportingData: []byte("data"),
	}},
	{modeDecision, "Evaluation", &decisionv1.EvaluationPayload{
		ProposalId: "p1", Recommendation: "APPROVE", Confidence: 0.8, Reason: "fine",
	}},
	{modeDecision, "Objection", &decisionv1.ObjectionPayload{ProposalId: "p1", Reason: "risk", Severity: "medium"}},
	{modeDecision, "Vote", &decisionv1.VotePayload{ProposalId: "p1", Vote: "APPROVE", Reason: "ok"}},

	// macp.modes.proposal.v1
	{modeProposal, "Proposal", &proposalv1.ProposalPayload{
		ProposalId: "p1", Title: "Plan A", Summary: "sum", Details: []byte("d"), Tags: []string{"a", "b"},
	}},
	{modeProposal, "CounterProposal", &proposalv1.CounterProposalPayload{
		ProposalId: "p2", SupersedesProposalId: "p1", Title: "Plan B", Summary: "sum", Details: []byte("d"),
	}},
	{modeProposal, "Accept", &proposalv1.AcceptPayload{ProposalId: "p2", Reason: "ok"}},
	{modeProposal, "Reject", &proposalv1.RejectPayload{ProposalId: "p2", Terminal: true, Reason: "no"}},
	{modeProposal, "Withdraw", &proposalv1.WithdrawPayload{ProposalId: "p2", Reason: "moot"}},

	// macp.modes.quorum.v1
	{modeQuorum, "ApprovalRequest", &quorumv1.ApprovalRequestPayload{
		RequestId: "r1", Action: "deploy", Summary: "ship it", Details: []byte("d"), RequiredApprovals: 2,
	}},
	{modeQuorum, "Approve", &quorumv1.ApprovePayload{RequestId: "r1", Reason: "ok"}},
	{modeQuorum, "Reject", &quorumv1.RejectPayload{RequestId: "r1", Reason: "no"}},
	{modeQuorum, "Abstain", &quorumv1.AbstainPayload{RequestId: "r1", Reason: "conflict"}},

	// macp.modes.multi_round.v1
	{modeMultiRound, "Contribute", &multiroundv1.ContributePayload{Value: "option_a"}},
}

// newPayload returns an empty payload message for an envelope's mode and
// message_type, or false if the pair is unknown.
func newPayload(mode, messageType string) (proto.Message, bool) {
	for _, k := range payloadKinds {
		if (k.mode == "" || k.mode == mode) && k.messageType == messageType {
			return k.sample.ProtoReflect().New().Interface(), true
		}
	}
	return nil, false
}

func sampleEnvelope(k payloadKind) *macpv1.Envelope {
	payload, err := proto.Marshal(k.sample)
	if err != nil {
		panic(err)
	}
	mode := k.mode
	if mode == "" {
		mode = modeDecision
	}
	return &macpv1.Envelope{
		MacpVersion:     "1.0",
		Mode:            mode,
		MessageType:     k.messageType,
		MessageId:       "2b0b0c4e-7a53-4d8e-9d35-8c1c8f1f6a10",
		SessionId:       "9a6f1a8e-3f2b-4c1d-8e7a-5b4c3d2e1f00",
		Sender:          "agent://tester",
		TimestampUnixMs: 1772396641000,
		Payload:         payload,
	}
}

// macpDir is the MACP specification's reference files Warden keeps in the
// repository (testdata/macp, see its SOURCE.md): canonical example envelopes.
const macpDir = "../testdata/macp"

func readEnvelopeBin(tb testing.TB) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(macpDir, "examples", "envelope.bin"))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// envelopeBinPlaceholder is the full content of examples/envelope.bin: the
// spec repository ships a 37-byte ASCII placeholder (identical upstream at
// examples/proto/envelope.bin), not an encoded Envelope.
const envelopeBinPlaceholder = "MACP_PROTO_EXAMPLE_BINARY_PLACEHOLDER"

func TestEnvelopeBin(t *testing.T) {
	data := readEnvelopeBin(t)
	if string(data) != envelopeBinPlaceholder {
		t.Fatalf("envelope.bin changed (%d bytes, %q); it used to be the upstream placeholder: "+
			"replace this test with assertions on the real envelope's fields", len(data), data)
	}

	// Read as protobuf, the placeholder starts with two well-formed fields
	// ('M' = field 9 fixed32 "ACP_", 'P' = field 10 varint 'R' = 82) and then
	// hits 'O' = field 9 with the invalid wire type 7.
	b := data
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 9 || typ != protowire.Fixed32Type {
		t.Fatalf("first tag = (%d, %d, %d), want field 9 fixed32", num, typ, n)
	}
	b = b[n:]
	v32, n := protowire.ConsumeFixed32(b)
	if n != 4 || v32 != 0x5f504341 { // "ACP_" little-endian
		t.Fatalf("field 9 fixed32 = %#x", v32)
	}
	b = b[n:]
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 || num != 10 || typ != protowire.VarintType {
		t.Fatalf("second tag = (%d, %d, %d), want field 10 varint", num, typ, n)
	}
	b = b[n:]
	v64, n := protowire.ConsumeVarint(b)
	if n != 1 || v64 != 82 {
		t.Fatalf("field 10 varint = %d (%d bytes), want 82", v64, n)
	}
	b = b[n:]
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 || num != 9 || typ != 7 {
		t.Fatalf("third tag = (%d, %d, %d), want field 9 with wire type 7", num, typ, n)
	}
	if _, _, n := protowire.ConsumeField(b); n >= 0 {
		t.Fatal("field with wire type 7 parsed")
	}

	var env macpv1.Envelope
	if err := proto.Unmarshal(data, &env); err == nil {
		t.Fatalf("placeholder decoded as an Envelope: %v", &env)
	}
	for _, k := range payloadKinds {
		if err := proto.Unmarshal(data, k.sample.ProtoReflect().New().Interface()); err == nil {
			t.Errorf("placeholder decoded as %s", k.sample.ProtoReflect().Descriptor().FullName())
		}
	}
}

// canonicalEnvelope is the RFC-0001 canonical JSON form of an Envelope used by
// the spec's examples.
type canonicalEnvelope struct {
	MacpVersion string          `json:"macp_version"`
	Mode        string          `json:"mode"`
	MessageType string          `json:"message_type"`
	MessageID   string          `json:"message_id"`
	SessionID   string          `json:"session_id"`
	Sender      string          `json:"sender"`
	Timestamp   string          `json:"timestamp"`
	Payload     json.RawMessage `json:"payload"`
}

func loadExampleEnvelopes(t *testing.T) map[string][]canonicalEnvelope {
	t.Helper()
	dir := filepath.Join(macpDir, "examples")
	out := map[string][]canonicalEnvelope{}
	singles, _ := filepath.Glob(filepath.Join(dir, "json-*.json"))
	sessions, _ := filepath.Glob(filepath.Join(dir, "*-mode-session.json"))
	if len(singles) == 0 || len(sessions) == 0 {
		t.Fatalf("no example envelopes in %s", dir)
	}
	for _, f := range singles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var e canonicalEnvelope
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = []canonicalEnvelope{e}
	}
	for _, f := range sessions {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Messages []canonicalEnvelope `json:"messages"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = s.Messages
	}
	return out
}

// TestExampleEnvelopes encodes every envelope of the spec's JSON examples to
// binary and decodes it again, dispatching the payload by message_type. The
// payload JSON is parsed strictly, so a field name missing from the schema
// fails the test.
func TestExampleEnvelopes(t *testing.T) {
	seen := map[string]bool{}
	for file, envs := range loadExampleEnvelopes(t) {
		for i, ce := range envs {
			ts, err := time.Parse(time.RFC3339, ce.Timestamp)
			if err != nil {
				t.Fatalf("%s[%d]: timestamp: %v", file, i, err)
			}
			want, ok := newPayload(ce.Mode, ce.MessageType)
			if !ok {
				t.Fatalf("%s[%d]: no payload type for mode %q message_type %q", file, i, ce.Mode, ce.MessageType)
			}
			if err := protojson.Unmarshal(ce.Payload, want); err != nil {
				t.Fatalf("%s[%d]: %s payload: %v", file, i, ce.MessageType, err)
			}
			payload, err := proto.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			wire, err := proto.Marshal(&macpv1.Envelope{
				MacpVersion: ce.MacpVersion, Mode: ce.Mode, MessageType: ce.MessageType,
				MessageId: ce.MessageID, SessionId: ce.SessionID, Sender: ce.Sender,
				TimestampUnixMs: ts.UnixMilli(), Payload: payload,
			})
			if err != nil {
				t.Fatal(err)
			}

			var env macpv1.Envelope
			if err := proto.Unmarshal(wire, &env); err != nil {
				t.Fatalf("%s[%d]: %v", file, i, err)
			}
			if env.GetMacpVersion() != "1.0" || env.GetMessageType() != ce.MessageType || env.GetMode() != ce.Mode ||
				env.GetMessageId() != ce.MessageID || env.GetSessionId() != ce.SessionID ||
				env.GetSender() != ce.Sender || env.GetTimestampUnixMs() != ts.UnixMilli() {
				t.Fatalf("%s[%d]: envelope fields = %v", file, i, &env)
			}
			got, _ := newPayload(env.GetMode(), env.GetMessageType())
			if err := proto.Unmarshal(env.GetPayload(), got); err != nil {
				t.Fatalf("%s[%d]: payload: %v", file, i, err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("%s[%d]: payload = %v, want %v", file, i, got, want)
			}
			seen[ce.MessageType] = true

			// Spot checks on concrete example values.
			switch file {
			case "json-session_start.json":
				p := got.(*macpv1.SessionStartPayload)
				if p.GetTtlMs() != 900000 || len(p.GetParticipants()) != 3 ||
					p.GetContextId() != "ctx:procurement:ocr-pipeline-2026Q1" || env.GetTimestampUnixMs() != 1772396641000 {
					t.Errorf("session_start payload = %v", p)
				}
			case "json-signal.json":
				p := got.(*macpv1.SignalPayload)
				if env.GetMode() != "" || env.GetSessionId() != "" || p.GetSignalType() != "observation.latency" ||
					!bytes.Equal(p.GetData(), []byte{0, 1, 2, 3, 4}) || p.GetConfidence() != 0.92 {
					t.Errorf("signal = %v / %v", &env, p)
				}
			case "json-commitment.json":
				p := got.(*macpv1.CommitmentPayload)
				if !p.GetOutcomePositive() || p.GetAction() != "vendor.select" || p.GetAuthorityScope() != "procurement" {
					t.Errorf("commitment payload = %v", p)
				}
			case "json-session_cancel.json":
				p := got.(*macpv1.SessionCancelPayload)
				if p.GetCancelledBy() != "user://alice" {
					t.Errorf("session_cancel payload = %v", p)
				}
			}
		}
	}
	for _, mt := range []string{"SessionStart", "Commitment", "Signal", "SessionCancel", "TaskRequest",
		"HandoffOffer", "Proposal", "Vote", "CounterProposal", "ApprovalRequest"} {
		if !seen[mt] {
			t.Errorf("examples had no %s envelope", mt)
		}
	}
}

// TestPayloadKindsComplete checks that the table holds every *Payload message
// of the MACP packages and that every sample sets every field.
func TestPayloadKindsComplete(t *testing.T) {
	inTable := map[protoreflect.FullName]bool{}
	for _, k := range payloadKinds {
		md := k.sample.ProtoReflect().Descriptor()
		inTable[md.FullName()] = true
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			if fd := fields.Get(i); !k.sample.ProtoReflect().Has(fd) {
				t.Errorf("sample %s leaves %s unset", md.FullName(), fd.Name())
			}
		}
	}
	n := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), "macp.") || strings.HasSuffix(fd.Path(), "envelope.proto") {
			return true
		}
		msgs := fd.Messages()
		for i := 0; i < msgs.Len(); i++ {
			if name := msgs.Get(i).FullName(); strings.HasSuffix(string(name), "Payload") {
				n++
				if !inTable[name] {
					t.Errorf("%s missing from payloadKinds", name)
				}
			}
		}
		return true
	})
	if n != len(payloadKinds) {
		t.Errorf("registry has %d payload messages, table has %d", n, len(payloadKinds))
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	for _, k := range payloadKinds {
		t.Run(k.mode+"/"+k.messageType, func(t *testing.T) {
			b, err := proto.Marshal(k.sample)
			if err != nil {
				t.Fatal(err)
			}
			got := k.sample.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, k.sample) {
				t.Fatalf("got %v, want %v", got, k.sample)
			}

			// Through an Envelope, dispatched by message_type.
			wire, err := proto.Marshal(sampleEnvelope(k))
			if err != nil {
				t.Fatal(err)
			}
			var env macpv1.Envelope
			if err := proto.Unmarshal(wire, &env); err != nil {
				t.Fatal(err)
			}
			p, ok := newPayload(env.GetMode(), env.GetMessageType())
			if !ok {
				t.Fatalf("no payload type for %q/%q", env.GetMode(), env.GetMessageType())
			}
			if err := proto.Unmarshal(env.GetPayload(), p); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(p, k.sample) {
				t.Fatalf("dispatched payload %v, want %v", p, k.sample)
			}
		})
	}
}

// futureFields encodes fields a newer schema could add: a varint, a string and
// a nested message, at numbers no MACP message uses.
func futureFields() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1000, protowire.VarintType)
	b = protowire.AppendVarint(b, 42)
	b = protowire.AppendTag(b, 1001, protowire.BytesType)
	b = protowire.AppendString(b, "from a newer schema")
	nested := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	nested = protowire.AppendFixed64(nested, 7)
	b = protowire.AppendTag(b, 1002, protowire.BytesType)
	b = protowire.AppendBytes(b, nested)
	return b
}

// TestUnknownFieldsSurvive checks that fields unknown to these schemas are kept
// on decode and written back unchanged, so a proxy forwards what it received.
func TestUnknownFieldsSurvive(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	extra := futureFields()

	msgs := []proto.Message{sampleEnvelope(payloadKinds[0]), &macpv1.Ack{
		Ok: true, MessageId: "m", SessionState: macpv1.SessionState_SESSION_STATE_OPEN,
		Error: &macpv1.MACPError{Code: "POLICY_DENIED", Details: []byte(`{"reasons":[]}`)},
	}}
	for _, k := range payloadKinds {
		msgs = append(msgs, k.sample)
	}
	for _, m := range msgs {
		name := string(m.ProtoReflect().Descriptor().FullName())
		t.Run(name, func(t *testing.T) {
			b, err := det.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			in := append(b, extra...)
			got := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(in, got); err != nil {
				t.Fatal(err)
			}
			if u := got.ProtoReflect().GetUnknown(); !bytes.Equal(u, extra) {
				t.Fatalf("unknown fields = %x, want %x", u, extra)
			}
			out, err := det.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("re-encoded\n%x\nwant\n%x", out, in)
			}
		})
	}

	// Unknown fields nested inside a known message field survive too.
	env, err := det.Marshal(sampleEnvelope(payloadKinds[0]))
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, extra...)
	in := protowire.AppendTag(nil, 1, protowire.BytesType)
	in = protowire.AppendBytes(in, env)
	var req macpv1.SendRequest
	if err := proto.Unmarshal(in, &req); err != nil {
		t.Fatal(err)
	}
	if u := req.GetEnvelope().ProtoReflect().GetUnknown(); !bytes.Equal(u, extra) {
		t.Fatalf("nested unknown fields = %x", u)
	}
	out, err := det.Marshal(&req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatalf("SendRequest re-encoded\n%x\nwant\n%x", out, in)
	}
}

// checkRoundTrip decodes data into m. If that succeeds, re-encoding and
// decoding again must give an equal message.
func checkRoundTrip(t *testing.T, m proto.Message, data []byte) bool {
	t.Helper()
	if err := proto.Unmarshal(data, m); err != nil {
		return false
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("%s: re-encode of a decoded message failed: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	again := m.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, again); err != nil {
		t.Fatalf("%s: decode of re-encoded message failed: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	if !proto.Equal(m, again) {
		t.Fatalf("%s: round trip changed the message:\n%v\n%v", m.ProtoReflect().Descriptor().FullName(), m, again)
	}
	return true
}

func addSeeds(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join(macpDir, "examples", "envelope.bin")); err == nil {
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte(envelopeBinPlaceholder))
	f.Add(append([]byte(nil), futureFields()...))
	for _, k := range payloadKinds {
		env, err := proto.Marshal(sampleEnvelope(k))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(env)
		payload, err := proto.Marshal(k.sample)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(payload)
	}
}

func FuzzEnvelope(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var env macpv1.Envelope
		if !checkRoundTrip(t, &env, data) {
			return
		}
		if p, ok := newPayload(env.GetMode(), env.GetMessageType()); ok {
			checkRoundTrip(t, p, env.GetPayload())
		}
	})
}

// FuzzPayloads decodes each input as every payload type of the table.
func FuzzPayloads(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, k := range payloadKinds {
			checkRoundTrip(t, k.sample.ProtoReflect().New().Interface(), data)
		}
	})
}

package test

import (
	"maps"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// rawMsg is a message sent as the bytes it holds (rawCodec).
type rawMsg []byte

// rawCodec sends rawMsg bytes unchanged and decodes answers as protobuf:
// what no SDK sends.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(rawMsg); ok {
		return b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (rawCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }

// sendRaw sends a SendRequest's bytes as who and returns the Ack, or the
// call's error.
func (c macpClient) sendRaw(who string, b []byte) (*macpv1.Ack, error) {
	ctx, cancel := as(who)
	defer cancel()
	var resp macpv1.SendResponse
	err := c.conn.Invoke(ctx, macpService+"Send", rawMsg(b), &resp, grpc.ForceCodec(rawCodec{}))
	return resp.GetAck(), err
}

// twoReadings is a SendRequest whose envelope, after its fields, repeats
// sender (field 6) as a varint: protobuf-go keeps that as an unknown field
// and reads the rest; prost refuses the whole message.
func twoReadings(t *testing.T, env *macpv1.Envelope) []byte {
	t.Helper()
	b, err := proto.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendVarint(protowire.AppendTag(b, 6, protowire.VarintType), 1)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
}

// TestMACPTwoReadings (issue 24 item 2): an open task's TaskAccept by
// "other", its envelope repeating sender with the wrong wire type. The
// real runtime refuses it; every Warden door refuses it too, before any
// decision, so Warden's state does not move: the worker's genuine
// TaskAccept afterwards is allowed and accepted by the runtime. Before,
// ext_authz allowed the forged accept and committed "other" as the
// assignee, and the worker's accept was refused.
func TestMACPTwoReadings(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	task := func(sid string) (start, request, forged, accept *macpv1.Envelope) {
		mk := func(sender, typ, id string, p proto.Message) *macpv1.Envelope {
			env := envelope(sender, sid, typ, id+"-"+sid[:8], p)
			env.Mode = macp.ModeTask
			return env
		}
		return mk("planner", "SessionStart", "start", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker", "other"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}),
			mk("planner", "TaskRequest", "req", &taskv1.TaskRequestPayload{TaskId: "t1"}),
			mk("other", "TaskAccept", "forged", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "other"}),
			mk("worker", "TaskAccept", "acc", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"})
	}

	t.Run("runtime", func(t *testing.T) {
		start, request, forged, _ := task(newSession())
		direct.mustAccept(start)
		direct.mustAccept(request)
		ack, err := direct.sendRaw("other", twoReadings(t, forged))
		if err == nil && ack.GetOk() {
			t.Fatal("the runtime accepted the message with two readings: this test's premise is gone")
		}
		t.Logf("the runtime's answer: %v %v", err, ack.GetError())
	})
	eachTransport(t, func(t *testing.T) {
		c := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
		start, request, forged, accept := task(newSession())
		c.mustAccept(start)
		c.mustAccept(request)
		ack, err := c.sendRaw("other", twoReadings(t, forged))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("the message with two readings: %v %v, want INVALID_ARGUMENT", err, ack)
		}
		c.mustAccept(accept)
	})
	t.Run("extauthz", func(t *testing.T) {
		c, _ := startExtAuthz(t, "warden", runtime)
		start, request, forged, accept := task(newSession())
		for _, env := range []*macpv1.Envelope{start, request} {
			if got := envoy(t, c, direct, env); got != "allow" {
				t.Fatalf("%s: %s", env.GetMessageType(), got)
			}
		}
		if got := c.callRaw(macpService+"Send", "other", twoReadings(t, forged)); got != string(rules.CodeInvalidEnvelope) {
			t.Errorf("the message with two readings: %s, want INVALID_ENVELOPE", got)
		}
		if got := envoy(t, c, direct, accept); got != "allow" {
			t.Errorf("the worker's genuine TaskAccept: %s, want allow (Warden's state moved)", got)
		}
	})
}

// wireAnswer is a call's outcome as a client reads it: the status code and
// message (the session id replaced by ID), the macp-error-code, and a
// Send's Ack error.
type wireAnswer struct {
	Status          codes.Code
	Message, Code   string
	AckCode, AckMsg string
}

// outsiderProbes are the Send and control calls an outsider makes on a
// session (its id as given).
func outsiderProbes(c macpClient, who, sid string) map[string]wireAnswer {
	out := map[string]wireAnswer{}
	call := func(name, method string, req proto.Message, resp interface{ GetAck() *macpv1.Ack }) {
		ctx, cancel := as(who)
		defer cancel()
		var trailer metadata.MD
		err := c.conn.Invoke(ctx, macpService+method, req, resp, grpc.Trailer(&trailer))
		st := status.Convert(err)
		a := wireAnswer{Status: st.Code(), Message: strings.ReplaceAll(st.Message(), sid, "ID")}
		if v := trailer.Get("macp-error-code"); len(v) > 0 {
			a.Code = v[0]
		}
		if err == nil {
			a.AckCode, a.AckMsg = resp.GetAck().GetError().GetCode(), strings.ReplaceAll(resp.GetAck().GetError().GetMessage(), sid, "ID")
		}
		out[name] = a
	}
	send := func(name, typ, id string, p proto.Message) {
		env := envelope(who, sid, typ, id, p)
		call(name, "Send", &macpv1.SendRequest{Envelope: env}, &macpv1.SendResponse{})
	}
	send("TaskRequest", "TaskRequest", "probe-req", &taskv1.TaskRequestPayload{TaskId: "t9"})
	send("a used message id", "TaskRequest", "start-"+sid[:8], &taskv1.TaskRequestPayload{TaskId: "t9"})
	send("TaskAccept", "TaskAccept", "probe-acc", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: who})
	call("CancelSession", "CancelSession", &macpv1.CancelSessionRequest{SessionId: sid}, &macpv1.CancelSessionResponse{})
	call("SuspendSession", "SuspendSession", &macpv1.SuspendSessionRequest{SessionId: sid}, &macpv1.SuspendSessionResponse{})
	call("ResumeSession", "ResumeSession", &macpv1.ResumeSessionRequest{SessionId: sid}, &macpv1.ResumeSessionResponse{})
	return out
}

// TestMACPOutsiderAnswer (issue 24 item 11), against the real runtime: an
// outsider's Send and control calls on an existing session, open or
// suspended, are answered through Warden exactly as the runtime answers
// them for a session that does not exist (code, message, macp-error-code,
// the Ack's error). The runtime itself tells an outsider more (FORBIDDEN
// for an existing session), which is why Warden answers in its place.
func TestMACPOutsiderAnswer(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	want := outsiderProbes(direct, "mallory", newSession()) // the runtime, no such session
	for name, a := range want {
		if a.Code != string(rules.CodeSessionNotFound) && a.AckCode != string(rules.CodeSessionNotFound) {
			t.Fatalf("the runtime's answer to %s on no session: %+v", name, a)
		}
	}
	t.Logf("the runtime's answers for no session: %+v", want)
	eachTransport(t, func(t *testing.T) {
		c := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
		open, suspended := newSession(), newSession()
		for _, sid := range []string{open, suspended} {
			msgs := taskMessages(sid)
			c.mustAccept(msgs[0])
			c.mustAccept(msgs[1])
		}
		ctx, cancel := as("planner")
		defer cancel()
		if _, err := macpv1.NewMACPRuntimeServiceClient(c.conn).SuspendSession(ctx, &macpv1.SuspendSessionRequest{SessionId: suspended}); err != nil {
			t.Fatal(err)
		}
		for _, sid := range []string{open, suspended, newSession()} {
			got := outsiderProbes(c, "mallory", sid)
			for name, w := range want {
				if got[name] != w {
					t.Errorf("%s on session %s: %+v, want the runtime's answer for no session %+v", name, sid, got[name], w)
				}
			}
		}
	}) // ext_authz answers with a gRPC status only (Envoy cannot send an Ack):
	// a control call as the runtime answers it, a Send with the status of
	// the Ack's code; the outsider's answers on an existing session are the
	// ones for no session.
	t.Run("extauthz", func(t *testing.T) {
		c, _ := startExtAuthz(t, "warden", runtime)
		open := newSession()
		for _, env := range taskMessages(open)[:2] {
			if got := envoy(t, c, direct, env); got != "allow" {
				t.Fatalf("%s: %s", env.GetMessageType(), got)
			}
		}
		probes := func(sid string) map[string]wireAnswer {
			out := map[string]wireAnswer{}
			for name, req := range map[string]struct {
				method string
				msg    proto.Message
			}{
				"TaskRequest":       {"Send", &macpv1.SendRequest{Envelope: envelope("mallory", sid, "TaskRequest", "probe-req", &taskv1.TaskRequestPayload{TaskId: "t9"})}},
				"a used message id": {"Send", &macpv1.SendRequest{Envelope: envelope("mallory", sid, "TaskRequest", "start-"+sid[:8], &taskv1.TaskRequestPayload{TaskId: "t9"})}},
				"CancelSession":     {"CancelSession", &macpv1.CancelSessionRequest{SessionId: sid}},
				"SuspendSession":    {"SuspendSession", &macpv1.SuspendSessionRequest{SessionId: sid}},
				"ResumeSession":     {"ResumeSession", &macpv1.ResumeSessionRequest{SessionId: sid}},
			} {
				b, _ := proto.Marshal(req.msg)
				resp := c.check(macpService+req.method, "mallory", b)
				a := wireAnswer{Status: codes.Code(resp.GetStatus().GetCode()), Message: strings.ReplaceAll(resp.GetStatus().GetMessage(), sid, "ID")}
				for _, h := range resp.GetDeniedResponse().GetHeaders() {
					if h.GetHeader().GetKey() == "macp-error-code" {
						a.Code = h.GetHeader().GetValue()
					}
				}
				out[name] = a
			}
			return out
		}
		none := probes(newSession())
		for name, a := range none {
			w := want[name]
			if w.AckCode != "" { // a Send: the status of the runtime's Ack code
				w = wireAnswer{Status: codes.NotFound, Message: w.AckCode + ": " + w.AckMsg, Code: w.AckCode}
			}
			if a != w {
				t.Errorf("%s on no session: %+v, want %+v", name, a, w)
			}
		}
		if got := probes(open); !maps.Equal(got, none) {
			t.Errorf("an outsider on an existing session: %+v\nwant the answers for no session %+v", got, none)
		}
	})
}

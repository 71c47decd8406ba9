package macp

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// FuzzSend feeds arbitrary SendRequest and StreamSessionRequest bytes through
// the decoding the adapter does and the Enforcer: nothing may panic, every
// envelope gets a decision, and no error appears (dev authentication and no
// upstream leave nothing undecidable).
func FuzzSend(f *testing.F) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		f.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		f.Fatal(err)
	}
	core, err := proxy.New(proxy.Config{Sessions: 64}, proxy.Options{Authenticator: a, Policies: engine})
	if err != nil {
		f.Fatal(err)
	}
	enf, err := sessions.New(core, sessions.Options{})
	if err != nil {
		f.Fatal(err)
	}
	sid := "6b1f0c9e-2d4a-4f6b-9c1e-3a5d7e9f1b2c"
	start, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"p", "w"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60000})
	d, err := enf.Enforce(ctx, sessions.Request{Credentials: authn.Credentials{Bearer: "p"}, Envelope: &macpv1.Envelope{
		MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "SessionStart", MessageId: "s", SessionId: sid, Sender: "p", Payload: start}})
	if err != nil || !d.Allow {
		f.Fatalf("%v %+v", err, d)
	}
	d.Settle(true)
	req, _ := proto.Marshal(&taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: "w"})
	for _, env := range []*macpv1.Envelope{
		{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "TaskRequest", MessageId: "r", SessionId: sid, Sender: "p", Payload: req},
		{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "TaskAccept", MessageId: "a", SessionId: sid, Sender: "w"},
	} {
		b, _ := proto.Marshal(&macpv1.SendRequest{Envelope: env})
		f.Add(b, "p")
		b, _ = proto.Marshal(&macpv1.StreamSessionRequest{Envelope: env})
		f.Add(b, "w")
	}
	f.Add([]byte{0x0a, 0xff}, "w")
	f.Fuzz(func(t *testing.T, b []byte, who string) {
		var sr macpv1.SendRequest
		var st macpv1.StreamSessionRequest
		envs := []*macpv1.Envelope{}
		if proto.Unmarshal(b, &sr) == nil && sr.GetEnvelope() != nil {
			envs = append(envs, sr.GetEnvelope())
		}
		if proto.Unmarshal(b, &st) == nil && st.GetEnvelope() != nil {
			envs = append(envs, st.GetEnvelope())
		}
		for _, env := range envs {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			d, err := enf.Enforce(ctx, sessions.Request{Credentials: authn.Credentials{Bearer: who}, Envelope: env})
			cancel()
			if err != nil {
				t.Fatalf("could not decide %v: %v", env, err)
			}
			if !d.Allow && d.Code == "" {
				t.Fatalf("a refusal without a code: %+v", d)
			}
			_ = admission.Refused(d, sessions.Request{Envelope: env}).Ack(env)
			d.Settle(false)
		}
	})
}

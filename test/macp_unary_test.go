package test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// unaryOutcome is a unary call's outcome as a client reads it: status,
// message and macp-error-code, with the session ids of the script replaced
// by their names, and what the answer showed (sessions listed, a token's
// presence, a control call's Ack, a registration's ok).
func unaryOutcome(err error, trailer metadata.MD, shown string, ids map[string]string) string {
	st := status.Convert(err)
	out := fmt.Sprintf("%s %q macp=%v %s", st.Code(), st.Message(), trailer.Get("macp-error-code"), shown)
	for id, name := range ids {
		out = strings.ReplaceAll(out, id, name)
	}
	return decisionID.ReplaceAllString(out, "warden decision ID")
}

// decisionID is the part of an answer that differs per decision.
var decisionID = regexp.MustCompile(`warden decision [0-9A-Za-z-]+`)

// unaryScript makes every unary call the sidecar answers itself besides
// Send (control calls, GetSession, ListSessions, the policy registrations)
// through c, against the real runtime behind it, as participants, as an
// outsider and without credentials, and returns each call's outcome by
// name.
func unaryScript(t *testing.T, c macpClient) map[string]string {
	t.Helper()
	rt := macpv1.NewMACPRuntimeServiceClient(c.conn)
	open, other := newSession(), newSession()
	ids := map[string]string{open: "OPEN", other: "OTHER"}
	for _, sid := range []string{open, other} {
		msgs := taskMessages(sid)
		c.mustAccept(msgs[0])
		c.mustAccept(msgs[1])
	}
	out := map[string]string{}
	call := func(name, who string, do func(ctx context.Context, opts ...grpc.CallOption) (string, error)) {
		ctx, cancel := as(who)
		defer cancel()
		if who == "" {
			ctx = context.Background()
		}
		var trailer metadata.MD
		shown, err := do(ctx, grpc.Trailer(&trailer))
		out[name] = unaryOutcome(err, trailer, shown, ids)
	}
	get := func(sid string) func(context.Context, ...grpc.CallOption) (string, error) {
		return func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
			r, err := rt.GetSession(ctx, &macpv1.GetSessionRequest{SessionId: sid}, opts...)
			return r.GetMetadata().GetSessionId() + " " + r.GetMetadata().GetInitiator(), err
		}
	}
	list := func(size int32, token string) func(context.Context, ...grpc.CallOption) (string, error) {
		return func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
			r, err := rt.ListSessions(ctx, &macpv1.ListSessionsRequest{PageSize: size, PageToken: token}, opts...)
			var listed []string
			for _, m := range r.GetSessions() {
				listed = append(listed, m.GetSessionId())
			}
			return fmt.Sprintf("%v token=%v", listed, r.GetNextPageToken() != ""), err
		}
	}
	call("GetSession, participant", "worker", get(open))
	call("GetSession, outsider", "mallory", get(open))
	none := newSession()
	ids[none] = "OPEN" // the same words as for the session that exists
	call("GetSession, outsider, no such session", "mallory", get(none))
	delete(ids, none)
	call("GetSession, unauthenticated", "", get(open))
	call("ListSessions, outsider", "mallory", list(0, ""))
	call("ListSessions, unauthenticated", "", list(0, ""))
	call("ListSessions, a token Warden did not issue", "planner", list(1, "djE6MDAwMDAwMDAtMDAwMC00MDAwLTgwMDAtMDAwMDAwMDAwMDAw"))
	call("ListSessions, garbage token", "planner", list(1, "garbage"))
	call("ListSessions, negative page size", "planner", list(-1, ""))
	// the planner's sessions, one a page: the two of this script (a fresh
	// runtime holds no other), then the end
	ctx, cancel := as("planner")
	defer cancel()
	var walked []string
	token := ""
	for range 4 {
		r, err := rt.ListSessions(ctx, &macpv1.ListSessionsRequest{PageSize: 1, PageToken: token})
		if err != nil {
			t.Fatalf("ListSessions as planner: %v", err)
		}
		for _, m := range r.GetSessions() {
			walked = append(walked, ids[m.GetSessionId()])
		}
		if token = r.GetNextPageToken(); token == "" {
			break
		}
		if len(walked) == 1 {
			call("ListSessions, the planner's token presented by mallory", "mallory", list(1, token))
		}
	}
	slices.Sort(walked)
	out["ListSessions, the planner walks its sessions"] = fmt.Sprint(walked)
	control := func(method string) func(sid string) func(context.Context, ...grpc.CallOption) (string, error) {
		return func(sid string) func(context.Context, ...grpc.CallOption) (string, error) {
			return func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
				var resp macpv1.CancelSessionResponse // the three responses are {ack}
				err := c.conn.Invoke(ctx, macpService+method, &macpv1.CancelSessionRequest{SessionId: sid, Reason: "test"}, &resp, opts...)
				return fmt.Sprintf("ack ok=%v", resp.GetAck().GetOk()), err
			}
		}
	}
	suspend, resume, cancelS := control("SuspendSession"), control("ResumeSession"), control("CancelSession")
	call("SuspendSession, outsider", "mallory", suspend(open))
	call("SuspendSession, unauthenticated", "", suspend(open))
	call("SuspendSession, initiator", "planner", suspend(open))
	call("ResumeSession, initiator", "planner", resume(open))
	call("CancelSession, no session id", "planner", cancelS(""))
	call("CancelSession, initiator", "planner", cancelS(other))
	call("CancelSession, initiator, again", "planner", cancelS(other))
	call("GetSession, participant, cancelled", "planner", func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
		r, err := rt.GetSession(ctx, &macpv1.GetSessionRequest{SessionId: other}, opts...)
		return r.GetMetadata().GetState().String(), err
	})
	policy := "policy.unary." + open[:8]
	register := func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
		r, err := rt.RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{
			PolicyId: policy, Mode: taskMode, Description: "test", Rules: `{"commitment":{"authority":"initiator_only"}}`, SchemaVersion: 1}}, opts...)
		return fmt.Sprintf("ok=%v %s", r.GetOk(), strings.ReplaceAll(r.GetError(), policy, "POLICY")), err
	}
	unregister := func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
		r, err := rt.UnregisterPolicy(ctx, &macpv1.UnregisterPolicyRequest{PolicyId: policy}, opts...)
		return fmt.Sprintf("ok=%v %s", r.GetOk(), strings.ReplaceAll(r.GetError(), policy, "POLICY")), err
	}
	call("RegisterPolicy, unauthenticated", "", register)
	call("RegisterPolicy", "planner", register)
	call("RegisterPolicy, again", "planner", register)
	// the runtime's other unary calls, forwarded after authentication
	call("GetPolicy", "worker", func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
		r, err := rt.GetPolicy(ctx, &macpv1.GetPolicyRequest{PolicyId: policy}, opts...)
		return strings.ReplaceAll(r.GetPolicyDescriptor().GetPolicyId(), policy, "POLICY") + " " + r.GetPolicyDescriptor().GetRules(), err
	})
	call("ListModes", "worker", func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
		r, err := rt.ListModes(ctx, &macpv1.ListModesRequest{}, opts...)
		return fmt.Sprint(len(r.GetModes())), err
	})
	call("ListModes, unauthenticated", "", func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
		_, err := rt.ListModes(ctx, &macpv1.ListModesRequest{}, opts...)
		return "", err
	})
	call("GetManifest", "worker", func(ctx context.Context, opts ...grpc.CallOption) (string, error) {
		r, err := rt.GetManifest(ctx, &macpv1.GetManifestRequest{}, opts...)
		return r.GetManifest().GetAgentId(), err
	})
	call("UnregisterPolicy", "planner", unregister)
	call("UnregisterPolicy, again", "planner", unregister)
	return out
}

// TestMACPUnaryCallsOnBothDoors (issue 28 item 1): every unary call besides
// Send, made through `--transport grpc` and `--transport relay` in front
// of the real runtime, is answered the same: the participant's reads and
// control calls as the runtime answers them, the outsider's GetSession as
// the runtime answers one for a session that does not exist (before, the
// runtime's macp-error-code came through beside Warden's "session not
// found": FORBIDDEN for an existing session), ListSessions with the caller's sessions
// only and tokens that open for nobody else, the refusals of unauthenticated
// calls and of tokens Warden did not issue. The relay answers them itself
// now (proxy/macp TestDoorSource shows it); the grpc-go door is the oracle.
func TestMACPUnaryCallsOnBothDoors(t *testing.T) {
	got := map[string]map[string]string{}
	// the runtime's own answer to a GetSession of a session it does not
	// hold: an outsider gets it for every session
	direct := startRuntime(t)
	none := newSession()
	ctx, cancel := as("mallory")
	defer cancel()
	var trailer metadata.MD
	_, err := macpv1.NewMACPRuntimeServiceClient(dialMACP(t, direct).conn).GetSession(ctx, &macpv1.GetSessionRequest{SessionId: none}, grpc.Trailer(&trailer))
	noSession := unaryOutcome(err, trailer, " ", map[string]string{none: "OPEN"})
	eachTransport(t, func(t *testing.T) {
		runtime := startRuntime(t)
		logFile := filepath.Join(t.TempDir(), "decisions.log")
		c := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth", "--decision-log", logFile))
		got[wardenTransport] = unaryScript(t, c)
		// every decision on these calls names the client's address: the
		// door that decided them saw the client's connection (before, the
		// relay handed them to the grpc-go server in process, which has no
		// client address)
		paths := []string{"GetSession", "ListSessions", "SuspendSession", "ResumeSession", "CancelSession", "RegisterPolicy", "ListModes"}
		seen := map[string]bool{}
		deadline := time.Now().Add(5 * time.Second)
		for len(seen) < len(paths) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			b, _ := os.ReadFile(logFile)
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var r struct {
					Input struct {
						ClientAddr  string `json:"client_addr"`
						RequestPath string `json:"request_path"`
					} `json:"input"`
				}
				if json.Unmarshal([]byte(line), &r) != nil {
					continue
				}
				op, ok := strings.CutPrefix(r.Input.RequestPath, macpService)
				if !ok || !slices.Contains(paths, op) || seen[op] {
					continue
				}
				seen[op] = true
				if !strings.HasPrefix(r.Input.ClientAddr, "127.0.0.1:") {
					t.Errorf("a decision on %s names client %q, want the client's address", op, r.Input.ClientAddr)
				}
			}
		}
		if len(seen) < len(paths) {
			t.Errorf("decisions recorded on %v, want on each of %v", seen, paths)
		}
	})
	g, r := got["grpc"], got["relay"]
	if len(g) == 0 || len(r) == 0 {
		t.Fatal("a door's script did not run")
	}
	for _, name := range slices.Sorted(maps.Keys(g)) {
		t.Logf("%-55s %s", name, g[name])
		if g[name] != r[name] {
			t.Errorf("%s:\n grpc  %s\n relay %s", name, g[name], r[name])
		}
	}
	for name, want := range map[string]string{
		"GetSession, participant":                                codes.OK.String(),
		"GetSession, outsider":                                   noSession,
		"GetSession, outsider, no such session":                  noSession,
		"GetSession, unauthenticated":                            codes.Unauthenticated.String(),
		"ListSessions, outsider":                                 codes.OK.String() + ` "" macp=[] [] token=false`,
		"ListSessions, unauthenticated":                          codes.Unauthenticated.String(),
		"ListSessions, a token Warden did not issue":             codes.InvalidArgument.String(),
		"ListSessions, garbage token":                            codes.InvalidArgument.String(),
		"ListSessions, the planner's token presented by mallory": codes.InvalidArgument.String(),
		"ListSessions, the planner walks its sessions":           "[OPEN OTHER]",
		"SuspendSession, outsider":                               codes.NotFound.String(),
		"SuspendSession, initiator":                              codes.OK.String(),
		"CancelSession, initiator":                               codes.OK.String(),
		"RegisterPolicy":                                         codes.OK.String() + ` "" macp=[] ok=true `,
		"GetPolicy":                                              codes.OK.String() + ` "" macp=[] POLICY {"commitment"`,
		"ListModes, unauthenticated":                             codes.Unauthenticated.String(),
		"UnregisterPolicy":                                       codes.OK.String() + ` "" macp=[] ok=true `,
	} {
		if !strings.HasPrefix(g[name], want) || want == noSession && g[name] != want {
			t.Errorf("%s: %s, want %s", name, g[name], want)
		}
	}
}

package test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// macpClient talks to a runtime or to Warden with the generated Go client,
// so that a test can send what no SDK sends (other paths, reused ids,
// post-dated timestamps, several credentials).
type macpClient struct {
	t    *testing.T
	conn *grpc.ClientConn
}

func dialMACP(t *testing.T, addr string) macpClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return macpClient{t: t, conn: conn}
}

// as is a context carrying a dev-mode bearer for who.
func as(who string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+who), cancel
}

// newSession returns a fresh session id (a UUIDv4, as the runtime wants).
func newSession() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var idSeq int

func envelope(sender, session, typ, id string, payload proto.Message) *macpv1.Envelope {
	if id == "" {
		idSeq++
		id = "m-" + time.Now().Format("150405.000000") + "-" + string(rune('a'+idSeq%26))
	}
	mode := taskMode
	if session == "" {
		mode = ""
	}
	var b []byte
	if payload != nil {
		var err error
		if b, err = proto.Marshal(payload); err != nil {
			panic(err)
		}
	}
	return &macpv1.Envelope{MacpVersion: "1.0", Mode: mode, MessageType: typ, MessageId: id, SessionId: session,
		Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: b}
}

// send sends env as sender on path (Send by default) and returns the Ack, or
// the call's error.
func (c macpClient) sendOn(path string, env *macpv1.Envelope) (*macpv1.Ack, error) {
	ctx, cancel := as(env.GetSender())
	defer cancel()
	var resp macpv1.SendResponse
	err := c.conn.Invoke(ctx, path, &macpv1.SendRequest{Envelope: env}, &resp)
	return resp.GetAck(), err
}

func (c macpClient) send(env *macpv1.Envelope) *macpv1.Ack {
	c.t.Helper()
	ack, err := c.sendOn("/macp.v1.MACPRuntimeService/Send", env)
	if err != nil {
		c.t.Fatalf("Send %s as %s: %v", env.GetMessageType(), env.GetSender(), err)
	}
	return ack
}

func (c macpClient) mustAccept(env *macpv1.Envelope) {
	c.t.Helper()
	if ack := c.send(env); !ack.GetOk() {
		c.t.Fatalf("honest %s from %s refused: %s %s", env.GetMessageType(), env.GetSender(), ack.GetError().GetCode(), ack.GetError().GetMessage())
	}
}

func (c macpClient) session(who, id string) (*macpv1.SessionMetadata, error) {
	ctx, cancel := as(who)
	defer cancel()
	resp, err := macpv1.NewMACPRuntimeServiceClient(c.conn).GetSession(ctx, &macpv1.GetSessionRequest{SessionId: id})
	return resp.GetMetadata(), err
}

// failedTask brings a fresh task session to the point where the worker
// reported TaskFail: a positive Commitment is now a forgery (Warden's
// polarity rule; the runtime alone accepts it).
func failedTask(c macpClient) string {
	s := newSession()
	c.mustAccept(envelope("planner", s, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker", "reviewer"},
		ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000}))
	c.mustAccept(envelope("planner", s, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "x", RequestedAssignee: "worker"}))
	c.mustAccept(envelope("worker", s, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}))
	c.mustAccept(envelope("worker", s, "TaskFail", "", &taskv1.TaskFailPayload{TaskId: "t1", Assignee: "worker", ErrorCode: "E", Reason: "broke"}))
	return s
}

func positiveCommitment(s, id string) *macpv1.Envelope {
	return envelope("planner", s, "Commitment", id, &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "task.completed", AuthorityScope: "t",
		Reason: "forged", ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", OutcomePositive: true})
}

// TestMACPSideEntrances is the MACP half of the attack catalogue of issue
// 17: each side entrance is shown working against the real runtime alone
// and refused through Warden, while honest traffic passes.
func TestMACPSideEntrances(t *testing.T) { eachTransport(t, testMACPSideEntrances) }

func testMACPSideEntrances(t *testing.T) {
	runtime := startRuntime(t)
	direct, warden := dialMACP(t, runtime), dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
	const send = "/macp.v1.MACPRuntimeService/Send"

	t.Run("1 query or fragment on the method path", func(t *testing.T) {
		for _, suffix := range []string{"?x=1", "#frag", "?", "/"} {
			s := failedTask(direct)
			ack, err := direct.sendOn(send+suffix, positiveCommitment(s, ""))
			t.Logf("runtime alone, Send%s positive Commitment after TaskFail: ok=%v err=%v", suffix, ack.GetOk(), err)
			s = failedTask(warden)
			ack, err = warden.sendOn(send+suffix, positiveCommitment(s, ""))
			if status.Code(err) != codes.Unimplemented || ack.GetOk() {
				t.Errorf("through Warden, Send%s: ok=%v err=%v, want UNIMPLEMENTED", suffix, ack.GetOk(), err)
			}
		}
		ctx, cancel := as("outsider")
		defer cancel()
		var out macpv1.ListSessionsResponse
		err := warden.conn.Invoke(ctx, "/macp.v1.MACPRuntimeService/ListSessions?x=1", &macpv1.ListSessionsRequest{}, &out)
		if status.Code(err) != codes.Unimplemented || len(out.GetSessions()) != 0 {
			t.Errorf("ListSessions?x=1 through Warden: %d sessions, err=%v; want UNIMPLEMENTED", len(out.GetSessions()), err)
		}
	})

	t.Run("2 reused message_id", func(t *testing.T) {
		for name, c := range map[string]macpClient{"runtime alone": direct, "through Warden": warden} {
			s := failedTask(c)
			progress := envelope("planner", s, "Progress", "reused-1", &macpv1.ProgressPayload{Message: "working"})
			c.mustAccept(progress)
			ack := c.send(positiveCommitment(s, "reused-1"))
			meta, _ := direct.session("planner", s)
			t.Logf("%s: positive Commitment reusing a Progress id: ok=%v duplicate=%v %s; session %v", name, ack.GetOk(), ack.GetDuplicate(), ack.GetError().GetCode(), meta.GetState())
			if name == "through Warden" {
				// The runtime records no Progress id, so the Commitment is
				// new to it, and Warden decides it as new (never as a
				// duplicate it would leave to the runtime): refused by the
				// task's rules.
				if ack.GetOk() || ack.GetError().GetCode() != "POLICY_DENIED" {
					t.Errorf("through Warden: ok=%v %s, want POLICY_DENIED", ack.GetOk(), ack.GetError().GetCode())
				}
				if meta.GetState() == macpv1.SessionState_SESSION_STATE_RESOLVED {
					t.Errorf("the runtime resolved the session through Warden")
				}
				// The exact retransmission is relayed again, as the runtime does.
				if ack := c.send(progress); !ack.GetOk() {
					t.Errorf("exact retransmission refused: %s", ack.GetError().GetCode())
				}
			}
		}
	})

	t.Run("5 Progress on a stream does not freeze the session", func(t *testing.T) {
		s := newSession()
		warden.mustAccept(envelope("planner", s, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker"},
			ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000}))
		ctx, cancel := as("planner")
		defer cancel()
		st, err := macpv1.NewMACPRuntimeServiceClient(warden.conn).StreamSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&macpv1.StreamSessionRequest{Envelope: envelope("planner", s, "Progress", "", &macpv1.ProgressPayload{Message: "hi"})}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		began := time.Now()
		warden.mustAccept(envelope("planner", s, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "x", RequestedAssignee: "worker"}))
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("a Send after a streamed Progress took %v", took)
		}
		_ = st.CloseSend()
	})

	t.Run("6 post-dated timestamps", func(t *testing.T) {
		s := newSession()
		start := envelope("planner", s, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker"},
			ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000})
		start.TimestampUnixMs += time.Hour.Milliseconds()
		if ack := warden.send(start); ack.GetOk() || ack.GetError().GetCode() != "INVALID_ENVELOPE" {
			t.Errorf("SessionStart an hour ahead: ok=%v %s, want INVALID_ENVELOPE", ack.GetOk(), ack.GetError().GetCode())
		}
		start.TimestampUnixMs = time.Now().UnixMilli()
		warden.mustAccept(start)
		req := envelope("planner", s, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "x", RequestedAssignee: "worker"})
		req.TimestampUnixMs += 30 * 24 * time.Hour.Milliseconds()
		if ack := warden.send(req); ack.GetOk() {
			t.Errorf("TaskRequest 30 days ahead accepted")
		}
	})

	t.Run("7 leaks", func(t *testing.T) {
		s := newSession()
		warden.mustAccept(envelope("planner", s, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker"},
			ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000}))
		_, errExisting := warden.session("outsider", s)
		unknown := newSession()
		_, errUnknown := warden.session("outsider", unknown)
		_, directErr := direct.session("outsider", s)
		t.Logf("GetSession by an outsider: runtime alone %v; through Warden existing %v, unknown %v", status.Code(directErr), errExisting, errUnknown)
		// the answers are the same but for the session id they name
		if status.Code(errExisting) != status.Code(errUnknown) || strings.ReplaceAll(status.Convert(errExisting).Message(), s, "ID") != strings.ReplaceAll(status.Convert(errUnknown).Message(), unknown, "ID") {
			t.Errorf("an outsider tells an existing session (%v) from an unknown one (%v)", errExisting, errUnknown)
		}

		// WatchSignals: the outsider sees no Progress of the session.
		ctx, cancel := as("outsider")
		defer cancel()
		w, err := macpv1.NewMACPRuntimeServiceClient(warden.conn).WatchSignals(ctx, &macpv1.WatchSignalsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		pctx, pcancel := as("worker")
		defer pcancel()
		pw, err := macpv1.NewMACPRuntimeServiceClient(warden.conn).WatchSignals(pctx, &macpv1.WatchSignalsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		// Both watches are open at the runtime once their headers came
		// (before, a fixed 300 ms, which a loaded machine can outlast: the
		// participant then misses the Progress).
		for _, w := range []macpv1.MACPRuntimeService_WatchSignalsClient{w, pw} {
			if _, err := w.Header(); err != nil {
				t.Fatal(err)
			}
		}
		warden.mustAccept(envelope("planner", s, "Progress", "", &macpv1.ProgressPayload{Message: "secret progress"}))
		warden.mustAccept(envelope("planner", "", "Signal", "", &macpv1.SignalPayload{SignalType: "ping"}))
		got := func(w macpv1.MACPRuntimeService_WatchSignalsClient) []string {
			var types []string
			for range 2 {
				ch := make(chan *macpv1.WatchSignalsResponse, 1)
				go func() { ev, _ := w.Recv(); ch <- ev }()
				select {
				case ev := <-ch:
					if ev != nil {
						types = append(types, ev.GetEnvelope().GetMessageType())
					}
				case <-time.After(2 * time.Second):
				}
			}
			return types
		}
		outsider, participant := got(w), got(pw)
		t.Logf("WatchSignals through Warden: the outsider sees %v, a participant %v", outsider, participant)
		if strings.Contains(strings.Join(outsider, ","), "Progress") {
			t.Errorf("an outsider watching signals saw the session's Progress")
		}
		if !strings.Contains(strings.Join(participant, ","), "Progress") {
			t.Errorf("a participant watching signals did not see the session's Progress: %v", participant)
		}
	})

	t.Run("8 ambient Progress passes", func(t *testing.T) {
		p := envelope("planner", "", "Progress", "", &macpv1.ProgressPayload{Message: "ambient"})
		d := direct.send(p)
		p.MessageId += "-w"
		w := warden.send(p)
		if d.GetOk() != w.GetOk() || !w.GetOk() {
			t.Errorf("ambient Progress: runtime alone ok=%v, through Warden ok=%v %s", d.GetOk(), w.GetOk(), w.GetError().GetMessage())
		}
	})

	t.Run("gRPC health passes through", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, derr := healthpb.NewHealthClient(direct.conn).Check(ctx, &healthpb.HealthCheckRequest{})
		w, werr := healthpb.NewHealthClient(warden.conn).Check(ctx, &healthpb.HealthCheckRequest{})
		t.Logf("Health/Check: runtime alone %v %v, through Warden %v %v", d.GetStatus(), derr, w.GetStatus(), werr)
		if status.Code(werr) != status.Code(derr) || w.GetStatus() != d.GetStatus() {
			t.Errorf("Health/Check differs through Warden: %v %v vs %v %v", w.GetStatus(), werr, d.GetStatus(), derr)
		}
	})
}

// TestMACPStreamCredentialRevoked: a StreamSession and a WatchSessions
// opened with a static token stop acting once the token is removed and
// Warden reloaded: both end UNAUTHENTICATED, on both doors.
func TestMACPStreamCredentialRevoked(t *testing.T) { eachTransport(t, testMACPStreamCredentialRevoked) }

func testMACPStreamCredentialRevoked(t *testing.T) {
	dir := t.TempDir()
	tokens := dir + "/tokens.json"
	write := func(s string) {
		if err := os.WriteFile(tokens, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"token":"tok-planner","sender":"planner","can_start_sessions":true},{"token":"tok-worker","sender":"worker"}]`)
	runtime := startRuntime(t, "MACP_AUTH_TOKENS_FILE="+tokens)
	addr, proc := startWardenProcess(t, runtime, "--auth", "static", "--static-tokens", tokens)
	w := dialMACP(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSession()
	start := envelope("planner", s, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000})
	var resp macpv1.SendResponse
	if err := w.conn.Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-planner"), "/macp.v1.MACPRuntimeService/Send", &macpv1.SendRequest{Envelope: start}, &resp); err != nil || !resp.GetAck().GetOk() {
		t.Fatalf("SessionStart: %v %v", err, resp.GetAck().GetError())
	}
	st, err := macpv1.NewMACPRuntimeServiceClient(w.conn).StreamSession(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-worker"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: s}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("the subscription's replay: %v", err)
	}
	watch, err := macpv1.NewMACPRuntimeServiceClient(w.conn).WatchSessions(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-worker"), &macpv1.WatchSessionsRequest{})
	if err == nil {
		_, err = watch.Header()
	}
	if err != nil {
		t.Fatalf("WatchSessions: %v", err)
	}
	watched := make(chan error, 1)
	go func() {
		for {
			if _, err := watch.Recv(); err != nil {
				watched <- err
				return
			}
		}
	}()
	write(`[{"token":"tok-planner","sender":"planner","can_start_sessions":true}]`)
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Within a couple of check intervals the stream ends, unauthenticated.
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if errors.Is(err, io.EOF) || status.Code(err) != codes.Unauthenticated {
			t.Errorf("the stream ended with %v, want Unauthenticated", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the stream of a revoked token is still open 10 s after the reload")
	}
	select {
	case err := <-watched:
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("the watch ended with %v, want Unauthenticated", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the watch of a revoked token is still open 10 s after the reload")
	}
}

// TestMACPUpstreamDown: with the runtime gone, a client is told the runtime
// is unavailable, without Warden's internal address or error text.
func TestMACPUpstreamDown(t *testing.T) { eachTransport(t, testMACPUpstreamDown) }

func testMACPUpstreamDown(t *testing.T) {
	addr := freeAddr(t)
	rt := start(t, "macp-runtime", addr, []string{"MACP_BIND_ADDR=" + addr, "MACP_MEMORY_ONLY=1", "MACP_ALLOW_INSECURE=1", "RUST_LOG=warn"}, peer(t, ".peers/cargo/bin/macp-runtime"))
	adminAddr := freeAddr(t)
	w := dialMACP(t, startWarden(t, addr, "--auth", "dev", "--insecure-dev-auth", "--admin-listen", adminAddr))
	rt.stop()
	s := newSession()
	_, err := w.sendOn("/macp.v1.MACPRuntimeService/Send", envelope("planner", s, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t",
		Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000}))
	t.Logf("Send with the runtime down: %v", err)
	if status.Code(err) != codes.Unavailable || strings.Contains(status.Convert(err).Message(), "127.0.0.1") || strings.Contains(status.Convert(err).Message(), "dial") {
		t.Errorf("got %v, want UNAVAILABLE without the upstream's address", err)
	}
	if body, _ := httpGet(t, "http://"+adminAddr+"/metrics"); !strings.Contains(body, `warden_upstream_errors_total{protocol="macp"}`) {
		t.Errorf("the failed upstream call is not counted:\n%.1500s", body)
	}
}

// TestDecisionLog: with --decision-log, every decision, allowed and refused,
// is one OPA-shaped JSON record.
func TestDecisionLog(t *testing.T) { eachTransport(t, testDecisionLog) }

func testDecisionLog(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "decisions.log")
	runtime := startRuntime(t)
	w := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth", "--decision-log", logFile))
	s := failedTask(w)                       // four allowed messages
	ack := w.send(positiveCommitment(s, "")) // refused: polarity
	if ack.GetOk() {
		t.Fatal("the forged commitment was accepted")
	}
	// Front-door refusals are decisions too: an unknown method, a call
	// without credentials.
	if _, err := w.sendOn("/macp.v1.MACPRuntimeService/Send?x=1", positiveCommitment(s, "")); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Send?x=1: %v", err)
	}
	var list macpv1.ListSessionsResponse
	if err := w.conn.Invoke(context.Background(), "/macp.v1.MACPRuntimeService/ListSessions", &macpv1.ListSessionsRequest{}, &list); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListSessions without credentials: %v", err)
	}
	type record struct {
		DecisionID string `json:"decision_id"`
		Path       string `json:"path"`
		Input      struct {
			Principal string `json:"principal"`
			Type      string `json:"type"`
		} `json:"input"`
		Result struct {
			Allow  bool   `json:"allow"`
			Code   string `json:"code"`
			Reason string `json:"reason"`
		} `json:"result"`
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		var recs []record
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r record
			if json.Unmarshal([]byte(line), &r) == nil && r.DecisionID != "" {
				recs = append(recs, r)
			}
		}
		allowed, refused, frontDoor := 0, 0, 0
		for _, r := range recs {
			if r.Path != "warden/macp" {
				t.Fatalf("record path %q", r.Path)
			}
			switch {
			case r.Result.Allow:
				allowed++
			case r.Result.Code == "POLICY_DENIED":
				refused++
			case r.Result.Reason == "unknown_method" || r.Result.Reason == "unauthenticated":
				frontDoor++
			}
		}
		if allowed >= 4 && refused == 1 && frontDoor == 2 {
			t.Logf("%d records: %d allowed, %d refused", len(recs), allowed, refused)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("decision log after 5 s: %d allowed, %d refused, %d at the front door:\n%s", allowed, refused, frontDoor, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

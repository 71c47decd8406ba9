package audit

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// The MACP attack set, over gRPC (macp.v1.MACPRuntimeService) with the
// generated client. Each attack starts sessions of its own (fresh UUIDv4
// ids) and brings them, with honest messages, to the state it needs; then
// one principal sends what it may not. Roles come from the principals:
// Principals[0] and [1] always, Principals[2] where an attack needs a third
// party (an assignee or a handoff target); with fewer, the attack is
// skipped with the reason, as it is when an honest setup message is refused
// (a mode the runtime does not offer, an agent the runtime does not let
// start sessions).

const (
	macpSend     = "/macp.v1.MACPRuntimeService/Send"
	macpList     = "/macp.v1.MACPRuntimeService/ListSessions"
	macpTask     = "macp.mode.task.v1"
	macpHandoff  = "macp.mode.handoff.v1"
	macpPageMax  = 5 // ListSessions pages read at most
	macpCallTime = 10 * time.Second
)

// macpAttacks is the MACP attack set, in the order of the docs' table.
func macpAttacks() []Attack {
	return []Attack{
		macpAttack("macp-task-complete-not-assignee", "TaskComplete from a participant who is not the assignee", 3, macpTaskCompleteNotAssignee),
		macpAttack("macp-task-fail-not-assignee", "TaskFail from a participant who is not the assignee", 3, macpTaskFailNotAssignee),
		macpAttack("macp-task-update-requester", "TaskUpdate from the requester", 2, macpTaskUpdateRequester),
		macpAttack("macp-handoff-accept-not-target", "HandoffAccept from a participant who is not the target", 3, macpHandoffAcceptNotTarget),
		macpAttack("macp-sender-not-token", "envelope sender differs from the token", 2, macpSenderNotToken),
		macpAttack("macp-commitment-after-fail", "positive commitment after TaskFail", 2, macpCommitmentAfterFail),
		macpAttack("macp-reoffer-declined", "re-offer to the target that declined", 2, macpReofferDeclined),
		macpAttack("macp-duplicate-other-sender", "duplicate message_id from another sender", 3, macpDuplicateOtherSender),
		macpAttack("macp-list-sessions-outsider", "ListSessions by an agent in none of the sessions", 2, macpListSessionsOutsider),
		macpAttack("macp-timestamp-ahead", "SessionStart with a timestamp an hour ahead", 2, macpTimestampAhead),
		macpAttack("macp-path-query", "positive commitment after TaskFail, sent on the gRPC path `Send?x=1`", 2, macpPathQuery),
	}
}

// macpAttack wraps an attack body that needs `need` principals: the body
// reports through the run, which turns a spent budget, a transport failure
// or a refused setup into Skipped with the reason.
func macpAttack(id, title string, need int, body func(r *macpRun) Outcome) Attack {
	return Attack{ID: id, Protocol: "macp", Title: title, Run: func(ctx context.Context, e Endpoint) Outcome {
		if len(e.Principals) < need {
			return Skip(fmt.Sprintf("needs %d principals, %d given", need, len(e.Principals)))
		}
		conn, err := dialMACP(e.URL)
		if err != nil {
			return Failed(err)
		}
		defer conn.Close()
		r := &macpRun{ctx: ctx, e: e, conn: conn, marker: randomHex(4)}
		out := body(r)
		if r.err != nil {
			return Failed(r.err)
		}
		return out
	}}
}

// dialMACP connects to http://host:port (plaintext) or https://host:port
// (TLS, the system's roots); the connection is made on the first call.
func dialMACP(target string) (*grpc.ClientConn, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("MACP endpoint %q: want http://host:port or https://host:port", target)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	return grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds))
}

// macpRun is one attack's run; err, once set, makes every call a no-op.
type macpRun struct {
	ctx    context.Context
	e      Endpoint
	conn   *grpc.ClientConn
	marker string // in the run's message ids
	seq    int
	err    error
}

func (r *macpRun) p(i int) Principal { return r.e.Principals[i] }

func (r *macpRun) skip(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// invoke makes one unary call as who on path.
func (r *macpRun) invoke(who Principal, path string, in, out proto.Message) error {
	if r.err != nil {
		return r.err
	}
	if err := r.e.Budget.Take(); err != nil {
		r.skip("%v", err)
		return r.err
	}
	ctx, cancel := context.WithTimeout(r.ctx, macpCallTime)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+who.Token)
	return r.conn.Invoke(ctx, path, in, out)
}

// envelope is a message of the run's session s in mode, from sender.
func (r *macpRun) envelope(sender, s, mode, typ string, payload proto.Message) *macpv1.Envelope {
	r.seq++
	b, err := proto.Marshal(payload)
	if err != nil {
		r.skip("%s: %v", typ, err)
	}
	return &macpv1.Envelope{MacpVersion: "1.0", Mode: mode, MessageType: typ, MessageId: fmt.Sprintf("audit-%s-%d", r.marker, r.seq),
		SessionId: s, Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: b}
}

// sendOn sends env as who on path; a call that fails at the gRPC level is
// answered as a refusal with the status code.
func (r *macpRun) sendOn(who Principal, path string, env *macpv1.Envelope) (*macpv1.Ack, error) {
	var resp macpv1.SendResponse
	err := r.invoke(who, path, &macpv1.SendRequest{Envelope: env}, &resp)
	return resp.GetAck(), err
}

// honest sends a setup message, which must be accepted.
func (r *macpRun) honest(who Principal, env *macpv1.Envelope) {
	ack, err := r.sendOn(who, macpSend, env)
	switch {
	case r.err != nil:
	case err != nil:
		r.skip("setup %s from %s: %v", env.GetMessageType(), who.Name, err)
	case !ack.GetOk():
		r.skip("setup %s from %s refused: %s %s", env.GetMessageType(), who.Name, ack.GetError().GetCode(), ack.GetError().GetMessage())
	}
}

// start starts a session of mode initiated by who with participants, and
// returns its id.
func (r *macpRun) start(who Principal, mode string, participants ...Principal) string {
	s := newSessionID()
	var names []string
	for _, p := range participants {
		names = append(names, p.Name)
	}
	r.honest(who, r.envelope(who.Name, s, mode, "SessionStart", &macpv1.SessionStartPayload{Intent: "warden audit", Participants: names,
		ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000}))
	return s
}

// acceptedTask: planner asks worker for task t1 and worker accepts.
func (r *macpRun) acceptedTask(planner, worker Principal, others ...Principal) string {
	s := r.start(planner, macpTask, append([]Principal{planner, worker}, others...)...)
	r.honest(planner, r.envelope(planner.Name, s, macpTask, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "audit", RequestedAssignee: worker.Name}))
	r.honest(worker, r.envelope(worker.Name, s, macpTask, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker.Name}))
	return s
}

// failedTask: then worker reports TaskFail.
func (r *macpRun) failedTask(planner, worker Principal) string {
	s := r.acceptedTask(planner, worker)
	r.honest(worker, r.envelope(worker.Name, s, macpTask, "TaskFail", &taskv1.TaskFailPayload{TaskId: "t1", Assignee: worker.Name, ErrorCode: "E", Reason: "audit"}))
	return s
}

func (r *macpRun) positiveCommitment(planner Principal, s string) *macpv1.Envelope {
	return r.envelope(planner.Name, s, macpTask, "Commitment", &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "task.completed", AuthorityScope: "audit",
		Reason: "forged", ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", OutcomePositive: true})
}

// bad sends the attack's message as who on path and judges it: accepted is
// the attack working (a duplicate ack says so), refused is blocked with the
// code.
func (r *macpRun) bad(who Principal, path string, env *macpv1.Envelope) Outcome {
	ack, err := r.sendOn(who, path, env)
	switch {
	case r.err != nil:
		return Outcome{}
	case err != nil:
		return Block("refused `" + status.Code(err).String() + "`")
	case !ack.GetOk():
		return Block("refused " + ack.GetError().GetCode())
	case ack.GetDuplicate():
		return Succeed("accepted (acked as a duplicate)")
	}
	return Succeed("accepted")
}

func macpTaskCompleteNotAssignee(r *macpRun) Outcome {
	planner, worker, attacker := r.p(0), r.p(2), r.p(1)
	s := r.acceptedTask(planner, worker, attacker)
	return r.bad(attacker, macpSend, r.envelope(attacker.Name, s, macpTask, "TaskComplete", &taskv1.TaskCompletePayload{TaskId: "t1", Summary: "forged"}))
}

func macpTaskFailNotAssignee(r *macpRun) Outcome {
	planner, worker, attacker := r.p(0), r.p(2), r.p(1)
	s := r.acceptedTask(planner, worker, attacker)
	return r.bad(attacker, macpSend, r.envelope(attacker.Name, s, macpTask, "TaskFail", &taskv1.TaskFailPayload{TaskId: "t1", ErrorCode: "E", Reason: "forged"}))
}

func macpTaskUpdateRequester(r *macpRun) Outcome {
	planner, worker := r.p(1), r.p(0)
	s := r.acceptedTask(planner, worker)
	return r.bad(planner, macpSend, r.envelope(planner.Name, s, macpTask, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.9}))
}

func macpHandoffAcceptNotTarget(r *macpRun) Outcome {
	owner, target, attacker := r.p(0), r.p(2), r.p(1)
	s := r.start(owner, macpHandoff, owner, target, attacker)
	r.honest(owner, r.envelope(owner.Name, s, macpHandoff, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: target.Name, Scope: "audit"}))
	return r.bad(attacker, macpSend, r.envelope(attacker.Name, s, macpHandoff, "HandoffAccept", &handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: attacker.Name}))
}

func macpSenderNotToken(r *macpRun) Outcome {
	victim, attacker := r.p(0), r.p(1)
	s := r.start(victim, macpTask, victim, attacker)
	// The attacker's token, the victim's name: the victim's TaskRequest.
	return r.bad(attacker, macpSend, r.envelope(victim.Name, s, macpTask, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "forged", RequestedAssignee: attacker.Name}))
}

func macpCommitmentAfterFail(r *macpRun) Outcome {
	planner, worker := r.p(1), r.p(0)
	s := r.failedTask(planner, worker)
	return r.bad(planner, macpSend, r.positiveCommitment(planner, s))
}

func macpReofferDeclined(r *macpRun) Outcome {
	owner, target := r.p(1), r.p(0)
	s := r.start(owner, macpHandoff, owner, target)
	r.honest(owner, r.envelope(owner.Name, s, macpHandoff, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: target.Name, Scope: "audit"}))
	r.honest(target, r.envelope(target.Name, s, macpHandoff, "HandoffDecline", &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: target.Name, Reason: "no"}))
	return r.bad(owner, macpSend, r.envelope(owner.Name, s, macpHandoff, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h2", TargetParticipant: target.Name, Scope: "audit"}))
}

func macpDuplicateOtherSender(r *macpRun) Outcome {
	planner, worker, attacker := r.p(0), r.p(2), r.p(1)
	s := r.acceptedTask(planner, worker, attacker)
	first := r.envelope(worker.Name, s, macpTask, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t1", Status: "running", Progress: 0.2})
	r.honest(worker, first)
	again := r.envelope(attacker.Name, s, macpTask, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t1", Status: "running", Progress: 0.3})
	again.MessageId = first.GetMessageId()
	return r.bad(attacker, macpSend, again)
}

func macpListSessionsOutsider(r *macpRun) Outcome {
	victim, outsider := r.p(0), r.p(1)
	others := []Principal{victim, {Name: "audit-peer-" + r.marker}}
	if len(r.e.Principals) > 2 {
		others[1] = r.p(2)
	}
	s := r.start(victim, macpTask, others...)
	pages := 0
	token := ""
	for pages < macpPageMax {
		var resp macpv1.ListSessionsResponse
		err := r.invoke(outsider, macpList, &macpv1.ListSessionsRequest{PageToken: token}, &resp)
		if r.err != nil {
			return Outcome{}
		}
		if err != nil {
			return Block("refused `" + status.Code(err).String() + "`")
		}
		pages++
		if slices.ContainsFunc(resp.GetSessions(), func(m *macpv1.SessionMetadata) bool { return m.GetSessionId() == s }) {
			return Succeed("lists the sessions of others")
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	return Block("the victim's session is not listed")
}

func macpTimestampAhead(r *macpRun) Outcome {
	who := r.p(1)
	env := r.envelope(who.Name, newSessionID(), macpTask, "SessionStart", &macpv1.SessionStartPayload{Intent: "warden audit",
		Participants: []string{who.Name, r.p(0).Name}, ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000})
	env.TimestampUnixMs += time.Hour.Milliseconds()
	return r.bad(who, macpSend, env)
}

func macpPathQuery(r *macpRun) Outcome {
	planner, worker := r.p(1), r.p(0)
	s := r.failedTask(planner, worker)
	return r.bad(planner, macpSend+"?x=1", r.positiveCommitment(planner, s))
}

// newSessionID is a fresh UUIDv4, the session id the runtime wants.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

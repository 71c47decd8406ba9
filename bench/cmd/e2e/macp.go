package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// The modes the MACP workloads use.
const (
	taskMode    = "macp.mode.task.v1"
	handoffMode = "macp.mode.handoff.v1"
)

// updatesPerSession is how many TaskUpdates go to one session before the
// next: the runtime slows down as one session's history grows, which is not
// what is measured.
const updatesPerSession = 100

// hotSessionUpdates is how many TaskUpdates go to one session in the hot
// session workload: every message in flight is on the same session, and a
// fresh session takes over before its history slows the runtime down.
const hotSessionUpdates = 1000

// handoffBlock is how many sessions get their HandoffOffer before the first
// of them gets its HandoffAccept, so that an accept rarely waits for its
// offer's answer.
const handoffBlock = 16

// setupWorkers is the concurrency of the untimed setup (sessions started
// before a run).
const setupWorkers = 8

// workload is what a run sends: setup prepares state for n messages, untimed;
// do sends message i.
type workload interface {
	setup(ctx context.Context, n int) error
	do(ctx context.Context, i int) error
}

// marshal encodes a payload built by the benchmark itself.
func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// Payloads, encoded once.
var (
	taskStart = marshal(&macpv1.SessionStartPayload{Intent: "bench", Participants: []string{"planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 3_600_000})
	handoffStart = marshal(&macpv1.SessionStartPayload{Intent: "bench", Participants: []string{"triage", "billing"},
		ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 3_600_000})
	taskRequest   = marshal(&taskv1.TaskRequestPayload{TaskId: "t1", Title: "bench", Instructions: "measure", RequestedAssignee: "worker"})
	taskAccept    = marshal(&taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"})
	taskUpdate    = marshal(&taskv1.TaskUpdatePayload{TaskId: "t1", Status: "running", Progress: 0.5, Message: "half way"})
	handoffOffer  = marshal(&handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "billing", Scope: "refund", Reason: "bench"})
	handoffAccept = marshal(&handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: "billing"})
)

var (
	sessionSeq atomic.Uint64
	runPrefix  = uint32(time.Now().Unix())
)

// newSessionID returns a UUID-shaped session id unique to this run.
func newSessionID() string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", runPrefix, sessionSeq.Add(1))
}

// macpClient sends MACP envelopes to one address, the runtime or Warden, as
// the sender named in each envelope (dev authentication: the bearer is the
// identity).
type macpClient struct {
	conn *grpc.ClientConn
	rpc  macpv1.MACPRuntimeServiceClient
}

func dialMACP(addr string) (*macpClient, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &macpClient{conn: conn, rpc: macpv1.NewMACPRuntimeServiceClient(conn)}, nil
}

func (c *macpClient) close() { c.conn.Close() }

// send sends one envelope; a refused Ack is an error.
func (c *macpClient) send(ctx context.Context, mode, typ, id, sid, sender string, payload []byte) error {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+sender)
	resp, err := c.rpc.Send(ctx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{
		MacpVersion: "1.0", Mode: mode, MessageType: typ, MessageId: id, SessionId: sid, Sender: sender,
		TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}})
	if err != nil {
		return fmt.Errorf("%s: %w", typ, err)
	}
	if a := resp.GetAck(); !a.GetOk() {
		return fmt.Errorf("%s refused: %s %s", typ, a.GetError().GetCode(), a.GetError().GetMessage())
	}
	return nil
}

// parallel runs f for 0..n-1 with setupWorkers at a time.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(setupWorkers)
	for i := range n {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// taskWork sends TaskUpdates from the assignee, updatesPerSession to each
// session, in sessions set up with SessionStart, TaskRequest and TaskAccept.
// The sessions take turns (message i goes to session i mod their number), so
// that the messages in flight at saturation are on as many sessions; with hot
// set, hotSessionUpdates go to one session before the next, so that every
// message in flight is on the same session.
type taskWork struct {
	c        *macpClient
	hot      bool
	sessions []string
}

func (w *taskWork) per() int {
	if w.hot {
		return hotSessionUpdates
	}
	return updatesPerSession
}

func (w *taskWork) setup(ctx context.Context, n int) error {
	w.sessions = make([]string, (n+w.per()-1)/w.per())
	for i := range w.sessions {
		w.sessions[i] = newSessionID()
	}
	return parallel(ctx, len(w.sessions), func(ctx context.Context, i int) error {
		sid := w.sessions[i]
		if err := w.c.send(ctx, taskMode, "SessionStart", "s", sid, "planner", taskStart); err != nil {
			return err
		}
		if err := w.c.send(ctx, taskMode, "TaskRequest", "r", sid, "planner", taskRequest); err != nil {
			return err
		}
		return w.c.send(ctx, taskMode, "TaskAccept", "a", sid, "worker", taskAccept)
	})
}

// session is the session message i goes to.
func (w *taskWork) session(i int) int {
	if w.hot {
		return i / hotSessionUpdates
	}
	return i % len(w.sessions)
}

func (w *taskWork) do(ctx context.Context, i int) error {
	k := w.session(i)
	if k >= len(w.sessions) {
		return fmt.Errorf("message %d beyond the %d sessions set up", i, len(w.sessions))
	}
	return w.c.send(ctx, taskMode, "TaskUpdate", "u"+strconv.Itoa(i), w.sessions[k], "worker", taskUpdate)
}

// handoffWork sends HandoffOffer and HandoffAccept pairs, one pair per
// session (a session accepts one offer): in blocks of handoffBlock sessions,
// the offers first, then their accepts, each accept waiting for its offer's
// answer.
type handoffWork struct {
	c        *macpClient
	sessions []string
	offered  []chan struct{}
}

func (w *handoffWork) setup(ctx context.Context, n int) error {
	pairs := (n + 1) / 2
	pairs = (pairs + handoffBlock - 1) / handoffBlock * handoffBlock
	w.sessions = make([]string, pairs)
	w.offered = make([]chan struct{}, pairs)
	for i := range w.sessions {
		w.sessions[i] = newSessionID()
		w.offered[i] = make(chan struct{})
	}
	return parallel(ctx, pairs, func(ctx context.Context, i int) error {
		return w.c.send(ctx, handoffMode, "SessionStart", "s", w.sessions[i], "triage", handoffStart)
	})
}

// handoffSlot maps message i onto its session and says whether it is the
// offer (else the accept): each block of 2*handoffBlock messages holds the
// offers of handoffBlock sessions, then their accepts.
func handoffSlot(i int) (session int, offer bool) {
	block, j := i/(2*handoffBlock), i%(2*handoffBlock)
	return block*handoffBlock + j%handoffBlock, j < handoffBlock
}

func (w *handoffWork) do(ctx context.Context, i int) error {
	k, offer := handoffSlot(i)
	if k >= len(w.sessions) {
		return fmt.Errorf("message %d beyond the %d sessions set up", i, len(w.sessions))
	}
	if offer {
		defer close(w.offered[k])
		return w.c.send(ctx, handoffMode, "HandoffOffer", "o", w.sessions[k], "triage", handoffOffer)
	}
	select {
	case <-w.offered[k]:
	case <-ctx.Done():
		return fmt.Errorf("HandoffAccept: offer not answered: %w", ctx.Err())
	}
	return w.c.send(ctx, handoffMode, "HandoffAccept", "a", w.sessions[k], "billing", handoffAccept)
}

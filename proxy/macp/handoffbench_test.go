package macp

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/internal/cputime"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

// handoffBlock is how many sessions get their HandoffOffer before the first
// of them gets its HandoffAccept, as in the load harness's handoff scenario
// (bench/cmd/e2e).
const handoffBlock = 16

// handoffMix replays the load harness's handoff scenario: in blocks of
// handoffBlock sessions, each started (untimed) by its initiator, a
// HandoffOffer to each from the initiator, then each offer's HandoffAccept
// from its target. Every message is accepted by the runtime and moves its
// session's state; every session is new.
type handoffMix struct {
	tb       testing.TB
	setup, c macpv1.MACPRuntimeServiceClient
	triage   context.Context
	billing  context.Context
	start    []byte
	offer    []byte
	accept   []byte
	sids     [handoffBlock]string
	started  int // sessions started, which number the next ones
	next     int
}

func newHandoffMix(tb testing.TB, setup, c macpv1.MACPRuntimeServiceClient) *handoffMix {
	const triage, billing = "agent://triage", "agent://billing"
	as := func(p string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+p)
	}
	mk := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	return &handoffMix{tb: tb, setup: setup, c: c, triage: as(triage), billing: as(billing),
		start: mk(&macpv1.SessionStartPayload{Intent: "bench", Participants: []string{triage, billing},
			ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: macp.MaxTTLMs}),
		offer:  mk(&handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: billing, Scope: "refund", Reason: "bench"}),
		accept: mk(&handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: billing}),
	}
}

func (h *handoffMix) req(sid, sender, typ, id string, payload []byte) *macpv1.SendRequest {
	return &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeHandoff, MessageType: typ,
		MessageId: id, SessionId: sid, Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}}
}

// startBlock starts the next block's sessions through h.setup.
func (h *handoffMix) startBlock() {
	for i := range h.sids {
		h.started++
		h.sids[i] = fmt.Sprintf("00000000-0000-4000-9000-%012d", h.started)
		if err := h.send(h.setup, h.triage, h.req(h.sids[i], "agent://triage", macp.TypeSessionStart, "s", h.start)); err != nil {
			h.tb.Fatalf("SessionStart: %v", err)
		}
	}
}

// needsBlock reports whether the next message is a new block's first.
func (h *handoffMix) needsBlock() bool { return h.next%(2*handoffBlock) == 0 }

// one sends the mix's next message through h.c; the block's sessions must
// have been started (needsBlock, startBlock).
func (h *handoffMix) one() error {
	j := h.next % (2 * handoffBlock)
	h.next++
	sid := h.sids[j%handoffBlock]
	if j < handoffBlock {
		return h.send(h.c, h.triage, h.req(sid, "agent://triage", "HandoffOffer", "o", h.offer))
	}
	return h.send(h.c, h.billing, h.req(sid, "agent://billing", "HandoffAccept", "a", h.accept))
}

func (h *handoffMix) send(c macpv1.MACPRuntimeServiceClient, ctx context.Context, r *macpv1.SendRequest) error {
	resp, err := c.Send(ctx, r)
	if err != nil {
		return err
	}
	if a := resp.GetAck(); !a.GetOk() {
		return fmt.Errorf("%s refused: %v", r.GetEnvelope().GetMessageType(), a.GetError())
	}
	return nil
}

// BenchmarkSidecarHandoffRelay measures the load harness's handoff scenario
// (HandoffOffer and HandoffAccept, each on a new session, each accepted)
// through the frame relay front door, per message: the sessions' starts are
// not timed nor counted in cpu-ns/op or allocs/op, and go through a second
// server on the same decision (labelled side=setup, so that -tagfocus
// side=warden shows the measured messages alone). Compare
// BenchmarkSidecarSendRelay, the TaskUpdate path, and
// BenchmarkNullRelayHandoff, the floor.
func BenchmarkSidecarHandoffRelay(b *testing.B) {
	setup, warden := handoffSidecars(b)
	runHandoff(b, newHandoffMix(b, setup, warden))
}

// BenchmarkNullRelayHandoff is BenchmarkSidecarHandoffRelay through the
// frame relay alone, no decision.
func BenchmarkNullRelayHandoff(b *testing.B) {
	up := startBenchRuntime(b)
	setup := handoffSetup(b, devEnforcer(b), up)
	null := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(b, serveNullRelay(b, up)))
	runHandoff(b, newHandoffMix(b, setup, null))
}

// handoffSidecars returns a client of a relay sidecar in front of a bench
// runtime (warden) and one of a second sidecar on the same decision, to
// start sessions with (setup).
func handoffSidecars(tb testing.TB) (setup, warden macpv1.MACPRuntimeServiceClient) {
	up, enf := startBenchRuntime(tb), devEnforcer(tb)
	warden = macpv1.NewMACPRuntimeServiceClient(startSidecar(tb, enf, up, TransportRelay))
	return handoffSetup(tb, enf, up), warden
}

// handoffSetup is a client of a relay sidecar for enf in front of up whose
// goroutines are labelled side=setup.
func handoffSetup(tb testing.TB, enf *sessions.Decider, up string) macpv1.MACPRuntimeServiceClient {
	_, addr := serveSidecarAs(tb, "setup", enf, Config{Upstream: up, Transport: TransportRelay})
	return macpv1.NewMACPRuntimeServiceClient(startSidecarConn(tb, addr))
}

func runHandoff(b *testing.B, h *handoffMix) {
	b.ReportAllocs()
	var rtt roundTrips
	defer rtt.report(b)
	var setupCPU time.Duration
	start := cputime.Used()
	defer func() { cputime.Report(b, start+setupCPU, b.N) }()
	for b.Loop() {
		if h.needsBlock() {
			b.StopTimer()
			t := cputime.Used()
			h.startBlock()
			setupCPU += cputime.Used() - t
			b.StartTimer()
		}
		t := time.Now()
		if err := h.one(); err != nil {
			b.Fatal(err)
		}
		rtt.add(time.Since(t))
	}
}

// handoffAllocs counts the allocations per message of the handoff mix
// through h.c, n blocks of it, the sessions' starts not counted.
func handoffAllocs(h *handoffMix, blocks int) float64 {
	var total uint64
	var ms runtime.MemStats
	for range blocks {
		h.startBlock()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		for range 2 * handoffBlock {
			if err := h.one(); err != nil {
				h.tb.Fatal(err)
			}
		}
		runtime.ReadMemStats(&ms)
		total += ms.Mallocs - before
	}
	return float64(total) / float64(blocks*2*handoffBlock)
}

package test

import (
	"strings"
	"testing"
	"time"

	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

// TestMACPRebuildOfferTime (O2): a rebuilt handoff session dates an offer as
// the runtime does. The runtime times an implicit accept from when it
// accepted the offer, Warden's live decisions from when they decided it; a
// rebuild dated it by the client's timestamp, which may be up to 60 s ahead
// (the most a live decision takes) or anywhere behind. An initiator stamping
// its offer to the second target ahead, once the first target declined, and
// the session then rebuilt (its entry evicted by another agent's session
// from a table of one), was decided as if the offer were still pending when
// the runtime's timeout had accepted it: its negative Commitment, which
// Warden refuses after an accepted offer (the runtime alone accepts it),
// passed. Now the offer is dated by the runtime's stamp of its sender's last
// message, and the positive Commitment passes.
func TestMACPRebuildOfferTime(t *testing.T) {
	eachHandoffDoor(t, 1000, func(t *testing.T, d handoffDoor) {
		d.start(t)
		d.must(t, d.handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "first", Scope: "s"}))
		d.must(t, d.handoff("first", "HandoffDecline", &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: "first", Reason: "busy"}))
		ahead := d.handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h2", TargetParticipant: "second", Scope: "s"})
		ahead.TimestampUnixMs += 50_000 // within the 60 s a live decision takes
		d.must(t, ahead)
		d.evict(t)
		time.Sleep(1500 * time.Millisecond) // past the runtime's implicit accept of h2
		if ok, why := d.decide(d.commit("c1", false)); ok == d.warden {
			t.Errorf("the initiator's negative Commitment after the second offer was implicitly accepted: accepted %v (%s), want %v", ok, why, !d.warden)
		}
		if !d.warden {
			return // the runtime alone resolved the session
		}
		if ok, why := d.decide(d.commit("c2", true)); !ok {
			t.Errorf("the initiator's positive Commitment after the implicit accept: %s; the runtime accepts it", why)
		}
	})
}

// TestMACPRebuildOfferWindow (O2's cost): when the offer's sender sent
// something after it (a HandoffContext), a rebuild knows when the runtime
// accepted the offer only within bounds: after the target's decline before
// it, and (the runtime writes a due implicit accept into the history before
// the next message) less than the timeout before the context, and no later
// than the context. A Commitment whose outcome depends on it inside that
// window is refused, either outcome, where a live decision (and the runtime)
// would take the positive one; once the timeout has run from the context,
// the retry passes. The window is at most the timeout long.
func TestMACPRebuildOfferWindow(t *testing.T) {
	const timeout = 3000
	eachHandoffDoor(t, timeout, func(t *testing.T, d handoffDoor) {
		d.start(t)
		d.must(t, d.handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "first", Scope: "s"}))
		d.must(t, d.handoff("first", "HandoffDecline", &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: "first", Reason: "busy"}))
		offered := time.Now()
		d.must(t, d.handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h2", TargetParticipant: "second", Scope: "s"}))
		time.Sleep(2 * time.Second)
		d.must(t, d.handoff("planner", "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h2", ContentType: "text/plain"}))
		d.evict(t)
		time.Sleep(time.Until(offered.Add(timeout*time.Millisecond + 500*time.Millisecond))) // due at the runtime; within the window
		ok, why := d.decide(d.commit("c1", true))
		if ok == d.warden {
			t.Errorf("a positive Commitment in the window: accepted %v (%s), want %v", ok, why, !d.warden)
		}
		// the sidecar says why; ext_authz gives the code alone
		if d.warden && !strings.Contains(why, "not known before") && why != "INVALID_ENVELOPE" {
			t.Errorf("a positive Commitment in the window refused for another reason: %s", why)
		}
		if !d.warden {
			return
		}
		time.Sleep(time.Until(offered.Add(2*time.Second + timeout*time.Millisecond + 500*time.Millisecond))) // the timeout has run from the context
		if ok, why := d.decide(d.commit("c1", true)); !ok {
			t.Errorf("the positive Commitment retried after the window: %s; the runtime accepts it", why)
		}
	})
}

// TestMACPSuspendedOffer: time a session spends suspended does not count
// toward an offer's implicit accept (RFC-MACP-0010 §5.1(1)); the runtime
// subtracts it, Warden's live decisions counted it. After the first target
// declined, an initiator that suspended the session for the timeout and
// resumed it had its positive Commitment, which Warden refuses without an
// accepted offer, pass over the second offer nobody accepted: Warden took
// it as implicitly accepted, the runtime as pending (and takes the
// Commitment, an offer having been declined). Live, no rebuild.
func TestMACPSuspendedOffer(t *testing.T) {
	eachHandoffDoor(t, 2000, func(t *testing.T, d handoffDoor) {
		d.start(t)
		d.must(t, d.handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "first", Scope: "s"}))
		d.must(t, d.handoff("first", "HandoffDecline", &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: "first", Reason: "busy"}))
		d.must(t, d.handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h2", TargetParticipant: "second", Scope: "s"}))
		d.mustControl(t, "SuspendSession")
		time.Sleep(2500 * time.Millisecond)
		d.mustControl(t, "ResumeSession")
		if ok, why := d.decide(d.commit("c1", true)); ok == d.warden {
			t.Errorf("a positive Commitment 2.5 s after the offer, 2.5 s of it suspended, under a 2 s timeout: accepted %v (%s), want %v", ok, why, !d.warden)
		}
	})
}

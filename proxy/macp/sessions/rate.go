package sessions

import (
	"strconv"
	"sync"
	"time"

	"github.com/agentwarden/warden/rules"
)

// rateWindow mirrors one of the runtime's per-sender rate limits
// (macp-runtime 0.13.0's MACP_MESSAGE_LIMIT_PER_MINUTE and
// MACP_SESSION_START_LIMIT_PER_MINUTE): the messages of a sender Warden let
// through in the last minute, which the runtime counted likewise. Warden
// counts what it allows, never more than reached the runtime when every
// allowed message is delivered, and its instants precede the runtime's, so
// it refuses no message the runtime's equal limit would take.
type rateWindow struct {
	limit  int // 0: none
	name   string
	mu     sync.Mutex
	events map[string][]time.Time
	tick   uint64
}

// rateWindowOf is one minute's window of limit per sender (0: none).
const rateWindowOf = time.Minute

// sweepEvery is how many records pass between sweeps of idle senders.
const sweepEvery = 128

func newRateWindow(limit int, name string) *rateWindow {
	return &rateWindow{limit: limit, name: name, events: map[string][]time.Time{}}
}

// full refuses sender's next message when the window holds limit of its
// messages, RATE_LIMITED as the runtime answers it.
func (w *rateWindow) full(sender string, now time.Time) rules.Verdict {
	if w == nil || w.limit <= 0 {
		return rules.Verdict{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.trim(sender, now)) < w.limit {
		return rules.Verdict{}
	}
	return rules.Verdict{Code: rules.CodeRateLimited, Reason: rules.ReasonRateLimited, Rank: rules.RankPre,
		Detail: "over the runtime's limit of " + strconv.Itoa(w.limit) + " a minute for this sender (" + w.name + ")"}
}

// add records a message of sender's Warden let through at now.
func (w *rateWindow) add(sender string, now time.Time) {
	if w == nil || w.limit <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tick++; w.tick%sweepEvery == 0 {
		for s := range w.events {
			if len(w.trim(s, now)) == 0 {
				delete(w.events, s)
			}
		}
	}
	w.events[sender] = append(w.trim(sender, now), now)
}

// trim drops sender's instants older than the window and returns the rest.
func (w *rateWindow) trim(sender string, now time.Time) []time.Time {
	ev := w.events[sender]
	i := 0
	for i < len(ev) && now.Sub(ev[i]) > rateWindowOf {
		i++
	}
	if i > 0 {
		ev = append(ev[:0], ev[i:]...)
		w.events[sender] = ev
	}
	return ev
}

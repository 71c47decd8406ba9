package macp

import "time"

// echoQueue is the allowed envelopes of a StreamSession that await the
// runtime's echo, in the order they were sent, each with when it stops
// waiting (echoTimeout after): one timer for the stream runs at the
// oldest's (sessionStream.awaitEcho), not one per envelope. Its owner
// guards it.
type echoQueue struct {
	waits []echoWait
	head  int // waits[head:] are queued
}

// echoWait is one envelope's message id and when it stops waiting.
type echoWait struct {
	id  string
	due time.Time
}

// push queues id until due, reporting whether the queue was empty (its
// timer then runs at due).
func (q *echoQueue) push(id string, due time.Time) (first bool) {
	first = q.head == len(q.waits)
	if first {
		q.waits, q.head = q.waits[:0], 0
	} else if q.head > 64 && q.head > len(q.waits)/2 { // the room before head is taken back
		n := copy(q.waits, q.waits[q.head:])
		clear(q.waits[n:])
		q.waits, q.head = q.waits[:n], 0
	}
	q.waits = append(q.waits, echoWait{id, due})
	return first
}

// trim drops the oldest while they no longer wait (waiting reports whether
// one does): an answer settled them.
func (q *echoQueue) trim(waiting func(id string) bool) {
	for q.head < len(q.waits) && !waiting(q.waits[q.head].id) {
		q.pop()
	}
}

// expire drops the ones due by now, appending their ids to ids.
func (q *echoQueue) expire(now time.Time, ids []string) []string {
	for q.head < len(q.waits) && !q.waits[q.head].due.After(now) {
		ids = append(ids, q.waits[q.head].id)
		q.pop()
	}
	return ids
}

// next is when the oldest stops waiting; ok is false when none waits.
func (q *echoQueue) next() (due time.Time, ok bool) {
	if q.head == len(q.waits) {
		return time.Time{}, false
	}
	return q.waits[q.head].due, true
}

func (q *echoQueue) pop() {
	q.waits[q.head] = echoWait{} // the id is not kept
	q.head++
}

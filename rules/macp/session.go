package macp

import (
	"math"
	"math/rand/v2"
	"slices"
	"unique"

	"github.com/dchest/siphash"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// State is a session's lifecycle state, numbered as macp.v1.SessionState.
type State uint8

// The lifecycle states.
const (
	StateUnspecified State = iota
	StateOpen
	StateResolved
	StateExpired
	StateSuspended
	StateCancelled
)

var stateNames = [...]string{"Unspecified", "Open", "Resolved", "Expired", "Suspended", "Cancelled"}

// String returns the state's name as the conformance fixtures spell it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// Terminal reports whether no further transition is possible.
func (s State) Terminal() bool {
	return s == StateResolved || s == StateExpired || s == StateCancelled
}

// Mode identifiers Warden understands.
const (
	ModeTask       = "macp.mode.task.v1"
	ModeHandoff    = "macp.mode.handoff.v1"
	ModeDecision   = "macp.mode.decision.v1"
	ModeProposal   = "macp.mode.proposal.v1"
	ModeQuorum     = "macp.mode.quorum.v1"
	ModeMultiRound = "ext.multi_round.v1"
)

// seenID is one accepted message_id: its 64-bit SipHash-2-4 keyed with the
// session's random key (so the table costs a few bytes per message, not the id's
// length, and nobody can craft a second id that passes for an accepted one)
// and the index of its sender in Session.Participants, or a negative index
// into the session's outsiders for a sender outside the list.
type seenID struct {
	hash    uint64
	sender  int32
	content uint32 // digest of what the message says (see contentDigest)
}

// Session is the protocol state of one session: what the upstream accepted.
// A Session is never mutated once published; Step works on a copy.
type Session struct {
	ID    string
	Mode  string
	State State
	// epoch counts the changes to anything but the record of accepted ids
	// (see Record): every accepted message that is not record-only, every
	// control operation, expiry.
	epoch        uint32
	Initiator    string
	Participants []string
	versions     unique.Handle[Versions]
	Policy       *Governance
	StartedAtMs  int64
	DeadlineMs   int64
	// seldom is what few sessions have: nil for nearly all.
	seldom *seldom

	key  [2]uint64 // SipHash-2-4 key of the accepted ids and contents
	seen []seenID
	// modal is the mode's own state; nil for a mode Warden does not know.
	modal modal
}

// modal is a mode's own state: one kind per mode. Each kind also has a
// step method, called with its concrete type (see Step), so that the step's
// working set stays on the stack. A nil pointer of a kind is its empty state
// (what SessionStart leaves): a session that has only started costs no mode
// state of its own; clone then returns a new empty state.
type modal interface {
	// clone returns a copy that step can change without touching the
	// receiver.
	clone() modal
	// summary adds the state to out in the vocabulary of the conformance
	// fixtures' expected_mode_state.
	summary(s *Session, out map[string]any)
}

// orZero returns p, or a new zero value when p is nil: a mode state read
// where it may be a session's empty state.
func orZero[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

// Suspension is a session's suspension accounting (RFC-MACP-0001 §7.5).
type Suspension struct {
	// AtMs is when the current suspension began; 0 while not suspended.
	AtMs int64
	// FromMs is set while suspended when the suspension's start is not
	// known (a session rebuilt from the runtime, whose history does not
	// show suspensions): the earliest it can have begun, AtMs being the
	// latest. A Resume then banks into the deadline the longest the
	// suspension can have lasted and counts toward MaxMs the shortest, so
	// that Warden refuses nothing the runtime accepts.
	FromMs int64
	// TotalMs is the time spent suspended before the current suspension;
	// MaxMs caps the total (max_suspend_ms; 0: no cap).
	TotalMs int64
	MaxMs   int64
}

// seldom is what few sessions have, held behind one pointer: 8 bytes of
// every session, not 64. A session's record is never changed once the
// session is published: the setters make a new one, dropped when all of it
// is the default again.
type seldom struct {
	susp       Suspension
	resolution *Resolution
	senders    []string // senders of accepted messages outside Participants
}

// defaultSuspension returns the suspension accounting of a session never
// suspended under the default cap.
func defaultSuspension() Suspension { return Suspension{MaxMs: DefaultMaxSuspend} }

func (s *Session) rec() seldom {
	if s.seldom == nil {
		return seldom{susp: defaultSuspension()}
	}
	return *s.seldom
}

func (s *Session) setRec(r seldom) {
	if r.susp == defaultSuspension() && r.resolution == nil && len(r.senders) == 0 {
		s.seldom = nil
		return
	}
	s.seldom = &r
}

// Suspension returns the session's suspension accounting.
func (s *Session) Suspension() Suspension {
	if s.seldom == nil {
		return defaultSuspension()
	}
	return s.seldom.susp
}

// SetSuspension replaces the session's suspension accounting, on a session
// nobody else holds yet (a published session never changes).
func (s *Session) SetSuspension(v Suspension) {
	r := s.rec()
	r.susp = v
	s.setRec(r)
}

// Resolution returns what the session's accepted Commitment bound, nil
// before one is accepted.
func (s *Session) Resolution() *Resolution {
	if s.seldom == nil {
		return nil
	}
	return s.seldom.resolution
}

func (s *Session) setResolution(v *Resolution) {
	r := s.rec()
	r.resolution = v
	s.setRec(r)
}

// Versions are the versions a session was started with. Sessions started
// alike hold one shared copy.
type Versions struct {
	Mode   string // mode_version
	Config string // configuration_version
	Policy string // policy_version as bound: "" resolves to policy.default
}

// Versions returns the versions the session was started with.
func (s *Session) Versions() Versions {
	if s.versions == (unique.Handle[Versions]{}) {
		return Versions{}
	}
	return s.versions.Value()
}

// Resolution is what the accepted Commitment bound.
type Resolution struct {
	Action          string
	OutcomePositive bool
	ModeVersion     string
	ConfigVersion   string
	PolicyVersion   string
}

// IsParticipant reports whether id is a declared participant.
func (s *Session) IsParticipant(id string) bool {
	return slices.Contains(s.Participants, id)
}

// participant returns the session's copy of participant id's name, and
// whether id is one (IsParticipant for a name read in place).
func (s *Session) participant(id []byte) (string, bool) {
	for _, p := range s.Participants {
		if p == string(id) {
			return p, true
		}
	}
	return "", false
}

// Member reports whether sender takes part in the session: its initiator, a
// participant, or a role its governance policy delegates commitment to.
// To anyone else the session does not exist: every message and control
// operation of an outsider is answered as for an unknown session, before
// anything that would tell its mode, state or history.
func (s *Session) Member(sender string) bool {
	return sender == s.Initiator || s.IsParticipant(sender) || s.commitmentAuthority(sender)
}

// MessageCount returns how many accepted messages in this session came from
// sender (SessionStart included), as SessionMetadata.participant_activity
// reports it; a rebuild from the upstream uses it to know when its replay is
// complete.
func (s *Session) MessageCount(sender string) int {
	idx := s.senderIndex(sender)
	if idx == notSeen {
		return 0
	}
	n := 0
	for _, id := range s.seen {
		if id.sender == idx {
			n++
		}
	}
	return n
}

const notSeen int32 = math.MinInt32

// outsiders returns the senders of accepted messages outside Participants.
func (s *Session) outsiders() []string {
	if s.seldom == nil {
		return nil
	}
	return s.seldom.senders
}

// rare is a list that nearly every mode state leaves empty, held behind a
// pointer: 8 bytes of the state, not a slice's 24. It is never changed in
// place: with returns a new list, so copies of a state share it.
type rare[T any] struct{ p *[]T }

// rareOf returns a rare list of l's elements.
func rareOf[T any](l []T) rare[T] {
	if len(l) == 0 {
		return rare[T]{}
	}
	return rare[T]{&l}
}

// all returns the elements; the caller must not change them.
func (r rare[T]) all() []T {
	if r.p == nil {
		return nil
	}
	return *r.p
}

// with returns the list with v appended, in an array of its own.
func (r rare[T]) with(v T) rare[T] {
	l := grow(r.all(), v)
	return rare[T]{&l}
}

func (s *Session) senderIndex(sender string) int32 {
	if i := slices.Index(s.Participants, sender); i >= 0 {
		return int32(i)
	}
	if i := slices.Index(s.outsiders(), sender); i >= 0 {
		return int32(-1 - i)
	}
	return notSeen
}

// duplicate checks env's message_id against the accepted ones. A
// retransmission is the same message: same id, same sender and same content
// (type, mode, payload); it is answered by the upstream, never re-applied.
// The same id from another sender, or with other content, is refused: the
// runtime may not know an id Warden recorded (ids of sessions it lost on a
// restart), so a "duplicate" it does not recognise would be applied
// unchecked. A Progress's id is never recorded, nor checked (see signal): the
// runtime does neither.
func (s *Session) duplicate(env *macpv1.Envelope, sender string) (v rules.Verdict, dup bool) {
	if len(s.seen) == 0 {
		return rules.Verdict{}, false
	}
	h := s.idHash(env.GetMessageId())
	for _, e := range s.seen {
		if e.hash != h {
			continue
		}
		switch {
		case e.sender != s.senderIndex(sender):
			return deny(rules.RankPre, rules.CodeDuplicateMessage, rules.ReasonDuplicateForeignID,
				"message_id "+env.GetMessageId()+" was already accepted from another sender"), false
		case e.content != s.contentDigest(env):
			return deny(rules.RankPre, rules.CodeDuplicateMessage, rules.ReasonReusedID,
				"message_id "+env.GetMessageId()+" was already accepted with other content"), false
		}
		return rules.Verdict{Reason: rules.ReasonDuplicate}, true
	}
	return rules.Verdict{}, false
}

// newKey returns a random SipHash key from the runtime's ChaCha8 generator
// (the source maphash seeds come from), so that every replica sharing the
// session hashes its ids alike and nobody outside can predict them.
func newKey() [2]uint64 { return [2]uint64{rand.Uint64(), rand.Uint64()} }

// idHash is the keyed 64-bit hash of a message_id. SipHash-2-4 is a PRF made
// for short inputs under a secret key: ids cannot be crafted to collide.
func (s *Session) idHash(id string) uint64 {
	return siphash.Hash(s.key[0], s.key[1], []byte(id))
}

// contentDigest is a keyed 32-bit digest of what a message says. Keyed with
// the session's random key, it cannot be aimed at: content that passes for
// an accepted message's takes about 2^31 refused attempts on average. The
// payload's hash keys the hash of type and mode, so nothing is copied.
func (s *Session) contentDigest(env *macpv1.Envelope) uint32 {
	var buf [96]byte
	b := append(buf[:0], env.GetMessageType()...)
	b = append(b, 0)
	b = append(b, env.GetMode()...)
	b = append(b, 0)
	return uint32(siphash.Hash(s.key[0]^siphash.Hash(s.key[0], s.key[1], env.GetPayload()), s.key[1], b))
}

func (s *Session) recordID(env *macpv1.Envelope, sender string) {
	idx := s.senderIndex(sender)
	if idx == notSeen {
		r := s.rec()
		r.senders = grow(r.senders, sender)
		s.setRec(r)
		idx = int32(-len(s.outsiders()))
	}
	if s.key == ([2]uint64{}) {
		s.key = newKey()
	}
	s.seen = grow(s.seen, seenID{hash: s.idHash(env.GetMessageId()), sender: idx, content: s.contentDigest(env)})
}

// grow appends v to a record in an array of exactly the new length: a
// published session's record is never appended to in place (see clone), so
// room to spare would only cost memory.
func grow[T any](s []T, v T) []T {
	out := make([]T, len(s)+1)
	copy(out, s)
	out[len(s)] = v
	return out
}

// Record returns the state after a record-only message (Outcome.RecordOnly)
// that Step allowed on base is accepted upstream, s being the state committed
// by then: s with env's message_id recorded as accepted from sender, exactly
// what Step would return on s. ok is false when s has changed since base in
// more than its record of accepted ids (another message changed it, or time
// expired it): the message must then be decided again on s with Step.
func (s *Session) Record(base *Session, env *macpv1.Envelope, sender string) (next *Session, ok bool) {
	if s == nil || base == nil || s.epoch != base.epoch || s.State != base.State {
		return nil, false
	}
	if signal(env) {
		return s, true // a Progress records nothing (as in Step)
	}
	c := s.share()
	if _, dup := s.duplicate(env, sender); !dup {
		c.recordID(env, sender)
	}
	return c, true
}

// share returns a copy that may append to the id record only: the mode state
// is shared with s (never mutated once published).
func (s *Session) share() *Session {
	c := *s
	// The accepted ids are only appended to: the copy shares
	// them with its capacity cut to their length, so an append reallocates
	// instead of writing into s's array (copied once per accepted message,
	// not on every decision).
	c.seen = s.seen[:len(s.seen):len(s.seen)]
	return &c
}

// clone returns a copy whose slices and mode state can be changed without
// touching s. Participants and Policy are immutable and shared.
func (s *Session) clone() *Session {
	c := s.share()
	if s.modal != nil {
		c.modal = s.modal.clone()
	}
	return c
}

// ModeState returns a summary of the mode's state in the vocabulary of the
// conformance fixtures' expected_mode_state (phase, votes, offers, ...), for
// replay and debugging. It is not on the hot path.
func (s *Session) ModeState() map[string]any {
	out := map[string]any{}
	if s.modal != nil {
		s.modal.summary(s, out)
	}
	return out
}

package macp

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unique"
)

// codecV1, codecV2 and codecV3 are the first byte of a session's binary
// encoding (AppendBinary writes version 3). A decoder refuses any other:
// replicas of different versions never guess at each other's state. Version
// 2 adds to version 1 a governance policy Warden cannot know
// (macp.UnknownPolicy) and the earliest start of a suspension a rebuild
// could not date (Suspension.FromMs); version 3 adds the latest time the
// runtime can have accepted a handoff offer (Session.DatePendingOffer). An
// older encoding holds none of what its successors add and decodes as it
// did (an offer dated by one time).
const (
	codecV1 = 1
	codecV2 = 2
	codecV3 = 3
)

// How version 2 encodes the bound governance policy.
const (
	policyDefault byte = iota // nil: policy.default
	policyBound               // its canonical JSON follows
	policyUnknown             // its id follows; the definition is unknown
)

// Mode tags of the binary encoding.
const (
	tagNone byte = iota
	tagTask
	tagHandoff
	tagDecision
	tagProposal
	tagQuorum
	tagMultiRound
)

// errCodec is wrapped by every decoding error.
var errCodec = errors.New("session encoding")

// AppendBinary appends the session's state to b in Warden's compact binary
// encoding (version 3): what replicas sharing the session store and load.
// Accepted message ids are kept as their keyed digests, never as text; the
// bound governance policy as its canonical JSON.
func (s *Session) AppendBinary(b []byte) ([]byte, error) {
	w := writer{b: append(b, codecV3)}
	w.str(s.ID)
	w.str(s.Mode)
	w.b = append(w.b, byte(s.State))
	w.str(s.Initiator)
	w.strs(s.Participants)
	v := s.Versions()
	w.str(v.Mode)
	w.str(v.Config)
	w.str(v.Policy)
	switch g := s.Policy; {
	case g == nil:
		w.b = append(w.b, policyDefault)
	case g.unknown:
		w.b = append(w.b, policyUnknown)
		w.str(g.ID)
	default:
		w.b = append(w.b, policyBound)
		w.str(g.Canonical)
	}
	sp := s.Suspension()
	for _, v := range [...]int64{s.StartedAtMs, s.DeadlineMs, sp.AtMs, sp.FromMs, sp.TotalMs, sp.MaxMs} {
		w.int(v)
	}
	if r := s.Resolution(); r != nil {
		w.b = append(w.b, 1)
		w.str(r.Action)
		w.bool(r.OutcomePositive)
		w.str(r.ModeVersion)
		w.str(r.ConfigVersion)
		w.str(r.PolicyVersion)
	} else {
		w.b = append(w.b, 0)
	}
	w.b = binary.LittleEndian.AppendUint64(w.b, s.key[0])
	w.b = binary.LittleEndian.AppendUint64(w.b, s.key[1])
	w.uint(uint64(len(s.seen)))
	for _, e := range s.seen {
		w.b = binary.LittleEndian.AppendUint64(w.b, e.hash)
		w.int(int64(e.sender))
		w.b = binary.LittleEndian.AppendUint32(w.b, e.content)
	}
	w.strs(s.outsiders())
	s.appendMode(&w)
	return w.b, nil
}

func (s *Session) appendMode(w *writer) {
	switch m := s.modal.(type) {
	case *taskState:
		m = orZero(m)
		t := m
		w.b = append(w.b, tagTask)
		w.str(t.taskID)
		w.bool(t.requested)
		w.str(t.requestedAssignee)
		w.str(t.active)
		w.strs(t.rejected.all())
		w.str(t.report.String())
		w.bool(t.hasOutput)
		w.str(t.completionID)
	case *handoffState:
		m = orZero(m)
		w.b = append(w.b, tagHandoff)
		w.uint(uint64(len(m.offers)))
		for _, o := range m.offers {
			w.str(o.id)
			w.str(o.target)
			w.str(o.owner)
			w.b = append(w.b, o.disposition)
			w.int(o.offeredAtMs)
			w.int(o.offeredByMs)
		}
	case *decisionState:
		m = orZero(m)
		d := m
		w.b = append(w.b, tagDecision, d.phase)
		w.uint(uint64(len(d.proposals)))
		for _, p := range d.proposals {
			w.str(p.id)
			w.str(p.sender)
		}
		w.uint(uint64(len(d.evaluations)))
		for _, e := range d.evaluations {
			w.str(e.proposal)
			w.str(e.recommendation)
			w.str(e.sender)
			w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(e.confidence))
		}
		w.uint(uint64(len(d.objections)))
		for _, o := range d.objections {
			w.str(o.proposal)
			w.str(o.severity)
			w.str(o.sender)
		}
		w.uint(uint64(len(d.votes)))
		for _, v := range d.votes {
			w.str(v.proposal)
			w.str(v.voter)
			w.str(v.vote)
		}
	case *proposalState:
		m = orZero(m)
		p := m
		w.b = append(w.b, tagProposal)
		w.uint(uint64(len(p.proposals)))
		for _, x := range p.proposals {
			w.str(x.id)
			w.str(x.proposer)
			w.str(x.supersedes)
			w.bool(x.withdrawn)
		}
		w.uint(uint64(len(p.accepts)))
		for _, a := range p.accepts {
			w.str(a.sender)
			w.str(a.proposal)
		}
		w.strs(p.terminalRejects)
		w.int(int64(p.counters))
	case *quorumState:
		m = orZero(m)
		q := m
		w.b = append(w.b, tagQuorum)
		w.bool(q.requested)
		w.str(q.requestID)
		w.uint(uint64(q.required))
		w.uint(uint64(len(q.ballots)))
		for _, x := range q.ballots {
			w.str(x.sender)
			w.str(x.choice)
		}
	case *multiRoundState:
		m = orZero(m)
		w.b = append(w.b, tagMultiRound)
		w.int(int64(m.round))
		w.uint(uint64(len(m.contributions)))
		for _, c := range m.contributions {
			w.str(c.sender)
			w.str(c.value)
		}
		w.bool(m.converged)
	default:
		w.b = append(w.b, tagNone)
	}
}

// DecodeSession decodes what AppendBinary wrote. Input it did not write (of
// another version, truncated, with trailing bytes or inconsistent indexes)
// is an error wrapping a description, never a panic nor a partial session.
func DecodeSession(b []byte) (*Session, error) { return decodeSession(b, bindCanonical) }

// Decoder decodes sessions as DecodeSession does, binding each distinct
// policy once (a replica decodes a session every time another one changed
// it; binding a policy again parses its JSON). The zero value is ready; it
// is safe for concurrent use and keeps at most maxBound policies.
type Decoder struct {
	mu    sync.Mutex
	bound map[string]*Governance
}

const maxBound = 256

// Decode decodes what AppendBinary wrote.
func (d *Decoder) Decode(b []byte) (*Session, error) { return decodeSession(b, d.bind) }

func (d *Decoder) bind(canonical string) (*Governance, error) {
	d.mu.Lock()
	g, ok := d.bound[canonical]
	d.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := bindCanonical(canonical)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bound == nil || len(d.bound) >= maxBound {
		d.bound = map[string]*Governance{}
	}
	d.bound[canonical] = g
	return g, nil
}

func decodeSession(b []byte, bind func(canonical string) (*Governance, error)) (*Session, error) {
	if len(b) == 0 || b[0] < codecV1 || b[0] > codecV3 {
		return nil, fmt.Errorf("%w: not version %d to %d", errCodec, codecV1, codecV3)
	}
	v1 := b[0] == codecV1
	r := reader{b: b[1:]}
	s := &Session{}
	s.ID = r.str()
	// The names sessions have in common are the program's or the process's
	// copies, as Start makes them: a replica decodes session after session.
	s.Mode = canonical(r.str(), ModeTask, ModeHandoff, ModeDecision, ModeProposal, ModeQuorum, ModeMultiRound)
	s.State = State(r.byte())
	s.Initiator = unique.Make(r.str()).Value()
	s.Participants = r.strs()
	for i, id := range s.Participants {
		s.Participants[i] = unique.Make(id).Value()
	}
	s.versions = unique.Make(Versions{Mode: r.str(), Config: r.str(), Policy: r.str()})
	kind, canonical := policyBound, ""
	if !v1 {
		kind = r.byte()
	}
	switch kind {
	case policyBound, policyUnknown:
		canonical = r.str()
	case policyDefault:
	default:
		r.fail("unknown policy kind")
	}
	var sp Suspension
	s.StartedAtMs, s.DeadlineMs, sp.AtMs = r.int(), r.int(), r.int()
	if !v1 {
		sp.FromMs = r.int()
	}
	sp.TotalMs, sp.MaxMs = r.int(), r.int()
	s.SetSuspension(sp)
	if r.bool() {
		s.setResolution(&Resolution{Action: r.str(), OutcomePositive: r.bool(), ModeVersion: r.str(), ConfigVersion: r.str(), PolicyVersion: r.str()})
	}
	s.key = [2]uint64{r.u64(), r.u64()}
	if n := r.count(13); n > 0 {
		s.seen = make([]seenID, n)
		for i := range s.seen {
			s.seen[i] = seenID{hash: r.u64(), sender: int32(r.int()), content: r.u32()}
		}
	}
	if out := r.strs(); len(out) > 0 {
		rec := s.rec()
		rec.senders = out
		s.setRec(rec)
	}
	mode := r.b
	s.decodeMode(&r, b[0])
	if r.err == nil {
		s.emptyMode(mode[:len(mode)-len(r.b)])
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %w", errCodec, r.err)
	}
	if len(r.b) > 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errCodec, len(r.b))
	}
	if s.State > StateCancelled {
		return nil, fmt.Errorf("%w: state %d", errCodec, s.State)
	}
	for _, e := range s.seen {
		if e.sender >= int32(len(s.Participants)) || e.sender < -int32(len(s.outsiders())) {
			return nil, fmt.Errorf("%w: sender index %d out of range", errCodec, e.sender)
		}
	}
	if kind == policyUnknown {
		if canonical == "" {
			return nil, fmt.Errorf("%w: an unknown policy without an id", errCodec)
		}
		s.Policy = UnknownPolicy(canonical)
	} else if canonical != "" {
		g, err := bind(canonical)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errCodec, err)
		}
		s.Policy = g
	}
	return s, nil
}

func (s *Session) decodeMode(r *reader, version byte) {
	switch tag := r.byte(); tag {
	case tagNone:
	case tagTask:
		t := &taskState{taskID: r.str(), requested: r.bool(), requestedAssignee: s.name(r.str()), active: s.name(r.str()), rejected: rareOf(r.strs())}
		rep := slices.Index(reportNames[:], r.str())
		if rep < 0 {
			r.fail("unknown task report")
			rep = 0
		}
		t.report, t.hasOutput, t.completionID = report(rep), r.bool(), r.str()
		s.modal = t
	case tagHandoff:
		h := &handoffState{}
		for range r.count(5) {
			o := offer{id: r.str(), target: r.str(), owner: r.str(), disposition: r.byte(), offeredAtMs: r.int()}
			o.offeredByMs = o.offeredAtMs
			if version >= codecV3 {
				o.offeredByMs = r.int()
			}
			if o.offeredByMs < o.offeredAtMs {
				r.fail("an offer's latest time before its earliest")
			}
			if int(o.disposition) >= len(dispositionNames) {
				r.fail("unknown offer disposition")
			}
			h.add(o) // the first in the state's own storage, as Step leaves it
		}
		s.modal = h
	case tagDecision:
		d := &decisionState{phase: r.byte()}
		if int(d.phase) >= len(decisionPhases) {
			r.fail("unknown decision phase")
		}
		if n := r.count(2); n > 0 {
			d.proposals = make([]dProposal, n)
			for i := range d.proposals {
				d.proposals[i] = dProposal{id: r.str(), sender: r.str()}
			}
		}
		if n := r.count(11); n > 0 {
			d.evaluations = make([]dEvaluation, n)
			for i := range d.evaluations {
				d.evaluations[i] = dEvaluation{proposal: r.str(), recommendation: r.str(), sender: r.str(), confidence: math.Float64frombits(r.u64())}
			}
		}
		if n := r.count(3); n > 0 {
			d.objections = make([]dObjection, n)
			for i := range d.objections {
				d.objections[i] = dObjection{proposal: r.str(), severity: r.str(), sender: r.str()}
			}
		}
		if n := r.count(3); n > 0 {
			d.votes = make([]dVote, n)
			for i := range d.votes {
				d.votes[i] = dVote{proposal: r.str(), voter: r.str(), vote: r.str()}
			}
		}
		s.modal = d
	case tagProposal:
		p := &proposalState{}
		if n := r.count(4); n > 0 {
			p.proposals = make([]pProposal, n)
			for i := range p.proposals {
				p.proposals[i] = pProposal{id: r.str(), proposer: r.str(), supersedes: r.str(), withdrawn: r.bool()}
			}
		}
		if n := r.count(2); n > 0 {
			p.accepts = make([]pAccept, n)
			for i := range p.accepts {
				p.accepts[i] = pAccept{sender: r.str(), proposal: r.str()}
			}
		}
		p.terminalRejects = r.strs()
		p.counters = int(r.int())
		s.modal = p
	case tagQuorum:
		q := &quorumState{requested: r.bool(), requestID: r.str()}
		req := r.uint()
		if req > math.MaxUint32 {
			r.fail("quorum threshold out of range")
		}
		q.required = uint32(req)
		if n := r.count(2); n > 0 {
			q.ballots = make([]ballot, n)
			for i := range q.ballots {
				q.ballots[i] = ballot{sender: r.str(), choice: r.str()}
			}
		}
		s.modal = q
	case tagMultiRound:
		m := &multiRoundState{round: int(r.int())}
		if n := r.count(2); n > 0 {
			m.contributions = make([]contribution, n)
			for i := range m.contributions {
				m.contributions[i] = contribution{sender: r.str(), value: r.str()}
			}
		}
		m.converged = r.bool()
		s.modal = m
	default:
		r.fail(fmt.Sprintf("unknown mode tag %d", tag))
	}
}

// emptyMode replaces a decoded mode state whose encoding enc is the empty
// state's with the empty state (see modal), as SessionStart leaves it: a
// replica holds a session that has only started as cheaply as the one that
// started it.
func (s *Session) emptyMode(enc []byte) {
	var empty modal
	switch s.modal.(type) {
	case *taskState:
		empty = (*taskState)(nil)
	case *handoffState:
		empty = (*handoffState)(nil)
	case *decisionState:
		empty = (*decisionState)(nil)
	case *proposalState:
		empty = (*proposalState)(nil)
	case *quorumState:
		empty = (*quorumState)(nil)
	case *multiRoundState:
		empty = (*multiRoundState)(nil)
	default:
		return
	}
	var buf [32]byte
	w := writer{b: buf[:0]}
	(&Session{modal: empty}).appendMode(&w)
	if string(w.b) == string(enc) {
		s.modal = empty
	}
}

// bindCanonical binds the policy a session was encoded with from its
// canonical JSON; policy.default, the common case, is not parsed again.
func bindCanonical(canonical string) (*Governance, error) {
	if canonical == defaultGovernance.Canonical {
		return defaultGovernance, nil
	}
	var d struct {
		ID    string         `json:"id"`
		SV    uint32         `json:"sv"`
		Rules map[string]any `json:"rules"`
	}
	if err := json.Unmarshal([]byte(canonical), &d); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Bind(PolicyDescriptor{PolicyID: d.ID, SchemaVersion: d.SV, Rules: d.Rules})
}

// writer appends the encoding's primitives: varints, length-prefixed strings.
type writer struct{ b []byte }

func (w *writer) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) strs(l []string) {
	w.uint(uint64(len(l)))
	for _, s := range l {
		w.str(s)
	}
}

func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// reader reads what writer wrote. After the first error every read returns
// a zero value and the error stays.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
	r.b = nil
}

func (r *reader) byte() byte { return r.take(1)[0] }

func (r *reader) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad boolean")
	return false
}

func (r *reader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads a zig-zag varint as binary.AppendVarint writes it.
func (r *reader) int() int64 {
	u := r.uint()
	return int64(u>>1) ^ -int64(u&1)
}

// take returns the next n bytes (zeros once the input is exhausted).
func (r *reader) take(n int) []byte {
	if len(r.b) < n {
		r.fail("truncated")
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }

func (r *reader) str() string {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail("string longer than the input")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a list length, refusing one that the remaining input cannot
// hold at min bytes an element (so a forged length allocates nothing).
func (r *reader) count(min int) int {
	n := r.uint()
	if n > uint64(len(r.b)/min) {
		r.fail("list longer than the input")
		return 0
	}
	return int(n)
}

func (r *reader) strs() []string {
	n := r.count(1)
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = r.str()
	}
	return l
}

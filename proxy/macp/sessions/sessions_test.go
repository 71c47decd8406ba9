package sessions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// memSessions is a Store in memory, as Redis keeps it (proxy/state).
type memSessions struct {
	mu       sync.Mutex
	data     map[string][]byte
	versions map[string]string
	seq      int
	down     bool
	// stale makes Load report a cached version as current whatever the
	// store holds: the coherence check switched off.
	stale bool
	// beforeCommit runs (unlocked) before each Commit.
	beforeCommit              func()
	loads, commits, conflicts int
}

func newMemSessions() *memSessions {
	return &memSessions{data: map[string][]byte{}, versions: map[string]string{}}
}

func (m *memSessions) Load(_ context.Context, id, have string) ([]byte, string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	if m.down {
		return nil, "", false, errDown
	}
	v := m.versions[id]
	if v == have || m.stale && have != "" {
		return nil, have, false, nil
	}
	return m.data[id], v, true, nil
}

func (m *memSessions) Commit(_ context.Context, id, have string, data []byte, _ time.Time, _ string, _ int) (string, []byte, bool, int, error) {
	if f := m.beforeCommit; f != nil {
		f()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits++
	if m.down {
		return "", nil, false, 0, errDown
	}
	if v := m.versions[id]; v != have {
		m.conflicts++
		return v, m.data[id], false, 0, nil
	}
	m.seq++
	v := "v" + strconv.Itoa(m.seq)
	m.data[id], m.versions[id] = data, v
	return v, nil, true, 0, nil
}

func (m *memSessions) restart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data, m.versions = map[string][]byte{}, map[string]string{}
}

// macpReplicas are n Enforcers sharing one session store, as ext_authz replicas
// do; each commits on allow.
func macpReplicas(t testing.TB, n int, store Store, rb Rebuilder) []*Decider {
	t.Helper()
	return observedReplicas(t, n, store, rb, nil)
}

// conflicts counts what ConflictObserver is told.
type conflicts struct{ n atomic.Int64 }

func (c *conflicts) Decided(proxy.Decision, time.Duration) {}
func (c *conflicts) SessionConflict()                      { c.n.Add(1) }

func observedReplicas(t testing.TB, n int, store Store, rb Rebuilder, o proxy.Observer) []*Decider {
	t.Helper()
	out := make([]*Decider, n)
	for i := range out {
		c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
		opts := proxy.Options{Authenticator: devAuth(t), Policies: engine(t), Now: c.now, Observer: o}
		m := Options{Store: store}
		if rb != nil {
			m.Rebuilder = rb
		}
		e, err := build(proxy.Config{}, opts, m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = e
	}
	return out
}

// decideAll decides each message on the replica its index picks, committing
// on allow as ext_authz does, and returns the answers.
func decideAll(t testing.TB, rs []*Decider, msgs []*macpv1.Envelope) []string {
	t.Helper()
	var out []string
	for i, m := range msgs {
		d, err := rs[i%len(rs)].Enforce(context.Background(), req(m))
		if err != nil {
			t.Fatalf("#%d %s: %v", i, m.GetMessageType(), err)
		}
		d.Settle(d.Allow)
		out = append(out, m.GetMessageType()+" "+strconv.FormatBool(d.Allow)+" "+string(d.Code))
	}
	return out
}

func taskTranscript(t testing.TB, sid string) []*macpv1.Envelope {
	update := mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})
	return []*macpv1.Envelope{
		env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: []string{planner, worker, other}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000,
		})),
		env(sid, planner, "TaskRequest", "req", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker})),
		env(sid, worker, "TaskAccept", "acc", mustMarshal(t, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker})),
		env(sid, worker, "TaskUpdate", "u1", update),
		env(sid, other, "TaskComplete", "forged", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker})),
		env(sid, worker, "TaskComplete", "done", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker})),
		env(sid, other, "TaskUpdate", "acc", update),
		env(sid, planner, "Commitment", "c1", mustMarshal(t, &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "task.completed", AuthorityScope: "s", Reason: "r", ModeVersion: "1.0.0", ConfigurationVersion: "c", OutcomePositive: true})),
		env(sid, worker, "TaskUpdate", "u2", update),
	}
}

// TestSharedSessionsDecideAsOne: consecutive messages of a session spread
// over three replicas are decided as one replica decides them, and not when
// the replicas trust their caches without checking the store's version.
func TestSharedSessionsDecideAsOne(t *testing.T) {
	sid := sessionID(50)
	msgs := taskTranscript(t, sid)
	want := decideAll(t, macpReplicas(t, 1, nil, nil), msgs)
	store := newMemSessions()
	got := decideAll(t, macpReplicas(t, 3, store, nil), msgs)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("#%d: three replicas %q, one %q", i, got[i], want[i])
		}
	}
	if store.commits == 0 || store.loads+store.commits < len(msgs) {
		t.Errorf("store used %d loads, %d commits for %d decisions: some decision did not check the store", store.loads, store.commits, len(msgs))
	}

	incoherent := newMemSessions()
	incoherent.stale = true
	rs := macpReplicas(t, 3, incoherent, nil)
	differ := false
	for i, g := range decideAll(t, rs, taskTranscript(t, sessionID(51))) {
		differ = differ || g != want[i]
	}
	if !differ {
		t.Fatal("replicas that never reload decided as one: the test cannot see a stale cache")
	}
}

// TestSharedSessionRace: two replicas decide conflicting Commitments of one
// session at once; the loser's compare-and-set fails, it decides again on
// the winner's state and refuses: exactly one is allowed.
func TestSharedSessionRace(t *testing.T) {
	store := newMemSessions()
	seen := &conflicts{}
	rs := observedReplicas(t, 2, store, nil, seen)
	sid := sessionID(52)
	msgs := taskTranscript(t, sid)
	decideAll(t, rs, msgs[:6])
	commit := func(id string) *macpv1.Envelope {
		return env(sid, planner, "Commitment", id, mustMarshal(t, &macpv1.CommitmentPayload{CommitmentId: id, Action: "task.completed", AuthorityScope: "s", Reason: "r", ModeVersion: "1.0.0", ConfigurationVersion: "c", OutcomePositive: true}))
	}
	var other proxy.Decision
	var fired atomic.Bool
	store.beforeCommit = func() {
		if fired.CompareAndSwap(false, true) { // B commits between A's load and A's commit
			var err error
			if other, err = rs[1].Enforce(context.Background(), req(commit("c-b"))); err != nil {
				t.Error(err)
			}
			other.Settle(other.Allow)
		}
	}
	d, err := rs[0].Enforce(context.Background(), req(commit("c-a")))
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(d.Allow)
	if !other.Allow || d.Allow || d.Code != rules.CodeSessionNotOpen || store.conflicts != 1 || seen.n.Load() != 1 {
		t.Fatalf("B allowed=%v, A allowed=%v %s, conflicts %d (observed %d): want exactly B's commitment", other.Allow, d.Allow, d.Code, store.conflicts, seen.n.Load())
	}
}

func TestSharedSessionFaults(t *testing.T) {
	store := newMemSessions()
	rb := &fakeRebuilder{state: map[string]*macp.Session{}}
	rs := macpReplicas(t, 2, store, rb)
	sid := sessionID(53)
	msgs := taskTranscript(t, sid)
	decideAll(t, rs, msgs[:3])

	// Another replica always commits first: retries for contentionBudget,
	// then an error.
	store.beforeCommit = func() { store.mu.Lock(); store.versions[sid] += "x"; store.mu.Unlock() }
	began := time.Now()
	if _, err := rs[0].Enforce(context.Background(), req(msgs[3])); !errors.Is(err, ErrSessionContention) || time.Since(began) < contentionBudget {
		t.Fatalf("endless contention: %v after %d conflicts in %v", err, store.conflicts, time.Since(began))
	}
	store.beforeCommit = nil

	// Down: could not decide.
	store.down = true
	if _, err := rs[1].Enforce(context.Background(), req(msgs[3])); !errors.Is(err, errDown) {
		t.Fatalf("store down: %v", err)
	}
	store.down = false

	// Restarted empty: the session is rebuilt from the runtime, which lost
	// it too here: SESSION_NOT_FOUND, on both replicas.
	store.restart()
	for i, r := range rs {
		calls := rb.calls
		d, err := r.Enforce(context.Background(), req(msgs[3]))
		if err != nil || d.Allow || d.Code != rules.CodeSessionNotFound || rb.calls != calls+1 {
			t.Fatalf("replica %d after an empty restart: %v %+v (rebuilds %d)", i, err, d, rb.calls-calls)
		}
	}
}

// TestSharedSessionRoundTrips: a replica whose cache is current pays one
// store operation per message: the compare-and-set of an allow, the version
// check of a denial; only a session it does not hold is read first.
func TestSharedSessionRoundTrips(t *testing.T) {
	store := newMemSessions()
	r := macpReplicas(t, 1, store, nil)
	msgs := taskTranscript(t, sessionID(54))
	got := decideAll(t, r, msgs[:5]) // start, request, accept, update; a forged completion
	if got[4] != "TaskComplete false FORBIDDEN" {
		t.Fatalf("forged completion: %s", got[4])
	}
	if store.loads != 2 || store.commits != 4 {
		t.Fatalf("%d loads and %d commits for 4 allows and 1 denial: want the start's read, 4 commits and the denial's check", store.loads, store.commits)
	}
}

// TestSharedSessionLongContention: another replica commits the session
// first at each of a decision's first 40 attempts (the other replica's queue
// of the session's messages, as with many in flight on it), then stops:
// the allowed TaskUpdate is allowed, not refused for contention (8 attempts
// refused it), and commits once.
func TestSharedSessionLongContention(t *testing.T) {
	store := newMemSessions()
	rs := macpReplicas(t, 2, store, nil)
	sid := sessionID(55)
	msgs := taskTranscript(t, sid)
	decideAll(t, rs, msgs[:3])
	const losses = 40
	n := 0
	store.beforeCommit = func() {
		if n++; n <= losses {
			store.mu.Lock()
			store.versions[sid] += "x"
			store.mu.Unlock()
		}
	}
	commits := store.commits
	d, err := rs[0].Enforce(context.Background(), req(msgs[3]))
	if err != nil || !d.Allow {
		t.Fatalf("after %d lost compare-and-sets: %v %+v", store.conflicts, err, d)
	}
	d.Settle(d.Allow)
	if store.conflicts != losses || store.commits != commits+losses+1 {
		t.Fatalf("%d conflicts and %d commits: want %d losses, then one commit", store.conflicts, store.commits-commits, losses)
	}
}

// TestContentionLost: the first retry after a lost race does not wait (the
// winner's state is current); later ones wait, a random time up to the cap;
// the decision gives up with ErrSessionContention once it has lost for the
// budget, and with ctx's error when the request ends.
func TestContentionLost(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		budget  time.Duration
		losses  int
		want    error
		longest time.Duration
	}{
		{"first loss, ended request", ended, time.Hour, 1, nil, conflictCap},
		{"second loss, ended request", ended, time.Hour, 2, context.Canceled, conflictCap},
		{"many losses, live request", context.Background(), time.Hour, 30, nil, 30 * conflictCap},
		{"budget spent", context.Background(), 0, 2, ErrSessionContention, conflictCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A random wait of zero may still win the race with ctx.Done;
			// a canceled context must win within a few tries.
			var err error
			for range 64 {
				var c contention
				began := time.Now()
				for range tc.losses {
					if err = c.lost(tc.ctx, tc.budget); err != nil {
						break
					}
				}
				// the bound on each wait is lossWait's (below); the clock
				// only catches a wait of another order (a shared machine's
				// scheduler may add tens of milliseconds to 30 timers)
				if d := time.Since(began); d > tc.longest+time.Second {
					t.Fatalf("%d losses waited %v, want at most %v", tc.losses, d, tc.longest)
				}
				if err != nil || tc.want == nil {
					break
				}
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("%v, want %v", err, tc.want)
			}
		})
	}
}

// TestLossWait: the random wait after a lost compare-and-set starts at
// conflictStep on the second loss, doubles, and never passes conflictCap,
// however many losses (no overflow of the shift).
func TestLossWait(t *testing.T) {
	for attempt, want := range map[int]time.Duration{2: conflictStep, 3: 2 * conflictStep, 4: 4 * conflictStep, 5: conflictCap, 9: conflictCap, 10: conflictCap, 70: conflictCap, 1 << 20: conflictCap} {
		if got := lossWait(attempt); got != want {
			t.Errorf("loss %d: longest wait %v, want %v", attempt, got, want)
		}
	}
}

// TestSharedUnknownPolicy: a session one replica rebuilt with a governance
// policy Warden cannot know is stored so (the session encoding's version 2),
// and another replica that loads it refuses what reads the definition as the
// first would, rather than deciding on a definition of its own.
func TestSharedUnknownPolicy(t *testing.T) {
	sid := sessionID(90)
	start := env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
		Participants: []string{planner, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, PolicyVersion: "policy.p"}))
	start.TimestampUnixMs = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixMilli()
	rebuilt := macp.StartBound(nil, start, planner, macp.UnknownPolicy("policy.p"), start.TimestampUnixMs).Next
	rb := &fakeRebuilder{state: map[string]*macp.Session{sid: rebuilt}}
	r := macpReplicas(t, 2, newMemSessions(), rb)
	d, err := r[0].Enforce(context.Background(), req(env(sid, planner, "TaskRequest", "r", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker}))))
	if err != nil || !d.Allow {
		t.Fatalf("TaskRequest on the rebuilt session: %v %+v", err, d)
	}
	d.Settle(true)
	d, err = r[1].Enforce(context.Background(), req(env(sid, planner, "Commitment", "c", mustMarshal(t, &macpv1.CommitmentPayload{CommitmentId: "c1",
		Action: "task.completed", AuthorityScope: "s", Reason: "r", OutcomePositive: true, ModeVersion: "1.0.0", ConfigurationVersion: "c"}))))
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(false)
	if d.Allow || d.Reason != rules.ReasonBoundPolicyUnknown || rb.calls != 1 {
		t.Errorf("the other replica's Commitment: %+v (rebuilds %d); want refused as bound_policy_unknown from the shared state", d, rb.calls)
	}
}

// TestSharedTableEvicts: with the sessions in a shared store (an ext_authz
// fleet) a replica's table is the store's cache, so a live session may leave
// it (it is loaded again from the store), with or without a runtime to
// rebuild from. Before, without macp.upstream the table kept every live
// session: one agent starting enforcer.sessions sessions (TTL up to 24 h)
// refused every agent's SessionStart on that replica RESOURCE_EXHAUSTED, and
// ext_authz's per-principal cap on starts does not apply with a store.
func TestSharedTableEvicts(t *testing.T) {
	const size = 8
	c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	x, err := build(proxy.Config{Sessions: size}, proxy.Options{Authenticator: devAuth(t), Policies: engine(t), Now: c.now}, Options{Store: newMemSessions()})
	if err != nil {
		t.Fatal(err)
	}
	start := func(sid, sender string) proxy.Decision {
		t.Helper()
		d, err := x.Enforce(context.Background(), req(env(sid, sender, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: []string{sender, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 86_400_000}))))
		if err != nil {
			t.Fatal(err)
		}
		d.Settle(d.Allow)
		return d
	}
	allowed := 0
	for i := range 2 * size {
		if start(sessionID(900+i), other).Allow {
			allowed++
		}
	}
	if allowed != 2*size {
		t.Errorf("other's %d starts: %d allowed, want all (the table evicts its own oldest)", 2*size, allowed)
	}
	if d := start(sessionID(950), planner); !d.Allow {
		t.Errorf("after other's %d starts, planner's SessionStart: %s %s, want allowed", 2*size, d.Code, d.Reason)
	}
	// other's first session left the table; it is decided on the store's state
	d, err := x.Enforce(context.Background(), req(env(sessionID(900), other, "TaskRequest", "r", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker}))))
	if err != nil || !d.Allow {
		t.Errorf("a message on other's evicted session: %v %+v, want allowed on the store's state", err, d)
	}
	d.Settle(d.Allow)
	if dup := start(sessionID(900), planner); dup.Allow {
		t.Errorf("a second SessionStart of other's evicted session by planner: allowed, want refused (the store holds it)")
	}
}

// TestSharedStoreShares: two ext_authz replicas on one real Redis, each
// initiator holding at most enforcer.sessions_per_principal sessions there
// (the owner table's rule, K4's for tasks). other starting sessions without
// end drops its own least recently committed ones from the store, never
// planner's; a message on a dropped session is refused as unknown on both
// replicas (the one that caches it too: its commit finds no entry), not
// allowed on a state the fleet no longer holds. Before, Redis kept all 12 of
// other's sessions until their TTL (24 h).
func TestSharedStoreShares(t *testing.T) {
	const share, starts = 4, 12
	stores := redisStores(t, 2)
	rs := make([]*Decider, len(stores))
	drops := &shareDrops{}
	for i, s := range stores {
		x, err := build(proxy.Config{Sessions: 64, SessionsPerPrincipal: share}, proxy.Options{Authenticator: devAuth(t), Policies: engine(t), Now: time.Now, Observer: drops}, Options{Store: s})
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = x
	}
	decide := func(x *Decider, e *macpv1.Envelope) proxy.Decision {
		t.Helper()
		d, err := x.Enforce(context.Background(), req(e))
		if err != nil {
			t.Fatal(err)
		}
		d.Settle(d.Allow)
		return d
	}
	start := func(x *Decider, sid, sender string) proxy.Decision {
		return decide(x, env(sid, sender, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: []string{sender, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 86_400_000})))
	}
	held := func(sid string) bool {
		t.Helper()
		_, v, _, err := stores[0].Load(context.Background(), sid, "")
		if err != nil {
			t.Fatal(err)
		}
		return v != ""
	}
	if d := start(rs[0], sessionID(960), planner); !d.Allow {
		t.Fatalf("planner's start: %s %s", d.Code, d.Reason)
	}
	for i := range starts {
		if d := start(rs[i%2], sessionID(900+i), other); !d.Allow {
			t.Fatalf("other's start %d: %s %s", i, d.Code, d.Reason)
		}
	}
	var kept []int
	for i := range starts {
		if held(sessionID(900 + i)) {
			kept = append(kept, i)
		}
	}
	if want := []int{starts - 4, starts - 3, starts - 2, starts - 1}; fmt.Sprint(kept) != fmt.Sprint(want) {
		t.Errorf("other's sessions in Redis after %d starts: %v, want its %d most recent %v", starts, kept, share, want)
	}
	if !held(sessionID(960)) {
		t.Error("planner's session dropped by other's starts")
	}
	if got := drops.n.Load(); got != starts-share {
		t.Errorf("%d drops of macp_sessions in redis counted, want %d (warden_share_drops_total)", got, starts-share)
	}
	// other's oldest: started on replica 0, which still caches it.
	for i, x := range rs {
		d := decide(x, env(sessionID(900), other, "TaskRequest", fmt.Sprint("r", i), mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker})))
		if d.Allow || d.Code != rules.CodeSessionNotFound {
			t.Errorf("replica %d, a message on other's dropped session: allowed=%v %s, want refused %s", i, d.Allow, d.Code, rules.CodeSessionNotFound)
		}
	}
	for i, x := range rs {
		d := decide(x, env(sessionID(900+starts-1-i), other, "TaskRequest", "r", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker})))
		if !d.Allow {
			t.Errorf("replica %d, a message on one of other's kept sessions: %s %s", i, d.Code, d.Reason)
		}
	}
	if d := decide(rs[1], env(sessionID(960), planner, "TaskRequest", "r", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker}))); !d.Allow {
		t.Errorf("planner's message: %s %s", d.Code, d.Reason)
	}

	// A replica with a runtime (--macp-upstream) rebuilds a dropped session
	// from it, decides on that, and commits it again, charged again.
	sid := sessionID(901)
	began := env(sid, other, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
		Participants: []string{other, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 86_400_000}))
	began.TimestampUnixMs = time.Now().UnixMilli()
	rb := &fakeRebuilder{state: map[string]*macp.Session{sid: macp.StartBound(nil, began, other, nil, began.TimestampUnixMs).Next}}
	withRuntime, err := build(proxy.Config{Sessions: 64, SessionsPerPrincipal: share}, proxy.Options{Authenticator: devAuth(t), Policies: engine(t), Now: time.Now}, Options{Store: stores[0], Rebuilder: rb})
	if err != nil {
		t.Fatal(err)
	}
	if d := decide(withRuntime, env(sid, other, "TaskRequest", "r", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker}))); !d.Allow || rb.calls != 1 {
		t.Errorf("a message on a dropped session, with a runtime: %s %s (rebuilds %d), want rebuilt and allowed", d.Code, d.Reason, rb.calls)
	}
	if !held(sid) || held(sessionID(900+starts-4)) {
		t.Errorf("the rebuilt session committed again (held %v), other's least recently committed dropped for it (held %v)", held(sid), held(sessionID(900+starts-4)))
	}
}

// shareDrops counts the MACP sessions the shared store dropped for a share
// (owners.ShareObserver, as warden_share_drops_total).
type shareDrops struct{ n atomic.Int64 }

func (*shareDrops) Decided(proxy.Decision, time.Duration) {}
func (c *shareDrops) ShareDropped(table, store string, n int) {
	if table == owners.TableMACPSessions && store == owners.StoreRedis {
		c.n.Add(int64(n))
	}
}

package extauthz

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules/macp"
)

// sharedSessions is a SessionStore in memory, as Redis keeps it
// (proxy/state); incoherent makes Load report a cached version as current
// whatever the store holds: replicas load a session they do not hold but
// never notice that another replica changed it (the coherence check
// switched off).
type sharedSessions struct {
	mu         sync.Mutex
	data       map[string][]byte
	versions   map[string]string
	seq        int
	incoherent bool
}

func (m *sharedSessions) Load(_ context.Context, id, have string) ([]byte, string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.versions[id]; v != have && (have == "" || !m.incoherent) {
		return m.data[id], v, true, nil
	}
	return nil, have, false, nil
}

func (m *sharedSessions) Commit(_ context.Context, id, have string, data []byte, _ time.Time, _ string, _ int) (string, []byte, bool, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.versions[id]; v != have {
		return v, m.data[id], false, 0, nil
	}
	m.seq++
	v := strconv.Itoa(m.seq)
	m.data[id], m.versions[id] = data, v
	return v, nil, true, 0, nil
}

// replicaFailures replays a transcript through Check on three replicas in
// turn, sharing store, and returns what differs from the transcript.
func replicaFailures(t *testing.T, engine *policies.Engine, file string, store *sharedSessions) []string {
	t.Helper()
	ctx := context.Background()
	tr, err := replay.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Time{}
	var srvs []*Server
	for range 3 {
		enf, err := replay.NewReplica(engine, tr, func() time.Time { return clock }, store)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(Config{Listen: "unused"}, enf, nil)
		if err != nil {
			t.Fatal(err)
		}
		srvs = append(srvs, srv)
	}
	i := 0
	res, err := replay.Evaluate(ctx, tr, func(ctx context.Context, st replay.Step) (proxy.Decision, error) {
		clock = st.At
		resp, err := srvs[i%len(srvs)].Check(ctx, toRequest(t, st))
		i++
		if err != nil {
			return proxy.Decision{}, err
		}
		return decision(resp), nil
	}, func() (*macp.Session, error) { // the state the replicas share
		store.mu.Lock()
		b, ok := store.data[tr.SessionID]
		store.mu.Unlock()
		if !ok {
			return nil, nil
		}
		s, err := macp.DecodeSession(b)
		if err != nil {
			return nil, err
		}
		return s.Expire(clock.UnixMilli()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Failures
}

// TestTranscriptsThroughReplicas replays every transcript through three
// ext_authz replicas sharing sessions, each step on the next replica: every
// decision and the final state are the transcript's, as with one replica.
// With the version check switched off (each replica trusting its cache) the
// same transcripts fail: the test sees a replica deciding on stale state.
func TestTranscriptsThroughReplicas(t *testing.T) {
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := replay.Transcripts("../../testdata/macp/conformance", "../../test/conformance", "../../test/attacks/macp")
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, failure := range replicaFailures(t, engine, f, &sharedSessions{data: map[string][]byte{}, versions: map[string]string{}}) {
				t.Error(failure)
			}
			if len(replicaFailures(t, engine, f, &sharedSessions{data: map[string][]byte{}, versions: map[string]string{}, incoherent: true})) > 0 {
				stale++
			}
		})
	}
	if stale == 0 {
		t.Fatal("replicas that never reload passed every transcript: the test cannot see a stale cache")
	}
	t.Logf("without the version check, %d of %d transcripts fail through three replicas", stale, len(files))
}

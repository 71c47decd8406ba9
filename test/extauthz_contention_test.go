package test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestExtAuthzReplicasContention: many allowed TaskUpdates of a session, 16
// in flight at once and alternating between two ext_authz replicas on Redis,
// session after session (the bench's extauthz-redis at saturation): every one
// is allowed, none is refused because the other replica committed first, and
// each session Redis holds counts each exactly once (the assignee's accepted
// messages: the TaskAccept and every update).
func TestExtAuthzReplicasContention(t *testing.T) {
	rd := startRedis(t)
	var replicas []checkClient
	for _, name := range []string{"warden-a", "warden-b"} {
		addr := freeAddr(t)
		start(t, name, addr, nil, wardenBinary(t), "serve", "--extauthz-listen", addr, "--auth", "dev", "--insecure-dev-auth",
			"--log-level", "warn", "--state", rd.url(),
			// no runtime behind: its rate limits, which ext_authz mirrors (security.md Y3), are not this test's
			"--macp-message-limit-per-minute", "0", "--macp-session-start-limit-per-minute", "0")
		replicas = append(replicas, dialCheck(t, name, addr))
	}
	const sessions, perSession, inFlight = 40, 100, 16
	const updates = sessions * perSession
	sids := make([]string, sessions)
	msgs := make([][]*macpv1.Envelope, sessions)
	for k := range sids {
		sids[k] = newSession()
		msgs[k] = taskMessages(sids[k])
		for i, m := range msgs[k][:3] {
			if got := replicas[i%2].send(m); got != "allow" {
				t.Fatalf("%s: %s", m.GetMessageType(), got)
			}
		}
	}
	refused := make([]string, updates)
	next := make(chan int)
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for i := range next {
				e := proto.Clone(msgs[i/perSession][3]).(*macpv1.Envelope)
				e.MessageId = "up-" + strconv.Itoa(i)
				e.Payload, _ = proto.Marshal(&taskv1.TaskUpdatePayload{TaskId: "t1", Status: "working", Progress: float64(i%perSession) / perSession})
				if got := replicas[i%2].send(e); got != "allow" {
					refused[i] = got
				}
			}
		})
	}
	began := time.Now()
	for i := range updates {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Logf("%d updates, %d in flight, through two replicas: %.0f/s", updates, inFlight, updates/time.Since(began).Seconds())
	n := 0
	for i, r := range refused {
		if r != "" {
			if n < 5 {
				t.Errorf("update %d (replica %d): %s", i, i%2, r)
			}
			n++
		}
	}
	if n > 0 {
		t.Errorf("%d of %d allowed updates refused under contention between the replicas", n, updates)
	}

	cl := redis.NewClient(&redis.Options{Addr: rd.addr})
	defer cl.Close()
	for k, sid := range sids {
		b, err := cl.HGet(context.Background(), "warden:macp:session:"+sid, "d").Bytes()
		if err != nil {
			t.Fatal(err)
		}
		s, err := macp.DecodeSession(b)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		for _, r := range refused[k*perSession : (k+1)*perSession] {
			if r == "" {
				want++
			}
		}
		if got := s.MessageCount("worker"); got != want {
			t.Errorf("session %d counts %d accepted messages of the worker, want %d (the TaskAccept and each allowed update once)", k, got, want)
		}
	}
}

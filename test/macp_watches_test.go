package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestMACPWatchesDoNotStarveStreams (issue 24 item 20): principals holding
// their maximum of idle WatchSignals filled the relayed-stream cap and
// every StreamSession was refused. Watches now hold at most their share
// (max_watches, a few per principal), so StreamSession is still admitted.
// Against the MACP runtime; before, the StreamSession was refused.
func TestMACPWatchesDoNotStarveStreams(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--max-streams", "30", "--max-streams-per-principal", "8")
	c := dialMACP(t, warden)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := macpv1.NewMACPRuntimeServiceClient(c.conn)
	held := 0
	for p := range 4 {
		for range 8 {
			w, err := mc.WatchSignals(metadata.AppendToOutgoingContext(ctx, "authorization", fmt.Sprintf("Bearer watcher-%d", p)), &macpv1.WatchSignalsRequest{})
			if err != nil {
				continue
			}
			if _, err := w.Header(); err == nil {
				// refused watches end at once; an open one waits
				rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				done := make(chan error, 1)
				go func() { _, err := w.Recv(); done <- err }()
				select {
				case <-done:
				case <-rctx.Done():
					held++
				}
				rcancel()
			}
		}
	}
	t.Logf("idle watches held: %d", held)
	st, err := mc.StreamSession(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer planner"))
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession()
	if err := st.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: sid}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	done := make(chan error, 1)
	go func() { _, err := st.Recv(); done <- err }()
	select {
	case err := <-done:
		// an answer (the runtime's error for an unknown session) is
		// admission; a status is not
		if err != nil {
			t.Fatalf("StreamSession beside %d idle watches: %v", held, err)
		}
	case <-rctx.Done():
	}
}

// TestMACPWatchesOnBothDoors (issue 28 item 1): WatchSessions and
// WatchSignals through `--transport grpc` and `--transport relay`, in front
// of the real runtime, show the same: a participant's watch sees the
// lifecycle of its own session, an outsider's nothing of it (the runtime
// sends every session's events to every watcher), and a watch without
// credentials is refused. The relay answers the watches itself now
// (proxy/macp TestRelayAnswersItself shows it); the grpc-go door is the
// oracle.
func TestMACPWatchesOnBothDoors(t *testing.T) {
	got := map[string]map[string]string{}
	eachTransport(t, func(t *testing.T) {
		c := dialMACP(t, startWarden(t, startRuntime(t), "--auth", "dev", "--insecure-dev-auth"))
		rt := macpv1.NewMACPRuntimeServiceClient(c.conn)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		sid := newSession()
		out := map[string]string{}
		// watch opens WatchSessions as who ("" without credentials) and
		// returns what it saw once stop ends it; event has a value after
		// each event.
		type seen struct {
			events []string
			err    error
		}
		event := make(chan struct{}, 1)
		watch := func(who string) (<-chan seen, error) {
			wctx := ctx
			if who != "" {
				wctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+who)
			}
			w, err := rt.WatchSessions(wctx, &macpv1.WatchSessionsRequest{})
			if err != nil {
				return nil, err
			}
			if _, err := w.Header(); err != nil {
				return nil, err
			}
			res := make(chan seen, 1)
			go func() {
				var s seen
				for {
					ev, err := w.Recv()
					if err != nil {
						s.err = err
						res <- s
						return
					}
					name := "another session"
					if ev.GetEvent().GetSession().GetSessionId() == sid {
						name = "the session"
					}
					s.events = append(s.events, ev.GetEvent().GetEventType().String()+" "+name)
					if who == "planner" {
						select {
						case event <- struct{}{}:
						default:
						}
					}
				}
			}()
			return res, nil
		}
		planner, err := watch("planner")
		if err != nil {
			t.Fatal(err)
		}
		mallory, err := watch("mallory")
		if err != nil {
			t.Fatal(err)
		}
		anon, err := watch("")
		if err == nil {
			s := <-anon
			err = s.err
		}
		out["WatchSessions, unauthenticated"] = status.Code(err).String()
		msgs := taskMessages(sid)
		c.mustAccept(msgs[0])
		c.mustAccept(msgs[1])
		// The participant's watch sees the session's event (after a fixed
		// second before: late on a loaded machine, it was missed); then
		// what must not come has half a second to come.
		select {
		case <-event:
		case <-time.After(15 * time.Second):
			t.Error("the participant's watch saw no event 15 s after the session started")
		}
		time.Sleep(500 * time.Millisecond)
		cancel()
		for who, ch := range map[string]<-chan seen{"planner": planner, "mallory": mallory} {
			s := <-ch
			out["WatchSessions, "+who] = fmt.Sprintf("%v %v", s.events, status.Code(s.err))
		}
		got[wardenTransport] = out
	})
	g, r := got["grpc"], got["relay"]
	if len(g) == 0 || len(r) == 0 {
		t.Fatal("a door's script did not run")
	}
	for name, want := range g {
		t.Logf("%-40s %s", name, want)
		if r[name] != want {
			t.Errorf("%s:\n grpc  %s\n relay %s", name, want, r[name])
		}
	}
	if !strings.Contains(g["WatchSessions, planner"], "the session") {
		t.Errorf("the participant's watch saw %s, want its session's events", g["WatchSessions, planner"])
	}
	if strings.Contains(g["WatchSessions, mallory"], "the session") {
		t.Errorf("the outsider's watch saw %s, want nothing of the session", g["WatchSessions, mallory"])
	}
	if g["WatchSessions, unauthenticated"] != "Unauthenticated" {
		t.Errorf("a watch without credentials: %s, want Unauthenticated", g["WatchSessions, unauthenticated"])
	}
}

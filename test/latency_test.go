package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// BenchmarkSend measures one Send of a TaskUpdate to the real runtime, direct
// and through Warden, in the same run; it reports the median and p99 of the
// round trips besides the mean.
func BenchmarkSend(b *testing.B) {
	// The runtime's own rate limit (600 messages and 60 starts a minute) would throttle the loop.
	direct := startRuntime(b, "MACP_MESSAGE_LIMIT_PER_MINUTE=10000000", "MACP_SESSION_START_LIMIT_PER_MINUTE=1000000")
	warden := startWarden(b, direct, "--auth", "dev", "--insecure-dev-auth", "--macp-message-limit-per-minute", "10000000", "--macp-session-start-limit-per-minute", "1000000")
	for _, target := range []struct{ name, addr string }{{"direct", direct}, {"warden", warden}} {
		b.Run(target.name, func(b *testing.B) {
			conn, err := grpc.NewClient(target.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			client := macpv1.NewMACPRuntimeServiceClient(conn)
			var sid string
			send := func(as, typ, id string, payload proto.Message) *macpv1.Ack {
				p, err := proto.Marshal(payload)
				if err != nil {
					b.Fatal(err)
				}
				ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+as)
				resp, err := client.Send(ctx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{
					MacpVersion: "1.0", Mode: taskMode, MessageType: typ, MessageId: id, SessionId: sid, Sender: as,
					TimestampUnixMs: time.Now().UnixMilli(), Payload: p}})
				if err != nil {
					b.Fatal(err)
				}
				return resp.GetAck()
			}
			// A new session every 100 updates: the runtime slows down as one
			// session's history grows, which is not what is measured here.
			newSession := func(n int) {
				sid = fmt.Sprintf("%08x-0000-4000-8000-%012x", time.Now().UnixNano()&0xffffffff, n)
				for _, s := range []struct {
					as, typ string
					p       proto.Message
				}{
					{"planner", "SessionStart", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 3_600_000}},
					{"planner", "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: "worker"}},
					{"worker", "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t", Assignee: "worker"}},
				} {
					if a := send(s.as, s.typ, s.typ, s.p); !a.GetOk() {
						b.Fatalf("%s: %v", s.typ, a.GetError())
					}
				}
			}
			update := &taskv1.TaskUpdatePayload{TaskId: "t", Progress: 0.5}
			var lat []time.Duration
			i := 0
			for b.Loop() {
				if i%100 == 0 {
					b.StopTimer()
					newSession(i)
					b.StartTimer()
				}
				t0 := time.Now()
				if a := send("worker", "TaskUpdate", fmt.Sprint("u", i), update); !a.GetOk() {
					b.Fatalf("update: %v", a.GetError())
				}
				lat = append(lat, time.Since(t0))
				i++
			}
			reportPercentiles(b, lat)
		})
	}
}

// reportPercentiles reports the median and p99 of a benchmark's round trips.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// timedDo sends req and returns its status, its body and the round trip.
func timedDo(b *testing.B, client *http.Client, req *http.Request) (int, []byte, time.Duration) {
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, out, time.Since(t0)
}

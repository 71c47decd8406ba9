package macp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// FuzzRelayStreamSplit sends a StreamSession on the relay whose messages
// (a SessionStart the runtime echoes, an envelope the caller forged for
// another sender, which Warden refuses inline) are cut into DATA frames at
// arbitrary places, followed by arbitrary bytes: however they are cut, the
// relay, which reads the body as it comes, answers the two messages exactly
// (the echo and the refusal, then OK), and with bytes after them a gRPC
// status; never a hang, a reset or a message it did not decide.
func FuzzRelayStreamSplit(f *testing.F) {
	_, up := startFakeRuntimeWith(f, func(r *fakeRuntime) macpv1.MACPRuntimeServiceServer { return historyRuntime{r, 0, 0, nil} })
	addr := serveSidecar(f, devEnforcer(f), Config{Upstream: up, Transport: TransportRelay, MaxMessageBytes: 4096})
	f.Add([]byte{}, []byte{})
	f.Add([]byte{1, 1, 1, 1, 1, 3, 200}, []byte{})
	f.Add([]byte{4, 5, 6}, []byte{0, 0, 0, 0, 3, 1})
	f.Add([]byte{2}, []byte{1, 0, 0, 0, 1, 0})
	f.Add([]byte{7, 9}, []byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, cuts, tail []byte) {
		if len(tail) > 1024 || len(cuts) > 256 {
			return
		}
		sid := sessionID()
		start, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
		env := func(sender, typ, id string, payload []byte) []byte {
			b, _ := proto.Marshal(&macpv1.StreamSessionRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: typ,
				MessageId: id, SessionId: sid, Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}})
			return framed(b, len(b), 0)
		}
		body := append(env("planner", "SessionStart", "start", start), env("worker", "TaskUpdate", "forged", nil)...)
		body = append(body, tail...)
		var pieces [][]byte
		for i := 0; len(body) > 0; i++ {
			n := len(body)
			if i < len(cuts) {
				n = min(n, int(cuts[i])+1)
			}
			pieces, body = append(pieces, body[:n]), body[n:]
		}
		header := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodStream},
			{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "authorization", Value: "Bearer planner"}}
		a, data := rawPieces(t, addr, header, pieces, true)
		if a.GRPCStatus == "" || a.Reset != 0 {
			t.Fatalf("cuts %v tail %x: answer without a gRPC status: %+v", cuts, tail, a)
		}
		var got []string
		for len(data) >= grpcPrefix {
			n := int(binary.BigEndian.Uint32(data[1:grpcPrefix]))
			if data[0] != 0 || len(data) < grpcPrefix+n {
				t.Fatalf("the answer's body is not whole messages: %x", data)
			}
			var resp macpv1.StreamSessionResponse
			if err := proto.Unmarshal(data[grpcPrefix:grpcPrefix+n], &resp); err != nil {
				t.Fatalf("the answer's message does not decode: %v", err)
			}
			data = data[grpcPrefix+n:]
			if e := resp.GetEnvelope(); e != nil {
				got = append(got, "echo "+e.GetMessageId())
			} else {
				got = append(got, fmt.Sprintf("error %s %s", resp.GetError().GetCode(), resp.GetError().GetMessageId()))
			}
		}
		if len(data) != 0 {
			t.Fatalf("the answer's body ends inside a message: %x", data)
		}
		slices.Sort(got)
		if len(tail) == 0 {
			if !slices.Equal(got, []string{"echo start", "error UNAUTHENTICATED forged"}) || a.GRPCStatus != "0" {
				t.Fatalf("cuts %v: answered %v status %s, want the start echoed, the forged envelope refused, OK", cuts, got, a.GRPCStatus)
			}
			return
		}
		// what follows may end the call before its answers went out (a
		// body that is not whole messages ends it, on both doors); what
		// did go out is those answers, or a refusal of what followed
		for _, g := range got {
			if g != "echo start" && g != "error UNAUTHENTICATED forged" && !strings.HasPrefix(g, "error INVALID_ENVELOPE ") {
				t.Fatalf("cuts %v tail %x: answered %v", cuts, tail, got)
			}
		}
	})
}

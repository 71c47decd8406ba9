// Command gctail shows what Go's garbage collector does to Warden's latency
// tail: it runs Warden's ext_authz server on GOMAXPROCS cores, sends allowed
// TaskUpdate Checks at a fixed rate (open loop) for a bounded time, with the
// collector's floor off (gc.min_heap_bytes -1, GOGC alone) and at its
// default, and prints for each the collections per second and the mark
// time they took (from GODEBUG=gctrace=1) beside the latency percentiles.
//
//	go run ./bench/cmd/gctail [-warden bin/warden] [-rate 2000] [-duration 10s] [-rounds 2]
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/bench/load"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// setting is one way to run Warden's collector.
type setting struct {
	name string
	args []string
}

var settings = []setting{
	{"floor off (GOGC 100 alone)", []string{"--gc-min-heap-bytes", "-1"}},
	{"floor 64 MiB (default)", nil},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gctail:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("warden", "bin/warden", "the Warden binary")
	rate := flag.Float64("rate", 2000, "Checks per second")
	warmup := flag.Duration("warmup", 2*time.Second, "sent at the rate before the measured part")
	duration := flag.Duration("duration", 10*time.Second, "the measured part of each run")
	rounds := flag.Int("rounds", 2, "runs per setting, alternating which goes first")
	procs := flag.Int("procs", 1, "Warden's GOMAXPROCS")
	flag.Parse()
	if *rate <= 0 || *rate > 20000 || *duration <= 0 || *duration > 5*time.Minute || *rounds < 1 || *rounds > 10 {
		return errors.New("give a rate up to 20000/s, a duration up to 5m and 1 to 10 rounds")
	}
	fmt.Printf("Warden ext_authz, GOMAXPROCS %d, %.0f Checks/s (allowed TaskUpdates), %s warm-up + %s measured, %d round(s)\n",
		*procs, *rate, *warmup, *duration, *rounds)
	fmt.Printf("%-28s %8s %12s %9s %9s %9s %9s %7s\n", "setting", "GC/s", "mark ms/s", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "errors")
	for r := range *rounds {
		for k := range settings {
			st := settings[(k+r)%len(settings)]
			res, err := measure(*bin, st, *procs, load.Open{Rate: *rate, Warmup: *warmup, Duration: *duration})
			if err != nil {
				return fmt.Errorf("%s: %w", st.name, err)
			}
			s := res.load.Summary()
			secs := (*warmup + *duration).Seconds()
			fmt.Printf("%-28s %8.1f %12.2f %9.0f %9.0f %9.0f %9.0f %7d\n", st.name, float64(res.gcs)/secs, res.markMs/secs,
				s.P50, s.P99, s.P999, s.Max, s.Errors+s.Dropped)
		}
	}
	return nil
}

// result is one run: the load's latencies and the collections meanwhile.
type result struct {
	load   *load.Result
	gcs    int
	markMs float64
}

// measure starts Warden with the setting, sets up sessions, runs the load
// and stops Warden.
func measure(bin string, st setting, procs int, o load.Open) (result, error) {
	addr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	w, err := startWarden(bin, addr, procs, st.args)
	if err != nil {
		return result{}, err
	}
	defer w.stop()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	c := authv3.NewAuthorizationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), o.Warmup+o.Duration+time.Minute)
	defer cancel()
	const perSession = 100
	sessions := make([]string, (o.Count()+perSession-1)/perSession)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(time.Now().Unix()), i)
		for _, m := range []struct{ typ, sender string }{{"SessionStart", "planner"}, {"TaskRequest", "planner"}, {"TaskAccept", "worker"}} {
			if err := check(ctx, c, m.typ, m.typ, sessions[i], m.sender); err != nil {
				return result{}, fmt.Errorf("set up: %w", err)
			}
		}
	}
	gcs, mark := w.gcs.Load(), w.markMicros.Load()
	res := o.Run(ctx, func(ctx context.Context, i int) error {
		return check(ctx, c, "TaskUpdate", "u"+strconv.Itoa(i), sessions[i/perSession], "worker")
	})
	return result{load: res, gcs: int(w.gcs.Load() - gcs), markMs: float64(w.markMicros.Load()-mark) / 1e3}, nil
}

// Payloads, encoded once.
var payloads = map[string][]byte{
	"SessionStart": mustMarshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 3_600_000}),
	"TaskRequest":  mustMarshal(&taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "worker"}),
	"TaskAccept":   mustMarshal(&taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}),
	"TaskUpdate":   mustMarshal(&taskv1.TaskUpdatePayload{TaskId: "t1", Status: "running", Progress: 0.5, Message: "half way"}),
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// check sends the Check Envoy sends for one MACP Send (the gRPC frame in
// raw_body) and wants it allowed.
func check(ctx context.Context, c authv3.AuthorizationClient, typ, id, sid, sender string) error {
	msg := mustMarshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1",
		MessageType: typ, MessageId: id, SessionId: sid, Sender: sender, Payload: payloads[typ]}})
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	const path = "/macp.v1.MACPRuntimeService/Send"
	resp, err := c.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
		Method: "POST", Path: path, Host: "runtime", Protocol: "HTTP/2", RawBody: append(body, msg...),
		Headers: map[string]string{":method": "POST", ":path": path, "content-type": "application/grpc", "authorization": "Bearer " + sender},
	}}}})
	if err != nil {
		return err
	}
	if resp.GetStatus().GetCode() != int32(code.Code_OK) {
		return fmt.Errorf("%s refused: %s", typ, resp.GetStatus().GetMessage())
	}
	return nil
}

// warden is a running Warden whose collections are counted from its
// gctrace lines.
type warden struct {
	cmd        *exec.Cmd
	done       sync.WaitGroup
	gcs        atomic.Int64
	markMicros atomic.Int64
}

func startWarden(bin, addr string, procs int, args []string) (*warden, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--extauthz-listen", addr, "--auth", "dev", "--insecure-dev-auth",
		"--sessions", "500000", "--log-level", "error"}, args...)...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs), "GODEBUG=gctrace=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	w := &warden{cmd: cmd}
	w.done.Add(1)
	go w.count(stderr)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return w, nil
		}
		if time.Now().After(deadline) {
			w.stop()
			return nil, fmt.Errorf("warden did not listen on %s within 10s", addr)
		}
	}
}

// count reads gctrace lines ("gc 12 @3.4s 2%: 0.01+1.2+0.003 ms clock, ...")
// and adds up the collections and their concurrent mark's wall time.
func (w *warden) count(r io.Reader) {
	defer w.done.Done()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		w.gcs.Add(1)
		_, clock, ok := strings.Cut(line, "%: ")
		phases, _, _ := strings.Cut(clock, " ms clock")
		if parts := strings.Split(phases, "+"); ok && len(parts) == 3 {
			if ms, err := strconv.ParseFloat(parts[1], 64); err == nil {
				w.markMicros.Add(int64(ms * 1e3))
			}
		}
	}
}

func (w *warden) stop() {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	_ = w.cmd.Wait()
	w.done.Wait()
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

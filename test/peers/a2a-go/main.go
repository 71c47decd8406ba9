// Command a2a-go-server is the a2a-go v2.3.1 reference peer Warden's tests
// drive: the SDK's default request handler (in-memory task store with its
// own owner bookkeeping, in-memory push-config store, HTTP push sender)
// behind the SDK's JSON-RPC and HTTP+JSON (REST) bindings, with a small agent
// whose behaviour the first text part of each message selects:
//
//	message: X   a plain Message reply "echo: X" (no task)
//	input X      a task that asks a question (input-required); the next
//	             message on that task completes it with "answer: <text>"
//	stream N     a task streaming N artifact chunks, then completed
//	wait         a working task that runs until cancelled (or 60 s pass)
//	wait N       the same, completed after N seconds (1 to 60)
//	related      a task completed with a status message whose
//	             referenceTaskIds name the latest task anyone started: an
//	             agent that cites other tenants' tasks (a "see also" drawn
//	             from a shared store), what an answer must not hand over
//	join         a plain Message reply whose contextId is the context of
//	             the latest task anyone started: an agent that files a
//	             newcomer into another tenant's conversation
//	join first   the same with the context of the first task anyone
//	             started
//	anything     a task completed with the artifact "echo: <text>", followed
//	             by " [ref ID: TEXT]" for each task the message's
//	             referenceTaskIds name (loaded by the SDK's
//	             ReferencedTasksLoader)
//
// Authentication is the SDK's: a call interceptor maps the bearer token to an
// a2asrv.User (tokens from -tokens or A2A_TOKENS, "name=token,..."); a request
// without a token runs as the SDK's unauthenticated user, an unknown token is
// refused. The in-memory task store records that user as the task's owner,
// which is all the ownership a2a-go v2.3.1 has: ListTasks filters by it,
// GetTask, CancelTask, SendMessage to an existing task and the push-config
// store do not look at it.
//
// It listens on loopback only: JSON-RPC at /jsonrpc, REST under /rest, the
// public agent card at /.well-known/agent-card.json.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "a2a-go-server:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:9100", "loopback address to listen on")
	tokens := flag.String("tokens", os.Getenv("A2A_TOKENS"), "bearer tokens, name=token[,name=token...] (default $A2A_TOKENS)")
	flag.Parse()

	users, err := parseTokens(*tokens)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("-listen: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-listen %s: a test peer listens on loopback only", *listen)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	base := "http://" + lis.Addr().String()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	card := publicCard(base)
	// The store NewHandler would make by default, made here so that the
	// SDK's ReferencedTasksLoader can read referenceTaskIds from it.
	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
	handler := a2asrv.NewHandler(
		agent{latest: &latestTask{}},
		a2asrv.WithLogger(logger),
		a2asrv.WithTaskStore(store),
		a2asrv.WithExecutorContextInterceptor(&a2asrv.ReferencedTasksLoader{Store: store}),
		a2asrv.WithCallInterceptors(bearerAuth{users: users}),
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 2 * time.Second})),
		a2asrv.WithExtendedAgentCard(extendedCard(card)),
	)
	mux := http.NewServeMux()
	mux.Handle("/jsonrpc", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle("/rest/", http.StripPrefix("/rest", a2asrv.NewRESTHandler(handler)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	fmt.Fprintf(os.Stderr, "a2a-go-server: a2a-go v2.3.1 on %s (JSON-RPC %s/jsonrpc, REST %s/rest, %d users)\n", base, base, base, len(users))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// parseTokens reads "name=token,name=token" into token -> name.
func parseTokens(s string) (map[string]string, error) {
	users := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, token, ok := strings.Cut(item, "=")
		if !ok || name == "" || token == "" {
			return nil, fmt.Errorf("-tokens: %q is not name=token", item)
		}
		if _, dup := users[token]; dup {
			return nil, fmt.Errorf("-tokens: token of %q given twice", name)
		}
		users[token] = name
	}
	return users, nil
}

// bearerAuth is the authentication middleware a2a-go expects: it sets
// CallContext.User, which the task store's default Authenticator reads.
type bearerAuth struct{ users map[string]string }

func (b bearerAuth) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	values, ok := callCtx.ServiceParams().Get("authorization")
	if !ok || len(values) == 0 {
		return ctx, nil, nil // the SDK's unauthenticated user
	}
	token, ok := strings.CutPrefix(values[0], "Bearer ")
	name, known := b.users[strings.TrimSpace(token)]
	if !ok || !known {
		return ctx, nil, a2a.ErrUnauthenticated
	}
	callCtx.User = a2asrv.NewAuthenticatedUser(name, nil)
	return ctx, nil, nil
}

func (bearerAuth) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }

func publicCard(base string) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:        "warden-a2a-go-peer",
		Description: "a2a-go v2.3.1 test peer: echo, streaming, input-required, cancellable tasks",
		Version:     "2.3.1",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(base+"/jsonrpc", a2a.TransportProtocolJSONRPC),
			a2a.NewAgentInterface(base+"/rest", a2a.TransportProtocolHTTPJSON),
		},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true, ExtendedAgentCard: true},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "bearer"},
		},
		Skills: []a2a.AgentSkill{{
			ID: "echo", Name: "echo", Description: "echoes text, streams, asks for input",
			Tags: []string{"test"}, Examples: []string{"hello", "stream 3", "input name", "wait"},
		}},
	}
}

// extendedCard is the public card plus a skill only authenticated callers
// should see (spec §13.3).
func extendedCard(public *a2a.AgentCard) *a2a.AgentCard {
	c := *public
	c.Skills = append(append([]a2a.AgentSkill{}, public.Skills...), a2a.AgentSkill{
		ID: "internal-admin", Name: "internal admin", Description: "extended-card-only skill",
		Tags: []string{"internal"},
	})
	return &c
}

// agent is the AgentExecutor; latest is the last task anyone started.
type agent struct{ latest *latestTask }

type latestTask struct {
	mu       sync.Mutex
	id       a2a.TaskID
	ctx      string
	firstCtx string
}

func (l *latestTask) swap(id a2a.TaskID) a2a.TaskID {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.id
	if id != "" {
		l.id = id
	}
	return prev
}

// started records the task and context of a task just started.
func (l *latestTask) started(id a2a.TaskID, ctx string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.id, l.ctx = id, ctx
	if l.firstCtx == "" {
		l.firstCtx = ctx
	}
}

// context is the context of the latest task anyone started, or of the
// first.
func (l *latestTask) context(first bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if first {
		return l.firstCtx
	}
	return l.ctx
}

func (a agent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := firstText(ec.Message)
		if text == "related" {
			if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			q := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("see also"))
			if prev := a.latest.swap(""); prev != "" {
				q.ReferenceTasks = []a2a.TaskID{prev}
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, q), nil)
			return
		}
		if text == "join" || text == "join first" {
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("joined"))
			m.ContextID = a.latest.context(text == "join first")
			yield(m, nil)
			return
		}
		if ec.StoredTask == nil {
			a.latest.started(ec.TaskID, ec.ContextID)
		}
		if ec.StoredTask != nil && ec.StoredTask.Status.State == a2a.TaskStateInputRequired {
			finish(yield, ec, "answer: "+text)
			return
		}
		if rest, ok := strings.CutPrefix(text, "message: "); ok {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("echo: "+rest)), nil)
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		switch verb, arg, _ := strings.Cut(text, " "); verb {
		case "input":
			q := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("input required: "+arg+"?"))
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, q), nil)
		case "stream":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 || n > 100 {
				n = 3
			}
			var id a2a.ArtifactID
			for i := range n {
				part := a2a.NewTextPart(fmt.Sprintf("chunk %d", i+1))
				var ev *a2a.TaskArtifactUpdateEvent
				if id == "" {
					ev = a2a.NewArtifactEvent(ec, part)
					id = ev.Artifact.ID
				} else {
					ev = a2a.NewArtifactUpdateEvent(ec, id, part)
				}
				if !yield(ev, nil) || !pause(ctx, 20*time.Millisecond) {
					return
				}
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		case "wait":
			d := 60 * time.Second
			if n, err := strconv.Atoi(arg); err == nil && n >= 1 && n <= 60 {
				d = time.Duration(n) * time.Second
			}
			if pause(ctx, d) {
				finish(yield, ec, "waited")
			}
		default:
			finish(yield, ec, "echo: "+text+referenced(ec))
		}
	}
}

func (agent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// finish emits one artifact and the completed state.
func finish(yield func(a2a.Event, error) bool, ec *a2asrv.ExecutorContext, text string) {
	if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(text)), nil) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// pause waits d unless ctx ends first; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// referenced shows what the agent was given of the referenced tasks.
func referenced(ec *a2asrv.ExecutorContext) string {
	var b strings.Builder
	for _, t := range ec.RelatedTasks {
		var texts []string
		for _, a := range t.Artifacts {
			for _, p := range a.Parts {
				if s := p.Text(); s != "" {
					texts = append(texts, s)
				}
			}
		}
		fmt.Fprintf(&b, " [ref %s: %s]", t.ID, strings.Join(texts, " "))
	}
	return b.String()
}

func firstText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	for _, p := range m.Parts {
		if t := p.Text(); t != "" {
			return t
		}
	}
	return ""
}

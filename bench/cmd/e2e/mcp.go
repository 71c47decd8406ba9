package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// mcpProtocol is the MCP protocol version the workloads speak (stateless
// Streamable HTTP: no initialize, no session).
const mcpProtocol = "2026-07-28"

// mcpMeta declares the Tasks extension, which task tools require.
var mcpMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    mcpProtocol,
	"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
}

// mcpClient posts JSON-RPC requests to one MCP endpoint, the server or
// Warden in front of it, as one principal (dev authentication).
type mcpClient struct {
	url   string
	token string
	http  *http.Client
}

func newMCPClient(url string) *mcpClient {
	return &mcpClient{url: url, token: "alice", http: &http.Client{Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}}
}

func (c *mcpClient) close() { c.http.CloseIdleConnections() }

// mcpRequest is one prepared request: its body and routing headers.
type mcpRequest struct {
	method, name string
	body         []byte
	// want is a fragment the answer must contain.
	want []byte
}

// newMCPRequest encodes a JSON-RPC request; name is the Mcp-Name header
// (the tool or the task id).
func newMCPRequest(method, name string, params map[string]any, want string) mcpRequest {
	params["_meta"] = mcpMeta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return mcpRequest{method: method, name: name, body: body, want: []byte(want)}
}

// do posts the request and checks the answer: HTTP 200, a JSON-RPC result
// holding want (JSON or one SSE event).
func (c *mcpClient) do(ctx context.Context, r mcpRequest) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(r.body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpProtocol)
	req.Header.Set("Mcp-Method", r.method)
	if r.name != "" {
		req.Header.Set("Mcp-Name", r.name)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.method, err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.method, err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) || !bytes.Contains(out, r.want) {
		return nil, fmt.Errorf("%s: HTTP %d: %.300s", r.method, resp.StatusCode, out)
	}
	return out, nil
}

// mcpTasksPerRun is how many running tasks a tasks/get run spreads over.
const mcpTasksPerRun = 8

// tasksGetWork polls tasks/get of running tasks it created with the
// fixture's slow_compute tool (they stay working for the whole run).
type tasksGetWork struct {
	c    *mcpClient
	gets []mcpRequest
}

func (w *tasksGetWork) setup(ctx context.Context, _ int) error {
	create := newMCPRequest("tools/call", "slow_compute", map[string]any{"name": "slow_compute",
		"arguments": map[string]any{"steps": 60, "step_ms": 10_000}}, `"taskId"`)
	w.gets = nil
	for range mcpTasksPerRun {
		out, err := w.c.do(ctx, create)
		if err != nil {
			return err
		}
		id, err := taskID(out)
		if err != nil {
			return err
		}
		w.gets = append(w.gets, newMCPRequest("tasks/get", id, map[string]any{"taskId": id}, `"working"`))
	}
	return nil
}

func (w *tasksGetWork) do(ctx context.Context, i int) error {
	_, err := w.c.do(ctx, w.gets[i%len(w.gets)])
	return err
}

// taskID reads result.taskId from a JSON or SSE answer.
func taskID(out []byte) (string, error) {
	if i := bytes.Index(out, []byte("data:")); i >= 0 {
		out = out[i+len("data:"):]
		if j := bytes.IndexByte(out, '\n'); j >= 0 {
			out = out[:j]
		}
	}
	var r struct {
		Result struct {
			TaskID string `json:"taskId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil || r.Result.TaskID == "" {
		return "", fmt.Errorf("no taskId in %.300s (%v)", out, err)
	}
	return r.Result.TaskID, nil
}

// toolCallWork calls one synchronous tool over and over.
type toolCallWork struct {
	c    *mcpClient
	call mcpRequest
}

func (w *toolCallWork) setup(context.Context, int) error { return nil }

func (w *toolCallWork) do(ctx context.Context, i int) error {
	_, err := w.c.do(ctx, w.call)
	return err
}

// mcpServer is one MCP server the scenario puts Warden in front of.
type mcpServer struct {
	id    string
	label string
	// start runs the server on addr.
	start func(addr string) (*proc, error)
	// workloads are the comparisons run against it: a group name and a
	// workload factory per client.
	workloads []mcpWorkload
}

type mcpWorkload struct {
	group string
	work  func(*mcpClient) workload
	// rates overrides the fixed rates, for a server slower than the rest.
	rates []float64
}

// mcpRates are the fixed rates of the MCP scenarios, in requests per second.
func (b *bench) mcpRates() []float64 {
	return []float64{500}
}

// slowMCPRates are the fixed rates for the everything-server.
func (b *bench) slowMCPRates() []float64 {
	return []float64{200}
}

// mcp compares MCP servers direct and through Warden's MCP sidecar: the
// fixture task server (tasks/get of a running task, tools/call of a
// synchronous tool) and the Go SDK's everything-server (tools/call).
func (b *bench) mcp(ctx context.Context, fixtureBin string) (outcome, error) {
	if ok, why := wardenHasMCP(b.wardenBin); !ok {
		return outcome{}, notRun("%s", why)
	}
	if fixtureBin == "" {
		fixtureBin = filepath.Join(b.logDir, "mcptasks")
		if out, err := exec.Command("go", "build", "-o", fixtureBin, "./test/mcptasks").CombinedOutput(); err != nil {
			return outcome{}, notRun("go build ./test/mcptasks: %v %s", err, out)
		}
	}
	procsEnv := []string{"GOMAXPROCS=" + strconv.Itoa(b.wardenProcs)}
	servers := []mcpServer{{
		id: "mcptasks", label: "fixture",
		start: func(addr string) (*proc, error) {
			return startProc(b.logDir, "mcptasks", addr, procsEnv, fixtureBin, "-listen", addr)
		},
		workloads: []mcpWorkload{
			{group: "MCP tasks/get (fixture task server)", work: func(c *mcpClient) workload { return &tasksGetWork{c: c} }},
			{group: "MCP tools/call greet (fixture task server)", work: func(c *mcpClient) workload {
				return &toolCallWork{c: c, call: newMCPRequest("tools/call", "greet", map[string]any{"name": "greet", "arguments": map[string]any{"name": "bench"}}, "hello, bench")}
			}},
		},
	}}
	if everything := ".peers/bin/everything-server"; exists(everything) {
		servers = append(servers, mcpServer{
			id: "everything", label: "go-sdk everything-server",
			start: func(addr string) (*proc, error) {
				return startProc(b.logDir, "everything-server", addr, procsEnv, everything, "-http", addr)
			},
			// it needs about a millisecond of CPU per call: 500 a second would
			// queue on its one core
			workloads: []mcpWorkload{{group: "MCP tools/call test_simple_text (go-sdk everything-server)", work: func(c *mcpClient) workload {
				return &toolCallWork{c: c, call: newMCPRequest("tools/call", "test_simple_text", map[string]any{"name": "test_simple_text", "arguments": map[string]any{}}, `"content"`)}
			}, rates: b.slowMCPRates()}},
		})
	}
	var all outcome
	for _, s := range servers {
		out, err := b.mcpServer(ctx, s)
		all.add(out)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// mcpServer runs one server's comparisons.
func (b *bench) mcpServer(ctx context.Context, s mcpServer) (outcome, error) {
	addr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	up, err := s.start(addr)
	if err != nil {
		return outcome{}, err
	}
	defer up.stop()
	wAddr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	w, err := b.startWarden("warden-"+s.id, wAddr, "--mcp-listen", wAddr, "--mcp-upstream", "http://"+addr+"/mcp",
		"--plaintext", "--auth", "dev", "--insecure-dev-auth")
	if err != nil {
		return outcome{}, err
	}
	defer w.stop()
	direct := newMCPClient("http://" + addr + "/mcp")
	defer direct.close()
	var clients []*mcpClient
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	// each hop's side carries the workload's factory through wl below
	var wl mcpWorkload
	hops, stop, err := b.hops(s.id, w, wAddr, "mcp", addr, func(name, hopAddr string, p *proc) side {
		c := newMCPClient("http://" + hopAddr + "/mcp")
		clients = append(clients, c)
		return side{name: name, work: func() workload { return wl.work(c) }, procs: map[string]int{"hop": p.pid(), "upstream": up.pid()}}
	})
	defer stop()
	if err != nil {
		return outcome{}, err
	}
	var all outcome
	for i := range s.workloads {
		wl = s.workloads[i]
		if wl.rates == nil {
			wl.rates = b.mcpRates()
		}
		c := b.httpComparison(fmt.Sprintf("%s-%d", s.id, i), wl.group, wl.rates,
			side{name: "direct", work: func() workload { return wl.work(direct) }, procs: map[string]int{"upstream": up.pid()}}, hops)
		out, err := c.run(ctx, b.logf)
		all.add(out)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// httpComparison is one workload of an HTTP sidecar (MCP, A2A) at rates:
// base (the server direct) against each hop, 16 workers, in requests per
// second.
func (b *bench) httpComparison(id, group string, rates []float64, base side, hops []side) comparison {
	c := comparison{id: id, group: group, base: base, hops: hops, rates: rates, workers: 16,
		satMax: int(15000 * (b.timing.warmup + b.timing.measure).Seconds()), timing: b.timing, unit: "req/s", profile: b.profile, cpu: httpCPU}
	b.profileAt(&c)
	c.skip = b.groups != nil && !b.groups.MatchString(group)
	if b.noSaturation {
		c.workers = 0
	}
	return c
}

// wardenHasMCP reports whether the Warden binary has the MCP sidecar
// (`serve --mcp-listen`), and why not.
func wardenHasMCP(bin string) (bool, string) {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	if !bytes.Contains(out, []byte("-mcp-listen")) {
		return false, bin + " serve has no --mcp-listen (the MCP sidecar is not built in)"
	}
	if _, err := os.Stat(bin); err != nil {
		return false, err.Error()
	}
	return true, ""
}

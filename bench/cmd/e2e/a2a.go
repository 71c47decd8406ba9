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

// a2aClient posts A2A JSON-RPC requests to one endpoint, the a2a-go server
// or a hop in front of it, as alice (her bearer token on both).
type a2aClient struct {
	url  string
	http *http.Client
}

func newA2AClient(url string) *a2aClient {
	return &a2aClient{url: url, http: &http.Client{Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}}
}

func (c *a2aClient) close() { c.http.CloseIdleConnections() }

// do sends one request and checks the answer: HTTP 200, a result holding
// want.
func (c *a2aClient) do(ctx context.Context, method string, params any, want string) ([]byte, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer tok-alice")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) || !bytes.Contains(out, []byte(want)) {
		return nil, fmt.Errorf("%s: HTTP %d: %.300s", method, resp.StatusCode, out)
	}
	return out, nil
}

func a2aSend(text string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": "bench", "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}}
}

// getTaskWork reads completed tasks it created (GetTask).
type getTaskWork struct {
	c   *a2aClient
	ids []string
}

func (w *getTaskWork) setup(ctx context.Context, _ int) error {
	w.ids = nil
	for range mcpTasksPerRun {
		out, err := w.c.do(ctx, "SendMessage", a2aSend("hello"), `"TASK_STATE_COMPLETED"`)
		if err != nil {
			return err
		}
		var r struct {
			Result struct {
				Task struct {
					ID string `json:"id"`
				} `json:"task"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &r); err != nil || r.Result.Task.ID == "" {
			return fmt.Errorf("no task in %.300s (%v)", out, err)
		}
		w.ids = append(w.ids, r.Result.Task.ID)
	}
	return nil
}

func (w *getTaskWork) do(ctx context.Context, i int) error {
	_, err := w.c.do(ctx, "GetTask", map[string]any{"id": w.ids[i%len(w.ids)]}, `"TASK_STATE_COMPLETED"`)
	return err
}

// sendWork sends one message that makes a completed echo task.
type sendWork struct{ c *a2aClient }

func (w *sendWork) setup(context.Context, int) error { return nil }

func (w *sendWork) do(ctx context.Context, _ int) error {
	_, err := w.c.do(ctx, "SendMessage", a2aSend("hello"), `"echo: hello"`)
	return err
}

// a2a compares the a2a-go v2.3.1 server direct and through Warden's A2A
// sidecar (and the null Go pass-through and nginx): GetTask and SendMessage.
func (b *bench) a2a(ctx context.Context) (outcome, error) {
	out, _ := exec.Command(b.wardenBin, "serve", "-h").CombinedOutput()
	if !bytes.Contains(out, []byte("-a2a-listen")) {
		return outcome{}, notRun("%s serve has no --a2a-listen", b.wardenBin)
	}
	// go build -C resolves -o in the peer's folder: the path must be absolute.
	server, err := filepath.Abs(filepath.Join(b.logDir, "a2a-go-server"))
	if err != nil {
		return outcome{}, err
	}
	if out, err := exec.Command("go", "build", "-C", "test/peers/a2a-go", "-o", server, ".").CombinedOutput(); err != nil {
		return outcome{}, notRun("build test/peers/a2a-go (scripts/peers.sh a2a fetches its modules): %v %s", err, out)
	}
	tokens := filepath.Join(b.logDir, "a2a-tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"tok-alice","sender":"alice"}]`), 0o600); err != nil {
		return outcome{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	up, err := startProc(b.logDir, "a2a-go-server", addr, []string{"GOMAXPROCS=" + strconv.Itoa(b.wardenProcs)}, server, "-listen", addr, "-tokens", "alice=tok-alice")
	if err != nil {
		return outcome{}, err
	}
	defer up.stop()
	wAddr, err := freeAddr()
	if err != nil {
		return outcome{}, err
	}
	w, err := b.startWarden("warden-a2a", wAddr, "--a2a-listen", wAddr, "--a2a-upstream", "http://"+addr+"/jsonrpc",
		"--plaintext", "--auth", "static", "--static-tokens", tokens)
	if err != nil {
		return outcome{}, err
	}
	defer w.stop()
	direct := newA2AClient("http://" + addr + "/jsonrpc")
	defer direct.close()
	var clients []*a2aClient
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	var work func(*a2aClient) workload
	hops, stop, err := b.hops("a2a", w, wAddr, "mcp", addr, func(name, hopAddr string, p *proc) side {
		c := newA2AClient("http://" + hopAddr + "/jsonrpc")
		clients = append(clients, c)
		return side{name: name, work: func() workload { return work(c) }, procs: map[string]int{"hop": p.pid(), "upstream": up.pid()}}
	})
	defer stop()
	if err != nil {
		return outcome{}, err
	}
	var all outcome
	for i, wl := range []struct {
		group string
		work  func(*a2aClient) workload
	}{
		{"A2A GetTask (a2a-go v2.3.1)", func(c *a2aClient) workload { return &getTaskWork{c: c} }},
		{"A2A SendMessage (a2a-go v2.3.1)", func(c *a2aClient) workload { return &sendWork{c: c} }},
	} {
		work = wl.work
		c := b.httpComparison(fmt.Sprintf("a2a-%d", i), wl.group, b.slowMCPRates(),
			side{name: "direct", work: func() workload { return work(direct) }, procs: map[string]int{"upstream": up.pid()}}, hops)
		out, err := c.run(ctx, b.logf)
		all.add(out)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

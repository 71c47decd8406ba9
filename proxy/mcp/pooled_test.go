package mcp

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestPooledAnswers: answers are read into pooled buffers (relayBody); each
// caller gets its own answer byte for byte while others are read at the
// same time, so no buffer goes back to the pool while an answer written
// from it is still in use. The answers' sizes cross the pooled buffers'
// (4 KiB) so that buffers grow, are kept and are dropped.
func TestPooledAnswers(t *testing.T) {
	upSrv := httptest.NewServer(benchUpstream{})
	t.Cleanup(upSrv.Close)
	h := newHarnessOn(t, Config{}, nil, upSrv, nil, httptest.NewServer)
	client := h.front.Client()
	const callers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("caller-%d-%d-%s", g, i, strings.Repeat(string(rune('a'+g)), (g*each+i)*37%9000))
				want := `{"jsonrpc":"2.0","id":"` + id + `","result":{"content":[{"type":"text","text":"done"}]}}`
				req, _ := http.NewRequest(http.MethodPost, h.front.URL+"/mcp", strings.NewReader(rpc(id, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{"q": "x"}})))
				req.Header["Authorization"] = []string{"Bearer alice"}
				req.Header["Content-Type"] = []string{"application/json"}
				req.Header["Accept"] = []string{"application/json, text/event-stream"}
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != want {
					errs <- fmt.Errorf("caller %d request %d: got %.200q, want %.200q (%v)", g, i, b, want, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

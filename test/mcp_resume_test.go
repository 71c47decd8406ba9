package test

import (
	"strings"
	"testing"
)

// resumeRun is what test/peers/mcp/resume.mjs reports.
type resumeRun struct {
	Answer    any    `json:"answer"`
	Ms        int    `json:"ms"`
	Tokens    int    `json:"tokens"`
	LastToken string `json:"lastToken"`
	BOwn      *struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"bOwnSession"`
	BTheirs *struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"bTheirSession"`
	Fatal any `json:"fatal"`
}

func runResume(t testing.TB, url string) resumeRun {
	t.Helper()
	var r resumeRun
	runNode(t, "resume.mjs", &r, "MCP_URL="+url+"/mcp", "TOKEN_A=alice", "TOKEN_B=bob")
	if r.Fatal != nil {
		t.Fatalf("resume.mjs: %v", r.Fatal)
	}
	return r
}

// TestMCPResume (issue 24 item 13): the MCP TypeScript SDK server closes the
// POST stream of a long tool call before answering (SSE polling, with its
// event store), and the SDK client gets the answer by resuming on its own
// with GET + Last-Event-ID. Through Warden the answer reaches alice, as
// direct (before: Warden dropped it as an answer to no request and the
// client waited until its timeout); bob, resuming her stream with her event
// id, gets nothing: not in his session (the event id is sealed to her and her
// session), nor in hers (the session handle is hers).
func TestMCPResume(t *testing.T) {
	upstream := startNodeMCP(t, "EVENT_STORE=1", "RETRY_MS=50")
	direct := runResume(t, upstream)
	if direct.Answer != "sum=3" || direct.Tokens < 1 {
		t.Fatalf("direct: %+v, want the answer after a resumption", direct)
	}
	warden, _ := startMCPWarden(t, upstream)
	through := runResume(t, warden)
	if through.Answer != "sum=3" {
		t.Fatalf("through Warden: answer %v after %d ms (%d event ids), want sum=3", through.Answer, through.Ms, through.Tokens)
	}
	if !strings.HasPrefix(through.LastToken, "wt2.") {
		t.Errorf("event id %q is not a handle", through.LastToken)
	}
	t.Logf("answer after a resumption: direct %d ms, through Warden %d ms", direct.Ms, through.Ms)
	for name, got := range map[string]*struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}{"his session": through.BOwn, "her session": through.BTheirs} {
		if got == nil {
			t.Fatalf("bob in %s: not tried", name)
		}
		if got.Status/100 == 2 || strings.Contains(got.Body, "sum=") || strings.Contains(got.Body, "data: {\"result\"") {
			t.Errorf("bob resuming alice's stream in %s: HTTP %d %q", name, got.Status, got.Body)
		}
	}
}

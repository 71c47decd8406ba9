package audit

import "testing"

// TestVerdict: an attack that names an id of the victim's is blocked only
// when its refusal is the made-up id's (the named ids blanked); a refusal
// unlike it tells the attacker the id exists, which is the attack working.
func TestVerdict(t *testing.T) {
	refused := func(code int, msg string, named ...string) *a2aAnswer {
		return &a2aAnswer{named: named, code: 200, Error: &rpcError{code, msg}}
	}
	for _, c := range []struct {
		name         string
		worked       bool
		answer, made *a2aAnswer
		want         Outcome
	}{
		{"worked", true, &a2aAnswer{Result: []byte(`{}`)}, nil, Succeed("it")},
		{"like a made-up id", false, refused(-32001, "Task not found"), refused(-32001, "Task not found"), Block("`-32001` Task not found, like a made-up id")},
		{"the id blanked", false, refused(-32001, "task t-1 not found", "t-1"), refused(-32001, "task t-2 not found", "t-2"), Block("`-32001` task <id> not found, like a made-up id")},
		{"another code", false, refused(-32002, "not cancelable"), refused(-32001, "not found"), Succeed("refused `-32002`, unlike a made-up id (`-32001`): the id exists")},
		{"another message", false, refused(-32602, "terminal"), refused(-32602, "not found"), Succeed("refused `-32602` terminal, unlike a made-up id (`-32602` not found): the id exists")},
		{"made-up id answered", false, refused(-32001, "no"), &a2aAnswer{Result: []byte(`{}`)}, Succeed("refused `-32001`, unlike a made-up id (an answer): the id exists")},
		{"nothing to compare", false, refused(-32602, "loopback"), nil, Block("refused `-32602` loopback")},
		{"answered without it", false, &a2aAnswer{Result: []byte(`{}`)}, nil, Block("answered without it")},
	} {
		if got := verdict(c.worked, "it", c.answer, c.made); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

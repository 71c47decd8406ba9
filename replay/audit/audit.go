// Package audit plays Warden's attack catalogue against a running target,
// once against the server alone ("direct") and once through a Warden in
// front of it ("warden"), and reports, per attack, what each did: blocked,
// succeeded (the attack worked), or skipped with the reason it could not be
// tested (a tool the server lacks, a mode the runtime does not offer).
//
// Attacks are safe by default: each creates its own sessions, tasks and
// contexts with the credentials it is given and touches only those, and every
// request an attack sends is taken from the endpoint's Budget.
package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Principal is one identity of the target: its name and the bearer credential its client sends.
type Principal struct{ Name, Token string }

// Endpoint is one way to reach the target: the server alone ("direct") or through Warden ("warden").
type Endpoint struct {
	Name       string      // "direct" or "warden"
	URL        string      // http://host:port[/path] (MCP endpoint URL, A2A JSON-RPC URL, MACP host:port as http://host:port)
	Principals []Principal // at least two; attacks use Principals[0] as victim, Principals[1] as attacker
	Budget     *Budget     // bounds the requests one run may send
}

// Victim is the principal whose tasks, sessions and contexts the attacks
// create; Attacker is the one that tries to reach them.
func (e Endpoint) Victim() Principal   { return e.Principals[0] }
func (e Endpoint) Attacker() Principal { return e.Principals[1] }

// ErrBudget is Budget.Take's error once the limit is reached.
var ErrBudget = errors.New("request budget spent")

// Budget bounds requests: Take() returns an error once the limit is reached.
// A nil *Budget bounds nothing.
type Budget struct {
	mu    sync.Mutex
	limit int
	count int
}

// NewBudget returns a budget of limit requests.
func NewBudget(limit int) *Budget { return &Budget{limit: limit} }

// Take counts one request, or returns an error wrapping ErrBudget when the
// limit is reached (the request must not be sent).
func (b *Budget) Take() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.count >= b.limit {
		return fmt.Errorf("%w (%d requests)", ErrBudget, b.limit)
	}
	b.count++
	return nil
}

// Used is the number of requests taken so far.
func (b *Budget) Used() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}

// Outcome is what one attack did against one endpoint.
type Outcome struct {
	Result   Result `json:"result"`             // Blocked, Succeeded (the attack worked), Skipped
	Evidence string `json:"evidence,omitempty"` // one line: what the server answered (status, JSON-RPC error code/message, gRPC code)
	Why      string `json:"why,omitempty"`      // for Skipped: why it could not be tested (tool missing, mode not offered)
}

// Result is the verdict of one attack against one endpoint.
type Result string

const (
	Blocked   Result = "blocked"
	Succeeded Result = "succeeded"
	Skipped   Result = "skipped"
)

// Block is the outcome of an attack the endpoint refused.
func Block(evidence string) Outcome { return Outcome{Result: Blocked, Evidence: evidence} }

// Succeed is the outcome of an attack that worked.
func Succeed(evidence string) Outcome { return Outcome{Result: Succeeded, Evidence: evidence} }

// Skip is the outcome of an attack that could not be tested, and why.
func Skip(why string) Outcome { return Outcome{Result: Skipped, Why: why} }

// Failed is the outcome of an attack that stopped on err before it could
// tell blocked from succeeded (the budget spent, the target unreachable, an
// answer it could not read): skipped, with the error as the reason.
func Failed(err error) Outcome { return Skip(err.Error()) }

// Attack is one row of the catalogue.
type Attack struct {
	ID       string // stable, e.g. "mcp-foreign-tasks-get"
	Protocol string // "macp", "mcp", "a2a"
	Title    string // the row text, e.g. "another principal's tasks/get"
	Run      func(ctx context.Context, e Endpoint) Outcome
}

// Protocols names the protocols of the catalogue, in the order of the docs.
func Protocols() []string { return []string{"macp", "mcp", "a2a"} }

// Catalogue returns the attacks of a protocol.
func Catalogue(protocol string) ([]Attack, error) {
	switch protocol {
	case "mcp":
		return mcpAttacks(), nil
	case "a2a":
		return a2aAttacks(), nil
	case "macp":
		return macpAttacks(), nil
	}
	return nil, fmt.Errorf("protocol %q: want macp, mcp or a2a", protocol)
}

// Run plays attacks against direct and warden (either may be nil: that
// column stays empty) and returns the report. Each attack runs against the
// server alone first, then through Warden.
func Run(ctx context.Context, protocol string, attacks []Attack, direct, warden *Endpoint) (Report, error) {
	for _, e := range []*Endpoint{direct, warden} {
		if e != nil && len(e.Principals) < 2 {
			return Report{}, fmt.Errorf("endpoint %s: %d principals, the attacks need two (a victim and an attacker)", e.Name, len(e.Principals))
		}
	}
	if direct == nil && warden == nil {
		return Report{}, errors.New("no endpoint to audit")
	}
	rep := Report{Protocol: protocol}
	for _, a := range attacks {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		row := Row{ID: a.ID, Title: a.Title}
		if direct != nil {
			o := a.Run(ctx, *direct)
			row.Direct = &o
		}
		if warden != nil {
			o := a.Run(ctx, *warden)
			row.Warden = &o
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

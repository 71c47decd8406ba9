// Package proxy holds Warden's one decision point, the Enforcer, with the
// session table it owns, and what every protocol's doors share: Decision
// (minted with a random id in one place, dry run applied in one place), the
// observer and the decision bookkeeping, and the Flight every door begins
// for each request (Enforcer.Begin): the request metrics and the server span,
// which the decisions made on its context annotate.
//
// Each protocol lives in two places a newcomer can name: its pure rules
// (rules, rules/mcp, rules/a2a: no I/O) and its doors under proxy/<protocol>
// (the standalone sidecar), admitted by one gate per family: proxy/gate for
// the JSON-RPC protocols (MCP and A2A, sidecar and ext_authz alike) and
// proxy/macp/admission for MACP (the grpc-go door, the frame relay and
// ext_authz). proxy/extauthz maps Envoy's CheckRequest onto those gates and
// their refusals onto a CheckResponse; it has no protocol logic of its own.
//
// # Adding a fourth protocol
//
//  1. rules/<p>: the pure rules. Parse a request as every peer of the
//     protocol parses it (refuse what two peers would read differently),
//     the state machine, the verdict of each message. No I/O, no time but
//     what the caller passes.
//  2. policies: a Rego module and the authority matrix it is built from,
//     with the catalog drift tests (macp.ModeTypes is the model).
//  3. proxy: the decision (EnforceX on the Enforcer, built with
//     newDecision and finished by finish, so that ids, dry run, the
//     observer and the decision log come for free); what it learns from
//     answers is returned as facts and applied when it settles.
//  4. The front door: for JSON-RPC over HTTP a gate.Spec (path, methods,
//     challenge, parse), never a copy of the admission sequence; for a new
//     wire, one admission used by every door of that protocol.
//  5. proxy/<p>: the sidecar (forward what was decided, filter answers,
//     seal every upstream id a client sees with proxy/handle).
//  6. proxy/extauthz: one case mapping CheckRequest onto the gate. Each
//     door serves a request in one flight (gate.Serve for HTTP sidecars;
//     Check for ext_authz) and names its method at the gate; the method
//     label's table (requestMethods) gets the protocol's methods.
//  7. cmd/warden: a config section (documented: TestConfigDoc), flags, wiring.
//  8. Tests: the door-equivalence table (test/doors_test.go) gets the
//     protocol's rows for every door; an attack table against the real peer
//     direct and through Warden; test/arch_test.go gets the package's arrows.
package proxy

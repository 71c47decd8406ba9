// Package proxy is Warden's protocol-free core, the one Enforcer every
// protocol's decision is made on: what one decision reads (Snapshot: the
// authenticator and the policy engine, swapped whole on reload), Decision
// (started with a random id minted in one place, Start; finished with dry run
// applied in one place, Finish; observed in one place, Observed), what a
// decision holds until the upstream answers (Pending), what it learns from
// the answer (Learn, into the owner table of MCP and A2A ids, proxy/owners),
// the refusals a door makes before there is a message to decide (Refuse,
// Deny, RefuseAuth), and the Flight every door begins for each request
// (Enforcer.Begin): the request metrics and the server span, which the
// decisions made on its context annotate. It imports no protocol's rules and
// no wire (test/arch_test.go).
//
// Each protocol lives in two places a newcomer can name: its pure rules
// (rules/macp, rules/mcp, rules/a2a: no I/O) and its packages under
// proxy/<protocol>: the decision (proxy/macp/sessions, proxy/mcp/tasks,
// proxy/a2a/tenancy: a Decider built on the Enforcer, shared by the
// protocol's sidecar and ext_authz), the admission, one gate per family
// (proxy/gate for the JSON-RPC protocols, MCP and A2A, sidecar and ext_authz
// alike; proxy/macp/admission for MACP: the grpc-go door, the frame relay
// and ext_authz), and the standalone sidecar (proxy/<protocol> itself).
// proxy/extauthz maps Envoy's CheckRequest onto those gates and deciders and
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
//  3. proxy/<p>/<decision>: the decision, a Decider built on the core
//     Enforcer (New(e), no goroutines): Enforce runs in proxy.Observed,
//     starts with Enforcer.Start, reads one Enforcer.Snapshot, and ends
//     with Enforcer.Finish, so that ids, dry run, the observer and the
//     decision log come for free; what it holds until the upstream answers
//     is a proxy.Pending (Decision.Hold); what it learns from answers is
//     returned as facts and applied when it settles (Enforcer.Learning with
//     the protocol's Canon). Name the package after what it decides, never
//     after another package (internal packages are imported without
//     aliases). Never add the protocol to this package.
//  4. The front door: for JSON-RPC over HTTP a gate.Spec (path, methods,
//     challenge, parse, and Requests: the proxy.Protocol its requests are
//     counted and traced as), never a copy of the admission sequence; for a
//     new wire, one admission used by every door of that protocol, which
//     gives its proxy.Protocol to Enforcer.Begin.
//  5. proxy/<p>: the sidecar (forward what was decided, filter answers,
//     seal every upstream id a client sees with proxy/handle).
//  6. proxy/extauthz: one case mapping CheckRequest onto the gate and the
//     decider. Each door serves a request in one flight (Gate.Serve for
//     HTTP sidecars; Check for ext_authz) and names its method at the gate.
//  7. cmd/warden: a config section (documented: TestConfigDoc), flags,
//     wiring (a decider that keeps state is built once and given to every
//     door that decides with it).
//  8. Tests: the door-equivalence table (test/doors_test.go) gets the
//     protocol's rows for every door; an attack table against the real peer
//     direct and through Warden; test/arch_test.go gets the package's arrows
//     (protocols lists it: the core and the other protocols import none of
//     its packages).
package proxy

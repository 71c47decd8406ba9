// Package admission is MACP's front door, written once for its three doors:
// the grpc-go sidecar, the HTTP/2 frame relay and Envoy's ext_authz. A door
// hands it what it read of a call, in one order: the method path and the
// credentials of the header list (Admit), then, for a call Warden decides,
// the one request message (Request), and maps each Refusal onto its wire
// once. Credentials are checked before any of a call's body is read: a call
// whose credentials fail is answered from its header list.
package admission

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/headername"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// Gate admits the MACP calls of one listener.
type Gate struct {
	methods         Methods
	enf             *proxy.Enforcer
	publicDiscovery bool
	log             *slog.Logger
	pb              strictpb.Reader // reads every client message decided on
}

// New builds the gate: methods is the listener's method table; with
// publicDiscovery the discovery calls are admitted without credentials.
func New(methods Methods, enf *proxy.Enforcer, publicDiscovery bool, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{methods: methods, enf: enf, publicDiscovery: publicDiscovery, log: log}
}

// Headers is what a door read of a call's header list.
type Headers struct {
	// Method is the call's path (":path").
	Method string
	// Call is Method's kind when the door looked it up already in the
	// listener's table (Methods.Lookup, the table the gate was built
	// with), so that a call's path is looked up once; CallUnknown: the
	// gate looks it up.
	Call Call
	// Get returns a header's values, as the door's transport keeps them
	// (a call's metadata.MD): an interface, which holds the door's map
	// as it is, where a func would be a closure made for every call.
	Get Getter
	// Names are the names of the call's metadata (every field but the
	// pseudo-headers), each once; a call without metadata has an empty,
	// non-nil slice. Nil means the door gave none: the call is refused
	// (INTERNAL, logged as an error), so that a door that forgets them
	// cannot skip the rule on metadata names.
	Names []string
	// Chain is the client certificate chain the door's TLS verified (nil
	// without one).
	Chain []*x509.Certificate
	// Client is the client's address (the connection's peer).
	Client string
}

// Getter returns a header's values by its lower-case name.
type Getter interface {
	Get(name string) []string
}

// Admission is a call admitted, or refused, on its header list.
type Admission struct {
	// Call is the method's kind in the listener's table.
	Call Call
	// Method is the call's path; Op its method name ("CancelSession").
	Method, Op string
	// Anonymous is set for a call forwarded without credentials (a
	// pass-through service, or discovery when public): no principal, and
	// no credential or identity header of the client's may reach the
	// upstream.
	Anonymous bool
	// Principal and Credentials: whom the credentials proved, and the
	// credentials themselves (what the upstream is given for the principal
	// depends on them).
	Principal   authn.Principal
	Credentials authn.Credentials
	// Refusal, when not nil, is the answer: the call is refused.
	Refusal *Refusal
	// Source is whom the call came from (proxy.Source), recorded with
	// every decision made on it.
	Source proxy.Source
}

// Refusal is a refused call as a value, mapped onto each door's wire once.
type Refusal struct {
	// Status is the gRPC status a status answer carries.
	Status codes.Code
	// Code is the MACP error code (macp-error-code; the Ack's error code),
	// "" for a bare gRPC status (an unknown method).
	Code rules.Code
	// Text is a status answer's message; AckMessage the message of the Ack
	// a refused Send is answered with where the door can send one.
	Text, AckMessage string
	// DecisionID is the decision's id ("" when the refusal names none).
	DecisionID string
}

// Admit reads a call's method and credentials, in one order: the method
// table (an unknown path is UNIMPLEMENTED), the names of its metadata
// (asserted: INVALID_ARGUMENT), the calls forwarded without
// credentials, then the credentials (UNAVAILABLE while the keys to check
// them are; UNAUTHENTICATED when they fail, or in dry run the call admitted
// as the anonymous principal, the would-be refusal recorded).
//
// Every decision recorded here carries the call's source (proxy.WithSource,
// made for it alone: a call admitted without one, a Send, costs no context
// of its own).
func (g *Gate) Admit(ctx context.Context, h Headers) Admission {
	a := Admission{Call: h.Call, Method: h.Method, Op: strings.TrimPrefix(h.Method, MACPService)}
	if a.Call == CallUnknown {
		a.Call = g.methods.Lookup(h.Method)
	}
	a.Source = g.source(ctx, h)
	f := proxy.FlightOf(ctx)
	f.SetMethod(h.Method)
	if a.Call == CallUnknown {
		r := g.Unknown(proxy.WithSource(ctx, a.Source), h.Method)
		a.Refusal = &r
		return a
	}
	if r := g.asserted(ctx, a.Source, h.Names); r != nil {
		a.Refusal = r
		return a
	}
	switch a.Call {
	case CallPassThrough:
		a.Anonymous = true
		return a
	case CallDiscovery:
		if g.publicDiscovery {
			a.Anonymous = true
			g.enf.Admitted(proxy.WithSource(ctx, a.Source), "macp", "", a.Op)
			return a
		}
	}
	var err error
	a.Credentials, err = authn.FromHeaders(h.Get.Get, h.Chain)
	if err == nil {
		a.Principal, err = g.enf.Authenticate(ctx, a.Credentials)
	}
	if err == nil {
		// The runtime names the sender of a JWT it is forwarded by its sub:
		// decided as another identity, it would be applied as that one.
		err = authn.NamedBySubject(a.Principal)
	}
	switch {
	case errors.Is(err, authn.ErrKeysUnavailable):
		g.log.Warn("cannot authenticate: verification keys unavailable", "err", err, a.Source.Attr())
		a.Refusal = &Refusal{Status: codes.Unavailable, Code: rules.CodeInternal, Text: "authentication keys unavailable; retry"}
	case err != nil:
		d := g.enf.RefuseAuth(proxy.WithSource(ctx, a.Source), "macp", a.Op, err)
		if d.DryRun {
			// forwarded as the anonymous principal: decided as one, with
			// no identity of Warden's added
			a.Principal, a.Credentials = authn.Principal{}, authn.Credentials{}
			return a
		}
		r := decided(d)
		a.Refusal = &r
	case a.Call == CallDiscovery:
		g.enf.Admitted(proxy.WithSource(ctx, a.Source), "macp", a.Principal.ID, a.Op)
	}
	if a.Refusal == nil {
		f.SetPrincipal(a.Principal.ID)
	}
	return a
}

// asserted refuses a call whose door gave no metadata names (a bug of
// the door's: INTERNAL), or a call holding a metadata field the runtime, or a hop
// before it, could read as the caller's identity (x-forwarded-user,
// x-tenant-id, x-macp-agent-id, ...), as another method or target
// (x-http-method-override, ...), or as another field (a name holding '_'):
// the one rule every door applies (headername), here before credentials,
// as the JSON-RPC gate applies it; nil when there is none.
func (g *Gate) asserted(ctx context.Context, src proxy.Source, names []string) *Refusal {
	if names == nil {
		g.log.ErrorContext(ctx, "a MACP door gave the gate no metadata names: call refused")
		return &Refusal{Status: codes.Internal, Code: rules.CodeInternal, Text: string(rules.CodeInternal) + ": the call's metadata names were not read"}
	}
	for _, name := range names {
		kind := headername.Of(name, nil)
		if kind == headername.None {
			continue
		}
		return g.malformed(proxy.WithSource(ctx, src), kind.Why(name))
	}
	return nil
}

// source is the call's source: the one its context carries already
// (ext_authz's, read from Envoy's CheckRequest), else the door's peer
// address, the call's x-request-id (or a fresh one), POST and the method
// path.
func (g *Gate) source(ctx context.Context, h Headers) proxy.Source {
	if s := proxy.SourceOf(ctx); s != (proxy.Source{}) {
		return s
	}
	var id string
	if v := h.Get.Get("x-request-id"); len(v) == 1 {
		id = v[0]
	}
	return g.enf.NewSource(h.Client, id, "POST", h.Method)
}

// Unknown is the answer to a path that is not exactly one of the
// listener's methods: it is never forwarded.
func (g *Gate) Unknown(ctx context.Context, method string) Refusal {
	msg := "unknown method " + strconv.Quote(method)
	d := g.enf.Refuse(ctx, "macp", "", "", rules.Verdict{Code: rules.CodeInvalidEnvelope, Reason: rules.ReasonUnknownMethod, Detail: msg})
	return Refusal{Status: codes.Unimplemented, Text: msg + " (warden decision " + d.ID + ")", DecisionID: d.ID}
}

// Framed is the answer to a call on a door whose transport does not hold
// it to gRPC's framing (ext_authz sees every HTTP request): nil for a POST
// with content type application/grpc or application/grpc+proto, else a
// refusal. A gRPC method is served only framed as gRPC.
func (g *Gate) Framed(ctx context.Context, httpMethod, contentType string) *Refusal {
	if httpMethod == "POST" && GRPCContentType(contentType) {
		return nil
	}
	return g.malformed(ctx, "a gRPC method must be called with POST and content-type application/grpc")
}

// malformed refuses a call its header list makes malformed, INVALID_ENVELOPE
// (INVALID_ARGUMENT), with msg and the decision's id.
func (g *Gate) malformed(ctx context.Context, msg string) *Refusal {
	const c = rules.CodeInvalidEnvelope
	d := g.enf.Refuse(ctx, "macp", "", "", rules.Verdict{Code: c, Reason: rules.ReasonMalformedRequest, Detail: msg})
	text := string(c) + ": " + msg
	if d.ID != "" {
		text += " (warden decision " + d.ID + ")"
	}
	return &Refusal{Status: codes.Code(c.GRPCStatus()), Code: c, Text: text, DecisionID: d.ID}
}

// GRPCContentType reports whether ct is gRPC's (application/grpc,
// optionally +proto).
func GRPCContentType(ct string) bool {
	return ct == "application/grpc" || ct == "application/grpc+proto"
}

// Unmarshal decodes a client's message as the runtime reads it
// (strictpb), remembering the schemas it walked.
func (g *Gate) Unmarshal(b []byte, m proto.Message) error { return g.pb.Unmarshal(b, m) }

// Request reads the one request message of an admitted Send or control
// call into the request to decide, as the runtime reads it (strictpb: a
// message protobuf-go and prost would read differently is refused); a
// Send's envelope in place when it can (readSend). The request's
// Principal points into a, which costs no copy of its own.
func (g *Gate) Request(a *Admission, msg []byte) (sessions.Request, *Refusal) {
	p := &a.Principal
	switch a.Call {
	case CallSend:
		if env, ok := readSend(msg); ok {
			return sessions.Request{Principal: p, Envelope: env, Source: a.Source}, nil
		}
		var sr macpv1.SendRequest
		err := g.Unmarshal(msg, &sr)
		if err == nil && sr.GetEnvelope() == nil {
			err = errors.New("no envelope")
		}
		if err != nil {
			return sessions.Request{}, invalid("SendRequest does not decode or carries no envelope: " + err.Error())
		}
		return sessions.Request{Principal: p, Envelope: sr.GetEnvelope(), Source: a.Source}, nil
	case CallControl:
		var cr macpv1.CancelSessionRequest // the three requests are {session_id, reason}
		err := g.Unmarshal(msg, &cr)
		if err == nil && cr.GetSessionId() == "" {
			err = errors.New("no session_id")
		}
		if err != nil {
			return sessions.Request{}, invalid(a.Op + " request does not decode or names no session: " + err.Error())
		}
		return sessions.Request{Principal: p, Op: a.Op, SessionID: cr.GetSessionId(), Source: a.Source}, nil
	}
	return sessions.Request{}, invalid(a.Op + " is not decided on its message")
}

func invalid(msg string) *Refusal {
	return &Refusal{Status: codes.InvalidArgument, Code: rules.CodeInvalidEnvelope, Text: string(rules.CodeInvalidEnvelope) + ": " + msg, AckMessage: msg}
}

// Refused is the answer to a request the decision d refused. A session
// the caller may not see (one that does not exist, or whose initiator and
// participants the caller is not among) gets the runtime's own answer for
// a session that does not exist, word for word and with no decision id, so
// that nothing tells the two apart: SESSION_NOT_FOUND, "UnknownSession" in
// a Send's Ack, NOT_FOUND "Session '<id>' not found" for a control call.
func Refused(d proxy.Decision, r sessions.Request) Refusal {
	if d.Code == rules.CodeSessionNotFound {
		return unknownSession(r)
	}
	return decided(d)
}

// unknownSession is the runtime's answer for a session it does not hold.
func unknownSession(r sessions.Request) Refusal {
	if r.Op != "" {
		return NoSession(r.SessionID)
	}
	return Refusal{Status: codes.NotFound, Code: rules.CodeSessionNotFound, Text: string(rules.CodeSessionNotFound) + ": UnknownSession", AckMessage: "UnknownSession"}
}

// NoSession is the runtime's answer to a call on a session (a control
// call, GetSession) that names one it does not hold: NOT_FOUND "Session
// '<id>' not found", SESSION_NOT_FOUND. A caller who may not see a session
// gets it too, word for word, whether the session exists or not.
func NoSession(sessionID string) Refusal {
	return Refusal{Status: codes.NotFound, Code: rules.CodeSessionNotFound, Text: "Session '" + sessionID + "' not found"}
}

// TakesPart is the one participant check of the session reads: a principal
// sees a session it initiated or takes part in (the sidecar's GetSession
// and WatchSessions filters, ext_authz's GetSession).
func TakesPart(initiator string, participants []string, principal string) bool {
	return initiator == principal || slices.Contains(participants, principal)
}

// decided is the refusal of a decision: its code, and its message with the
// decision id.
func decided(d proxy.Decision) Refusal {
	msg := d.Message + " (warden decision " + d.ID + ")"
	return Refusal{Status: codes.Code(d.Code.GRPCStatus()), Code: d.Code, Text: string(d.Code) + ": " + msg, AckMessage: msg, DecisionID: d.ID}
}

// Undecided is the answer when Warden could not decide (a store or the
// runtime failed; the detail goes to the log): refused, retryable.
var Undecided = Refusal{Status: codes.Unavailable, Code: rules.CodeInternal, Text: "warden could not decide this message; retry", AckMessage: "warden could not decide this message; retry"}

// Ack is the Ack a refused Send is answered with, as the runtime answers
// one, on a door that can send one.
func (r Refusal) Ack(env *macpv1.Envelope) *macpv1.Ack {
	sid, mid := env.GetSessionId(), env.GetMessageId()
	return &macpv1.Ack{Ok: false, MessageId: mid, SessionId: sid,
		Error: &macpv1.MACPError{Code: string(r.Code), Message: r.AckMessage, SessionId: sid, MessageId: mid}}
}

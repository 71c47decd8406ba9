package admission

import (
	"strings"

	"github.com/agentwarden/warden/proxy"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// MACPService is the runtime's gRPC service path prefix.
const MACPService = "/macp.v1.MACPRuntimeService/"

// Call is how Warden treats one gRPC method of the MACP listener. Every
// adapter that sees MACP calls (the sidecar and ext_authz) reads this one
// table: a path that is not in it, spelled exactly, is refused.
type Call uint8

// The kinds of call.
const (
	// CallUnknown is any path not in the table: refused (UNIMPLEMENTED).
	CallUnknown Call = iota
	// CallSend is Send: one envelope, decided.
	CallSend
	// CallStream is StreamSession: every envelope decided.
	CallStream
	// CallControl is CancelSession, SuspendSession and ResumeSession: decided.
	CallControl
	// CallGetSession, CallListSessions, CallWatchSessions and CallWatchSignals
	// are reads filtered to what the caller takes part in.
	CallGetSession
	CallListSessions
	CallWatchSessions
	CallWatchSignals
	// CallRegisterPolicy is forwarded and recorded.
	CallRegisterPolicy
	// CallUnregisterPolicy is forwarded and the policy forgotten.
	CallUnregisterPolicy
	// CallAuthenticated is forwarded after authentication.
	CallAuthenticated
	// CallDiscovery is forwarded after authentication, or without it when
	// public discovery is on.
	CallDiscovery
	// CallPassThrough is a service the operator named (gRPC health and
	// reflection by default): forwarded without credentials.
	CallPassThrough
)

// macpCalls is the runtime's service, method by method (WIRE.md).
var macpCalls = map[string]Call{
	MACPService + "Send":              CallSend,
	MACPService + "StreamSession":     CallStream,
	MACPService + "CancelSession":     CallControl,
	MACPService + "SuspendSession":    CallControl,
	MACPService + "ResumeSession":     CallControl,
	MACPService + "GetSession":        CallGetSession,
	MACPService + "ListSessions":      CallListSessions,
	MACPService + "WatchSessions":     CallWatchSessions,
	MACPService + "WatchSignals":      CallWatchSignals,
	MACPService + "RegisterPolicy":    CallRegisterPolicy,
	MACPService + "UnregisterPolicy":  CallUnregisterPolicy,
	MACPService + "GetPolicy":         CallAuthenticated,
	MACPService + "ListPolicies":      CallAuthenticated,
	MACPService + "WatchPolicies":     CallAuthenticated,
	MACPService + "RegisterExtMode":   CallAuthenticated,
	MACPService + "UnregisterExtMode": CallAuthenticated,
	MACPService + "PromoteMode":       CallAuthenticated,
	MACPService + "Initialize":        CallDiscovery,
	MACPService + "GetManifest":       CallDiscovery,
	MACPService + "ListModes":         CallDiscovery,
	MACPService + "ListRoots":         CallDiscovery,
	MACPService + "ListExtModes":      CallDiscovery,
	MACPService + "WatchModeRegistry": CallDiscovery,
	MACPService + "WatchRoots":        CallDiscovery,
}

// DefaultPassThrough are the services forwarded without credentials unless
// the operator names others: gRPC health checking and server reflection.
var DefaultPassThrough = []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}

// Methods is the MACP listener's allow-list: the runtime's methods plus the
// pass-through services. It is immutable once built.
type Methods struct {
	pass  map[string]bool // service names
	unary map[string]bool // the runtime's methods of one message each way
}

// NewMethods builds the allow-list; passThrough are full gRPC service names
// (package.Service) whose every method is forwarded without credentials.
func NewMethods(passThrough []string) Methods {
	m := Methods{pass: make(map[string]bool, len(passThrough)), unary: map[string]bool{}}
	for _, s := range passThrough {
		m.pass[s] = true
	}
	// the service's descriptor lists its unary methods apart from its streams
	for _, d := range macpv1.MACPRuntimeService_ServiceDesc.Methods {
		if path := MACPService + d.MethodName; macpCalls[path] != CallUnknown {
			m.unary[path] = true
		}
	}
	return m
}

// Unary reports whether path is a method of the runtime (macpCalls) that
// takes one request message and answers one (a stream's answer does not
// end with its message: StreamSession and the Watch calls).
func (m Methods) Unary(path string) bool { return m.unary[path] }

// Lookup returns how path (":path" of the HTTP/2 request, exactly as sent)
// is treated. Only exact paths of the form /package.Service/Method match: a
// query, a fragment, a percent-escape, a doubled or trailing slash or a
// differently cased name is CallUnknown, because the upstream might read it
// as another method than Warden did.
func (m Methods) Lookup(path string) Call {
	if c, ok := macpCalls[path]; ok {
		return c
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || !strings.HasPrefix(path, "/") || !m.pass[svc] || !plainName(method) {
		return CallUnknown
	}
	return CallPassThrough
}

// plainName reports whether s is a protobuf identifier.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// requests is MACP for the request metrics and spans (proxy.Flight): the
// runtime's methods, named without their service.
var requests = func() *proxy.Protocol {
	p := &proxy.Protocol{Name: "macp", Service: strings.Trim(MACPService, "/"), Methods: map[string]bool{}}
	for path := range macpCalls {
		p.Methods[strings.TrimPrefix(path, MACPService)] = true
	}
	return p
}()

// Requests is MACP as every MACP door begins a request's flight
// (proxy.Enforcer.Begin).
func Requests() *proxy.Protocol { return requests }

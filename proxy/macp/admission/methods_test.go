package admission

import "testing"

func TestMethodsLookup(t *testing.T) {
	m := NewMethods(DefaultPassThrough)
	tests := []struct {
		path string
		want Call
	}{
		{"/macp.v1.MACPRuntimeService/Send", CallSend},
		{"/macp.v1.MACPRuntimeService/StreamSession", CallStream},
		{"/macp.v1.MACPRuntimeService/CancelSession", CallControl},
		{"/macp.v1.MACPRuntimeService/WatchSignals", CallWatchSignals},
		{"/macp.v1.MACPRuntimeService/ListSessions", CallListSessions},
		{"/macp.v1.MACPRuntimeService/GetPolicy", CallAuthenticated},
		{"/macp.v1.MACPRuntimeService/Initialize", CallDiscovery},
		{"/grpc.health.v1.Health/Check", CallPassThrough},
		{"/grpc.health.v1.Health/Watch", CallPassThrough},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", CallPassThrough},
		// Every spelling the runtime might read as a method Warden did not
		// decide is unknown.
		{"/macp.v1.MACPRuntimeService/Send?x=1", CallUnknown},
		{"/macp.v1.MACPRuntimeService/Send#frag", CallUnknown},
		{"/macp.v1.MACPRuntimeService/Send/", CallUnknown},
		{"/macp.v1.MACPRuntimeService//Send", CallUnknown},
		{"//macp.v1.MACPRuntimeService/Send", CallUnknown},
		{"/macp.v1.MACPRuntimeService/send", CallUnknown},
		{"/macp.v1.MACPRuntimeService/Se%6Ed", CallUnknown},
		{"/macp.v1.macpruntimeservice/Send", CallUnknown},
		{"macp.v1.MACPRuntimeService/Send", CallUnknown},
		{"/macp.v1.MACPRuntimeService/Unknown", CallUnknown},
		{"/macp.v1.MACPRuntimeService/ListSessions?x=1", CallUnknown},
		{"/grpc.health.v1.Health/Check?x=1", CallUnknown},
		{"/grpc.health.v1.Health/Check/x", CallUnknown},
		{"/grpc.health.v1.Health/", CallUnknown},
		{"/other.Service/Method", CallUnknown},
		{"", CallUnknown},
		{"/", CallUnknown},
	}
	for _, tc := range tests {
		if got := m.Lookup(tc.path); got != tc.want {
			t.Errorf("Lookup(%q) = %d, want %d", tc.path, got, tc.want)
		}
	}
	if got := NewMethods(nil).Lookup("/grpc.health.v1.Health/Check"); got != CallUnknown {
		t.Errorf("with no pass-through services, health is %d", got)
	}
}

// TestMethodsUnary: the runtime's methods of one message each way, read off
// the service's descriptor; the streams and every other path are not.
func TestMethodsUnary(t *testing.T) {
	m := NewMethods(DefaultPassThrough)
	for path, want := range map[string]bool{
		MACPService + "Send":              true,
		MACPService + "GetSession":        true,
		MACPService + "ListSessions":      true,
		MACPService + "GetPolicy":         true,
		MACPService + "PromoteMode":       true,
		MACPService + "Initialize":        true,
		MACPService + "ListExtModes":      true,
		MACPService + "StreamSession":     false,
		MACPService + "WatchSessions":     false,
		MACPService + "WatchSignals":      false,
		MACPService + "WatchPolicies":     false,
		MACPService + "WatchModeRegistry": false,
		MACPService + "WatchRoots":        false,
		MACPService + "Send?x=1":          false,
		"/grpc.health.v1.Health/Check":    false, // not the runtime's
	} {
		if got := m.Unary(path); got != want {
			t.Errorf("Unary(%q) = %v, want %v", path, got, want)
		}
	}
	n := 0
	for path := range macpCalls {
		if m.Unary(path) {
			n++
		}
	}
	if n != len(macpCalls)-6 {
		t.Errorf("%d unary methods of %d, want all but the six streams", n, len(macpCalls))
	}
}

package proxy

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

//go:build !wardenoracle

package macp

import (
	"strings"
	"testing"
)

// TestGRPCDoorRetired: the product refuses the grpc-go front door with an
// error that says where it went (issue 28: the relay is the only MACP front
// door; the grpc-go one stays in the test oracle). Before, transport grpc
// was valid and served a grpc-go server.
func TestGRPCDoorRetired(t *testing.T) {
	c := Config{Listen: "127.0.0.1:0", Upstream: "127.0.0.1:1", Plaintext: true, Transport: TransportGRPC}
	err := c.Validate()
	if err == nil {
		t.Fatal("transport grpc is valid in the product")
	}
	for _, want := range []string{"macp.transport", "retired", "relay", "wardenoracle"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
	if _, err := New(c, devEnforcer(t), nil, nil, nil); err == nil {
		t.Error("New serves transport grpc in the product")
	}
}

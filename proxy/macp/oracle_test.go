//go:build wardenoracle

package macp

import (
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestRelayable(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   metadata.MD
		want bool
	}{
		{"none", nil, false},
		{"content-type only", metadata.Pairs("content-type", "application/grpc"), false},
		{"a header of the runtime's", metadata.Pairs("content-type", "application/grpc", "x-runtime", "1"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := relayable(tc.md); got != tc.want {
				t.Errorf("relayable(%v) = %v, want %v", tc.md, got, tc.want)
			}
		})
	}
}

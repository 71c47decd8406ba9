package state

import (
	"context"
	"testing"
)

// BenchmarkClaim is one decision's round trip to a local redis-server.
func BenchmarkClaim(b *testing.B) {
	addr, stop := redisServerB(b)
	defer stop()
	r, err := New(Config{URL: "redis://" + addr})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	if err := r.Create(ctx, "t", "alice", "working"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Claim(ctx, "t", "alice"); err != nil {
			b.Fatal(err)
		}
	}
}

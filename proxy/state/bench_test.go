package state

import (
	"context"
	"testing"
	"time"
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
	if _, err := r.Create(ctx, "t", "alice", "working", 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.Claim(ctx, "t", "alice", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSession is what an allowed ext_authz decision pays a local
// redis-server: the version check (nothing read when current) and the
// compare-and-set of a 300-byte state, charged to its initiator (a share
// of 8: the set member updated, nothing trimmed).
func BenchmarkSession(b *testing.B) {
	addr, stop := redisServerB(b)
	defer stop()
	r, err := New(Config{URL: "redis://" + addr})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	data := make([]byte, 300)
	v, _, _, err := r.Commit(ctx, "s", "", data, time.Now().Add(time.Minute), "alice", 8)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, changed, err := r.Load(ctx, "s", v); err != nil || changed {
			b.Fatal(err, changed)
		}
		next, _, ok, err := r.Commit(ctx, "s", v, data, time.Now().Add(time.Minute), "alice", 8)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
		v = next
	}
}

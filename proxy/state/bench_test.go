package state

import (
	"context"
	"testing"
	"time"
)

// BenchmarkClaim is one decision's round trip to a local redis-server.
func BenchmarkClaim(b *testing.B) {
	r := benchRedis(b)
	ctx := context.Background()
	if _, _, err := r.Create(ctx, "t", "alice", "working", 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := r.Claim(ctx, "t", "alice", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSession is what an allowed ext_authz decision pays a local
// redis-server: the version check (nothing read when current) and the
// compare-and-set of a 300-byte state, charged to its initiator (a share
// of 8: the set member updated, nothing trimmed).
func BenchmarkSession(b *testing.B) {
	r := benchRedis(b)
	ctx := context.Background()
	data := make([]byte, 300)
	v, _, _, _, err := r.Commit(ctx, "s", "", data, time.Now().Add(time.Minute), "alice", 8)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, changed, err := r.Load(ctx, "s", v); err != nil || changed {
			b.Fatal(err, changed)
		}
		next, _, ok, _, err := r.Commit(ctx, "s", v, data, time.Now().Add(time.Minute), "alice", 8)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
		v = next
	}
}

// BenchmarkOwners is a lookup of one known entry held in a share (what a
// replica that does not hold it pays, and one that does once per usedFor):
// by its owner: one round trip, its owner's set touched in it.
func BenchmarkOwners(b *testing.B) {
	r := benchRedis(b)
	ctx := context.Background()
	if _, _, err := r.Create(ctx, "t", "alice", "working", 4); err != nil {
		b.Fatal(err)
	}
	ids := []string{"t"}
	b.ReportAllocs()
	for b.Loop() {
		if o, err := r.Owners(ctx, "alice", ids); err != nil || o[0] != "alice" {
			b.Fatal(o, err)
		}
	}
}

// benchRedis is a store on a local redis-server of b's own.
func benchRedis(b *testing.B) *Redis {
	addr, stop := redisServerB(b)
	b.Cleanup(stop)
	r, err := New(Config{URL: "redis://" + addr})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

package state

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A MACP session shared by ext_authz replicas is one hash,
// <prefix>macp:session:<session id>, with the fields v (version: random,
// new at every commit, so that a session lost and written again never
// passes for the one a replica cached) and d (macp.Session.AppendBinary).
// It expires TTL after the session can no longer accept messages.
func (r *Redis) sessionKey(id string) string { return r.cfg.Prefix + "macp:session:" + id }

// load: the session's version, and its state when the version is not the
// caller's; {""} when there is no entry.
var load = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return {''} end
if v == ARGV[1] then return {v} end
return {v, redis.call('HGET', KEYS[1], 'd')}`)

// Load returns the session's encoded state and version when its version is
// not have (sessions.Store); changed is false when it is. One round
// trip, which reads the state only when it changed.
func (r *Redis) Load(ctx context.Context, id, have string) ([]byte, string, bool, error) {
	v, err := r.run(ctx, load, "load session", []string{r.sessionKey(id)}, have)
	if err != nil {
		return nil, "", false, err
	}
	a, _ := v.([]any)
	if len(a) == 0 {
		return nil, "", false, fmt.Errorf("redis %s: load session: unexpected answer %v", r.addr, v)
	}
	version, _ := a[0].(string)
	if version == have {
		return nil, version, false, nil
	}
	var data []byte
	if len(a) == 2 {
		s, _ := a[1].(string)
		data = []byte(s)
	}
	return data, version, true, nil
}

// commit: compare-and-set on the version; {1} when written, else {0, the
// current version, the current state} ({0, ”} when there is no entry).
var commit = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'v', 'd')
local v = cur[1] or ''
if v ~= ARGV[1] then
  if v == '' then return {0, ''} end
  return {0, v, cur[2] or ''}
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return {1}`)

// Commit stores data as the session's state when its version is still have
// ("" for none) and returns the new version (sessions.Store). When
// another replica committed first, ok is false and version and current are
// the store's, so that the caller decides again without reading them. The
// entry expires TTL after expireAt.
func (r *Redis) Commit(ctx context.Context, id, have string, data []byte, expireAt time.Time) (version string, current []byte, ok bool, err error) {
	next := newVersion()
	at := strconv.FormatInt(expireAt.Add(r.cfg.TTL).UnixMilli(), 10)
	v, err := r.run(ctx, commit, "commit session", []string{r.sessionKey(id)}, have, next, data, at)
	if err != nil {
		return "", nil, false, err
	}
	a, _ := v.([]any)
	if len(a) == 0 {
		return "", nil, false, fmt.Errorf("redis %s: commit session: unexpected answer %v", r.addr, v)
	}
	if n, _ := a[0].(int64); n == 1 {
		return next, nil, true, nil
	}
	if len(a) == 3 {
		version, _ = a[1].(string)
		d, _ := a[2].(string)
		current = []byte(d)
	}
	return version, current, false, nil
}

// newVersion is 64 random bits from the runtime's ChaCha8 generator.
func newVersion() string {
	var b [8]byte
	u := rand.Uint64()
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

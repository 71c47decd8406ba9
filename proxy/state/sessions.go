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
// passes for the one a replica cached) and d (macp.Session.AppendBinary),
// and, while a replica's losses are noted, l (that replica's token), ln
// (its compare-and-sets lost in a row) and lx (when the note lapses, Redis's
// clock in milliseconds). It expires TTL after the session can no longer
// accept messages.
//
// Turns keep one replica from starving another on a hot session: without
// them, a replica whose commits reach Redis later than another's (a slower
// link, an overloaded machine) loses every compare-and-set while the other
// works through its queue, and refuses valid messages once its contention
// budget is spent. A commit that loses is noted against its replica, unless
// another replica's note stands; its second loss in a row makes the note
// its turn: every other replica's commit is then deferred (answered with its
// own version: nothing changed), so that its next attempt commits. A first
// loss alone takes no turn: the loser's immediate retry on the winner's
// state usually commits, and turns taken at once would make replicas that
// merely share a session wait for each other at every message. The note
// ends with that replica's next commit or version check (Load), or lapses
// turnTTL after its last loss (a replica that gave up or died holds the
// others that long at most).
func (r *Redis) sessionKey(id string) string { return r.cfg.Prefix + "macp:session:" + id }

// Each initiator's sessions are named, when a share bounds them, in one
// sorted set, <prefix>macp:initiator:<initiator>, scored by when each was
// last committed, and each names its initiator (field o): the owner table's
// rule, as for tasks (ownerKey), so that one agent starting sessions
// without end cannot fill the store every replica shares until their TTL.
func (r *Redis) initiatorKey(initiator string) string {
	return r.cfg.Prefix + "macp:initiator:" + initiator
}

// turnTTL is how long a replica's turn stands without its next attempt.
// It is far above an attempt's time (a round trip and a decision), so that
// a slow replica still finds its turn, and short enough that a replica that
// gave up its decision costs the others little.
const turnTTL = 100 * time.Millisecond

// load: the session's version, and its state when the version is not the
// caller's; {""} when there is no entry. A turn of the caller's (ARGV[2])
// ends: its decision commits nothing.
var load = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'v', 'l')
local v = cur[1]
if not v then return {''} end
if cur[2] == ARGV[2] then redis.call('HDEL', KEYS[1], 'l', 'ln', 'lx') end
if v == ARGV[1] then return {v} end
return {v, redis.call('HGET', KEYS[1], 'd')}`)

// Load returns the session's encoded state and version when its version is
// not have (sessions.Store); changed is false when it is. One round
// trip, which reads the state only when it changed. It ends this replica's
// turn, if it has one.
func (r *Redis) Load(ctx context.Context, id, have string) ([]byte, string, bool, error) {
	v, err := r.run(ctx, load, "load session", []string{r.sessionKey(id)}, have, r.turn)
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

// commit: compare-and-set on the version, in turns; {1} when written. A
// loss answers {0, the current version, the current state} ({0, ”} when
// there is no entry) and is noted against the caller (ARGV[5]) unless
// another replica's note stands; at the caller's second loss in a row its
// note becomes the next turn, and while another's turn stands the commit is
// deferred: {0, the caller's version}. The caller's commit ends its note.
// With a share (ARGV[8] > 0) a written session names its initiator (field
// o, ARGV[7]) and is the initiator's most recently committed (ARGV[9]: now)
// in the initiator's set (KEYS[2]), which lives as long as the last of its
// sessions and is trimmed to the share by the owner table's rule (trim): a
// commit that trimmed answers {1, how many it dropped}.
var commit = redis.NewScript(trimOwner + `
local cur = redis.call('HMGET', KEYS[1], 'v', 'd', 'l', 'ln', 'lx')
local v = cur[1] or ''
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = cur[3] and tonumber(cur[5] or '0') > now
local mine = live and cur[3] == ARGV[5]
if v ~= ARGV[1] then
  if v == '' then return {0, ''} end
  if mine then
    redis.call('HINCRBY', KEYS[1], 'ln', 1)
    redis.call('HSET', KEYS[1], 'lx', now + tonumber(ARGV[6]))
  elseif not live then
    redis.call('HSET', KEYS[1], 'l', ARGV[5], 'ln', 1, 'lx', now + tonumber(ARGV[6]))
  end
  return {0, v, cur[2] or ''}
end
if live and not mine and tonumber(cur[4] or '0') >= 2 then return {0, v} end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
if cur[3] and not live or mine then redis.call('HDEL', KEYS[1], 'l', 'ln', 'lx') end
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
local share = tonumber(ARGV[8])
if share > 0 and ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'o', ARGV[7])
  redis.call('ZADD', KEYS[2], ARGV[9], ARGV[10])
  local left = redis.call('PTTL', KEYS[2])
  if left < 0 or now + left < tonumber(ARGV[4]) then redis.call('PEXPIREAT', KEYS[2], ARGV[4]) end
  local dropped = trim(KEYS[2], share, ARGV[7], ARGV[10], ARGV[11])
  if dropped > 0 then return {1, dropped} end
end
return {1}`)

// Commit stores data as the session's state when its version is still have
// ("" for none) and returns the new version (sessions.Store). When
// another replica committed first, ok is false and version and current are
// the store's, so that the caller decides again without reading them (a
// second loss in a row gives this replica the next turn). While another
// replica's turn stands, ok
// is false, version is have and current nil: the caller tries again. The
// entry expires TTL after expireAt. With share > 0 the session is charged
// to its initiator, as Create charges a task to its owner: an initiator
// holds at most share sessions, and past it loses its own least recently
// committed ones (never another's, never this one): dropped is how many.
func (r *Redis) Commit(ctx context.Context, id, have string, data []byte, expireAt time.Time, initiator string, share int) (version string, current []byte, ok bool, dropped int, err error) {
	next := newVersion()
	at := strconv.FormatInt(expireAt.Add(r.cfg.TTL).UnixMilli(), 10)
	keys := []string{r.sessionKey(id), r.initiatorKey(initiator)}
	v, err := r.run(ctx, commit, "commit session", keys, have, next, data, at, r.turn, turnTTL.Milliseconds(),
		initiator, share, r.used(), id, r.sessionKey(""))
	if err != nil {
		return "", nil, false, 0, err
	}
	a, _ := v.([]any)
	if len(a) == 0 {
		return "", nil, false, 0, fmt.Errorf("redis %s: commit session: unexpected answer %v", r.addr, v)
	}
	if n, _ := a[0].(int64); n == 1 {
		if len(a) == 2 {
			d, _ := a[1].(int64)
			dropped = int(d)
		}
		return next, nil, true, dropped, nil
	}
	if len(a) >= 2 {
		version, _ = a[1].(string)
	}
	if len(a) == 3 {
		d, _ := a[2].(string)
		current = []byte(d)
	}
	return version, current, false, 0, nil
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

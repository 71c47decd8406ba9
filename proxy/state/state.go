// Package state keeps the protocol state Warden replicas share in Redis: the
// task table (owner, status and steer count of each upstream MCP task, owner
// and state of each A2A task, owner of each A2A context; an owner is set
// once, by the first replica to record it) and,
// for ext_authz fleets, the MACP sessions (encoded state under a version for
// compare-and-set). Every operation is one round trip, atomic on the server (a Lua
// script), and bounded by the configured timeout; an error means the state
// could not be read or written, and the caller fails closed.
package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Config selects the shared state backend. An empty URL means none: each
// replica keeps its own table.
type Config struct {
	// URL is redis://[user:password@]host:port[/db] (rediss:// for TLS).
	URL string `yaml:"url"`
	// Timeout bounds each operation, the connection included (default 200ms).
	Timeout time.Duration `yaml:"timeout"`
	// Prefix starts every key Warden writes (default "warden:").
	Prefix string `yaml:"prefix"`
	// TTL is how long a task's entry lives after its last use, and a MACP
	// session's after it can accept no more messages (default 24h).
	TTL time.Duration `yaml:"ttl"`
}

// Defaults of Config.
const (
	DefaultTimeout = 200 * time.Millisecond
	DefaultPrefix  = "warden:"
	DefaultTTL     = 24 * time.Hour
)

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.URL == "" {
		return nil
	}
	if _, err := redis.ParseURL(c.URL); err != nil {
		return fmt.Errorf("state.url: %w", err)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("state.timeout: %v is negative", c.Timeout)
	}
	if c.TTL < 0 || c.TTL > 0 && c.TTL < time.Second {
		return fmt.Errorf("state.ttl: %v is below one second", c.TTL)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	return c
}

// Redis is the shared task table. It is safe for concurrent use.
type Redis struct {
	cfg    Config
	client *redis.Client
	addr   string
	turn   string        // this replica's token for its turns on hot MACP sessions
	last   *atomic.Int64 // the last score used gave
	// the scripts' arguments that never change, boxed once (an argument
	// boxed per call is an allocation per call): the TTL in milliseconds,
	// the prefix of the tasks' keys (key("")) and of the owners' sets
	// (ownerKey("")).
	ttlArg, tasksArg, ownersArg any
}

// New returns the Redis backend of cfg. It connects lazily, on the first
// operation, and starts no goroutine.
func New(cfg Config) (*Redis, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.URL == "" {
		return nil, errors.New("state: no url")
	}
	cfg = cfg.withDefaults()
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("state.url: %w", err)
	}
	// Fail fast: one attempt per operation, bounded by the timeout; the
	// caller refuses what it cannot decide rather than waiting.
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = cfg.Timeout, cfg.Timeout, cfg.Timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.MinIdleConns = 0 // no background dialing
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	r := &Redis{cfg: cfg, client: redis.NewClient(opt), addr: Redact(cfg.URL), turn: newVersion(), last: new(atomic.Int64)}
	r.ttlArg, r.tasksArg, r.ownersArg = strconv.FormatInt(cfg.TTL.Milliseconds(), 10), r.key(""), r.ownerKey("")
	return r, nil
}

// Redact returns a Redis URL without its credentials, for logs.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "redis"
	}
	u.User = nil
	return u.String()
}

// String names the backend without credentials.
func (r *Redis) String() string { return r.addr }

// Close closes the connections.
func (r *Redis) Close() error { return r.client.Close() }

// Ready reports whether Redis answers a PING within the timeout.
func (r *Redis) Ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", r.addr, err)
	}
	return nil
}

// A task is one hash, <prefix>mcp:task:<upstream task id>, with the fields
// o (owner principal), s (status) and n (steer messages accepted since the
// status last changed); it expires TTL after its last use. An A2A task's id
// comes with the Enforcer's prefix a2a:t:, so its hash is
// <prefix>mcp:task:a2a:t:<upstream task id> (no steer count); an A2A
// context's, with the prefix a2a:c:, and an MCP session's ext_authz binds,
// with the prefix mcp:s:, have their owner only.
func (r *Redis) key(id string) string { return r.cfg.Prefix + "mcp:task:" + id }

// Each owner's entries are named, when a share bounds them, in one sorted
// set, <prefix>mcp:owner:<owner>, scored by when each was last used:
// created, proven or looked up (the replica's clock in microseconds); it expires with the
// last of its entries. An owner over its share loses its own least recently
// used entries, never another's, as in each replica's table
// (proxy/owners): one principal creating tasks without end would otherwise
// fill the store every replica shares until state.ttl (and, under Redis's
// maxmemory eviction, push out other principals' entries).
func (r *Redis) ownerKey(owner string) string { return r.cfg.Prefix + "mcp:owner:" + owner }

// trimOwner is the Lua function create, trim and the MACP session commit
// share: it drops the oldest members of the owner's set past max, and the
// entry of each one the owner still owns (its field o), never keep (the
// entry just created, proved or committed). It returns how many entries it
// dropped (those the owner owned), for the scripts to answer: the count of
// warden_share_drops_total costs no round trip of its own.
const trimOwner = `
local function trim(set, max, owner, keep, tasks)
  local over = redis.call('ZCARD', set) - max
  local dropped = 0
  if over <= 0 then return 0 end
  for _, m in ipairs(redis.call('ZRANGE', set, 0, over)) do
    if over == 0 then break end
    if m ~= keep then
      redis.call('ZREM', set, m)
      if redis.call('HGET', tasks .. m, 'o') == owner then
        redis.call('DEL', tasks .. m)
        dropped = dropped + 1
      end
      over = over - 1
    end
  end
  return dropped
end
`

// trim: an owner's set past its share (KEYS[1]; ARGV: share, owner, the
// entry to keep, the prefix of entries). Returns how many it dropped.
var trim = redis.NewScript(trimOwner + `
return trim(KEYS[1], tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4])`)

// used returns a score for an entry used now: the replica's clock in
// microseconds, after every score it gave before (entries used within one
// microsecond keep their order).
func (r *Redis) used() int64 {
	now := time.Now().UnixMicro()
	for {
		last := r.last.Load()
		next := max(now, last+1)
		if r.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// run runs a script under the timeout.
func (r *Redis) run(ctx context.Context, s *redis.Script, op string, keys []string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	v, err := s.Run(ctx, r.client, keys, args...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redis %s: %s: %w", r.addr, op, err)
	}
	return v, nil
}

// Claim records that owner owns task id (the caller verified a handle that
// proves it) unless another owns it already, refreshes the entry's expiry
// and returns the task's status ("" when unknown) and its owner afterwards:
// owner, or the one the entry named first (the caller then holds a handle
// of an id the store gave another; it is not the caller's). With share > 0
// the entry counts as owner's most recently used, and an owner holding more
// than share loses its least recently used (a second round trip, only
// then; dropped is how many). It is the one round trip of most decisions:
// a MULTI/EXEC transaction, cheaper on the server than a script.
func (r *Redis) Claim(ctx context.Context, id, owner string, share int) (status, first string, dropped int, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	k, set := r.key(id), r.ownerKey(owner)
	var got *redis.SliceCmd
	var held *redis.IntCmd
	_, err = r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, k, "o", owner)
		p.PExpire(ctx, k, r.cfg.TTL)
		got = p.HMGet(ctx, k, "s", "o")
		if share > 0 {
			// Named in owner's set even when another owns it: the
			// trim drops only entries owner owns.
			p.ZAdd(ctx, set, redis.Z{Score: float64(r.used()), Member: id})
			p.PExpire(ctx, set, r.cfg.TTL)
			held = p.ZCard(ctx, set)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", "", 0, fmt.Errorf("redis %s: claim task: %w", r.addr, err)
	}
	v := got.Val()
	if len(v) != 2 {
		return "", "", 0, fmt.Errorf("redis %s: claim task: %d fields read, want 2", r.addr, len(v))
	}
	status, _ = v[0].(string) // nil when unknown
	first, _ = v[1].(string)
	if held != nil && held.Val() > int64(share) {
		n, err := r.run(ctx, trim, "trim owner's tasks", []string{set}, share, owner, id, r.tasksArg)
		if err != nil {
			return "", "", 0, err
		}
		d, _ := n.(int64)
		dropped = int(d)
	}
	return status, first, dropped, nil
}

// create: the upstream created the task for owner, unless the entry names
// another already (replicas that raced: the first owner stays, and only its
// status is written); a new status resets the steer count. With a share
// (ARGV[4] > 0) the task is owner's most recently used (ARGV[5]: now) in
// owner's set (KEYS[2]), trimmed to the share. Returns the owner afterwards,
// and with it how many entries the trim dropped when it dropped any ({owner,
// n}; the owner alone otherwise, the answer of nearly every call).
var create = redis.NewScript(trimOwner + `
local o = redis.call('HGET', KEYS[1], 'o')
if not o then
  redis.call('HSET', KEYS[1], 'o', ARGV[1])
  o = ARGV[1]
end
if o == ARGV[1] and ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 's') ~= ARGV[2] then
  redis.call('HSET', KEYS[1], 's', ARGV[2], 'n', 0)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local share = tonumber(ARGV[4])
if o == ARGV[1] and share > 0 then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  local dropped = trim(KEYS[2], share, o, ARGV[6], ARGV[7])
  if dropped > 0 then return {o, dropped} end
end
return o`)

// Create records a task the upstream created for owner, with its status
// when known, unless another owns it already (set if absent, atomically
// across replicas). It returns the task's owner afterwards: owner, or the
// one recorded first. With share > 0 owner holds at most share entries:
// past it, its least recently created or proven ones are dropped (never
// another owner's, never this one), as each replica's table drops them;
// dropped is how many.
func (r *Redis) Create(ctx context.Context, id, owner, status string, share int) (created string, dropped int, err error) {
	v, err := r.run(ctx, create, "record task", []string{r.key(id), r.ownerKey(owner)},
		owner, status, r.ttlArg, share, r.used(), id, r.tasksArg)
	if err != nil {
		return "", 0, err
	}
	if a, ok := v.([]any); ok && len(a) == 2 {
		v = a[0]
		n, _ := a[1].(int64)
		dropped = int(n)
	}
	o, ok := v.(string)
	if !ok || o == "" {
		return "", 0, fmt.Errorf("redis %s: record task: unexpected answer %v", r.addr, v)
	}
	return o, dropped, nil
}

// Observe records a status the upstream reported for a task; a task without
// an entry is not added (its owner is unknown).
func (r *Redis) Observe(ctx context.Context, id, status string) error {
	return r.ObserveAll(ctx, []string{id}, []string{status})
}

// observeAll: a status the upstream reported, for each key with an entry
// only (its status the ARGV of the same index; the last ARGV is the TTL); a
// change means the task passed a safe point, so its steer count restarts.
// The owner's set (the last ARGV its key's prefix) lives as long as its
// entries.
var observeAll = redis.NewScript(`
local ttl, owners = ARGV[#ARGV - 1], ARGV[#ARGV]
for i, k in ipairs(KEYS) do
  local cur = redis.call('HMGET', k, 's', 'o')
  if cur[2] then
    if cur[1] ~= ARGV[i] then
      redis.call('HSET', k, 's', ARGV[i], 'n', 0)
    end
    redis.call('PEXPIRE', k, ttl)
    redis.call('PEXPIRE', owners .. cur[2], ttl)
  end
end
return 1`)

// ObserveAll is Observe for several tasks (statuses[i] of ids[i]) in one
// round trip.
func (r *Redis) ObserveAll(ctx context.Context, ids, statuses []string) error {
	if len(ids) == 0 {
		return nil
	}
	if len(statuses) != len(ids) {
		return fmt.Errorf("redis %s: record task statuses: %d statuses for %d tasks", r.addr, len(statuses), len(ids))
	}
	keys := make([]string, len(ids))
	args := make([]any, 0, len(ids)+1)
	for i, id := range ids {
		keys[i] = r.key(id)
		args = append(args, statuses[i])
	}
	_, err := r.run(ctx, observeAll, "record task statuses", keys, append(args, r.ttlArg, r.ownersArg)...)
	return err
}

// steer: reserve a place in the queue unless max (> 0) are taken; a mark
// (ARGV[3], the task's lastUpdatedAt) later than the one the count began
// at (both integers, proxy/owners' stepMark: by time; else any other) means the server
// passed a step since: the queued steers were delivered and the count
// restarts there. An earlier mark was read before that step and counts
// since it. Returns {reserved, steers before}.
var steer = redis.NewScript(`
local function num(s) if s and string.match(s, '^%-?%d+$') then return tonumber(s) end end
local u = redis.call('HGET', KEYS[1], 'u')
local m, h = num(ARGV[3]), num(u)
if ARGV[3] ~= '' and u ~= ARGV[3] and (not m or not h or m > h) then
  redis.call('HSET', KEYS[1], 'u', ARGV[3], 'n', 0)
end
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local max = tonumber(ARGV[1])
local ok = 0
if max <= 0 or n < max then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
  ok = 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {ok, n}`)

// Steer reserves a place in the task's steer queue when fewer than max are
// taken (max <= 0: no bound), atomically across every replica; mark, when
// set, is the task's lastUpdatedAt as the server reports it now, and a mark
// other than the count's restarts the count (the server took the queued
// steers at a step). It returns whether it reserved and how many places
// were taken before.
func (r *Redis) Steer(ctx context.Context, id string, max int, mark string) (bool, int, error) {
	v, err := r.run(ctx, steer, "reserve steer", []string{r.key(id)}, max, r.ttlArg, mark)
	if err != nil {
		return false, 0, err
	}
	a, _ := v.([]any)
	if len(a) != 2 {
		return false, 0, fmt.Errorf("redis %s: reserve steer: unexpected answer %v", r.addr, v)
	}
	ok, _ := a[0].(int64)
	n, _ := a[1].(int64)
	return ok == 1, int(n), nil
}

var unsteer = redis.NewScript(`
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
if n > 0 then redis.call('HINCRBY', KEYS[1], 'n', -1) end
return 1`)

// Unsteer gives back a place Steer reserved (the upstream refused the steer).
func (r *Redis) Unsteer(ctx context.Context, id string) error {
	_, err := r.run(ctx, unsteer, "release steer", []string{r.key(id)})
	return err
}

// owners: the owner of each task ("" when unknown), refreshing the expiry of
// the known ones and of their owners' sets (ARGV[2] their keys' prefix),
// in which each known one the reader (ARGV[5], "" none) owns becomes its
// owner's most recently used, and another's does not move (ARGV[3]: now;
// ARGV[4] the prefix of the tasks' keys, cut off to name them in the sets;
// XX: a set only names what it named already).
var owners = redis.NewScript(`
local out = {}
local cut = string.len(ARGV[4]) + 1
for i, k in ipairs(KEYS) do
  local o = redis.call('HGET', k, 'o')
  if o then
    redis.call('PEXPIRE', k, ARGV[1])
    if o == ARGV[5] then
      redis.call('ZADD', ARGV[2] .. o, 'XX', ARGV[3], string.sub(k, cut))
    end
    redis.call('PEXPIRE', ARGV[2] .. o, ARGV[1])
    out[i] = o
  else
    out[i] = ''
  end
end
return out`)

// Owners returns the owner of each task, "" for a task without an entry, in
// one round trip, read for by (the principal whose request reads them, ""
// none); each known task by owns becomes by's most recently used, as Claim
// and Create make it (the owner keeps its tasks in use when a share trims
// its set); another's does not move, as in owners.Cache: whoever knows an
// id cannot keep it from being its owner's next to go.
func (r *Redis) Owners(ctx context.Context, by string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = r.key(id)
	}
	v, err := r.run(ctx, owners, "read task owners", keys, r.ttlArg, r.ownersArg, r.used(), r.tasksArg, by)
	if err != nil {
		return nil, err
	}
	a, _ := v.([]any)
	if len(a) != len(ids) {
		return nil, fmt.Errorf("redis %s: read task owners: %d answers for %d tasks", r.addr, len(a), len(ids))
	}
	out := make([]string, len(ids))
	for i := range a {
		out[i], _ = a[i].(string)
	}
	return out, nil
}

// LogTo sends the Redis client library's own messages (failed dials, which
// the operations' errors report too) to log at debug level. The library's
// logger is process-wide: cmd/warden sets it once.
func LogTo(log *slog.Logger) { redis.SetLogger(slogLogger{log}) }

type slogLogger struct{ log *slog.Logger }

func (l slogLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client", "msg", fmt.Sprintf(format, v...))
}

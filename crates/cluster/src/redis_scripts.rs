//! The Lua scripts of [`crate::redis_state::RedisState`]: each multi-key step of the host
//! schedule is one of them, so it is atomic. `KEYS[1]` is the crawl's key prefix.
//!
//! A queued URL is one member of its host's sorted set `q:<host>` (the job's compact
//! encoding, [`crate::queued_job`], scored by priority) and nothing else: the frontier's
//! cap is the counter `queued`, and eviction finds the lowest-priority URL through
//! `worst`, each host scored by the lowest priority (the highest score) in its queue.
//! A claim's id is drawn when the job is claimed; `claimjob` keeps the job until the
//! claim is released or expires (and the job goes back in its queue).

/// Helpers shared by the scripts (prepended to each).
pub(crate) const LIB: &str = r#"
local P = KEYS[1]
local function hk(h) return P .. 'host:' .. h end
local function qk(h) return P .. 'q:' .. h end
local function reschedule(h, per_host)
  local n = redis.call('ZCARD', qk(h))
  local inflight = tonumber(redis.call('HGET', hk(h), 'inflight') or '0')
  local nxt = tonumber(redis.call('HGET', hk(h), 'next') or '0')
  if n > 0 and inflight < per_host then
    redis.call('ZADD', P .. 'ready', nxt, h)
  else
    redis.call('ZREM', P .. 'ready', h)
    if n == 0 and inflight <= 0 and nxt == 0 then redis.call('DEL', hk(h)) end
  end
end
-- Puts a job in its host's queue; the same job queued twice is one member.
local function queue_add(h, prio, job)
  if redis.call('ZADD', qk(h), prio, job) == 1 then
    redis.call('INCR', P .. 'queued')
  end
  redis.call('ZADD', P .. 'worst', 'GT', prio, h)
end
-- After a host's queue lost members: its place in `worst`, or none when it is empty.
local function worst_refresh(h)
  local top = redis.call('ZRANGE', qk(h), -1, -1, 'WITHSCORES')
  if #top == 0 then
    redis.call('ZREM', P .. 'worst', h)
  else
    redis.call('ZADD', P .. 'worst', top[2], h)
  end
end
local function reap(now, per_host)
  local expired = redis.call('ZRANGEBYSCORE', P .. 'claimexp', '-inf', now, 'LIMIT', 0, 100)
  for _, m in ipairs(expired) do
    local sep = string.find(m, '|', 1, true)
    local h = string.sub(m, 1, sep - 1)
    local id = string.sub(m, sep + 1)
    redis.call('ZREM', P .. 'claimexp', m)
    if redis.call('ZREM', P .. 'claims:' .. h, id) == 1 then
      local left = redis.call('HINCRBY', hk(h), 'inflight', -1)
      if left < 0 then redis.call('HSET', hk(h), 'inflight', 0) end
      -- Nobody released it: whoever held the job died before fetching it (a frontier
      -- between claim and publish, or a fetcher): the job goes back in its host's queue.
      -- Its next claim draws a new id, so the copy that may still wait in the fetch
      -- stream under this one can no longer be held.
      local held = redis.call('HGET', P .. 'claimjob', id)
      if held then
        local bar = string.find(held, '|', 1, true)
        queue_add(h, tonumber(string.sub(held, 1, bar - 1)), string.sub(held, bar + 1))
        redis.call('HDEL', P .. 'claimjob', id)
      end
      reschedule(h, per_host)
    end
  end
  return #expired
end
"#;

/// Items in sextuples (mode, seen bucket, seen value, priority, host, job) after the cap
/// and the per-host slots. Mode `q` offers the job to the queues; `a` first adds the URL
/// to the seen-set and offers the job only when it was new; `m` only adds it to the
/// seen-set. Per item: the number of URLs evicted to make room, -1 where the job ranked
/// too low to enter, -2 where the URL was seen before, -3 where it was marked seen (`m`).
/// Each URL the cap drops, evicted or turned away, is recorded in the list `dropped` as
/// "<host> <member>".
pub(crate) const ADMIT: &str = r#"
local max_q, per_host = tonumber(ARGV[1]), tonumber(ARGV[2])
local function enqueue(prio, h, job)
  local evicted = 0
  if not redis.call('ZSCORE', qk(h), job) then
    while tonumber(redis.call('GET', P .. 'queued') or '0') >= max_q do
      local w = redis.call('ZRANGE', P .. 'worst', -1, -1, 'WITHSCORES')
      if #w == 0 then break end
      if evicted == 0 and tonumber(w[2]) <= prio then
        redis.call('RPUSH', P .. 'dropped', h .. ' ' .. job)
        return -1
      end
      local wh = w[1]
      local gone = redis.call('ZPOPMAX', qk(wh))
      if #gone > 0 then
        redis.call('RPUSH', P .. 'dropped', wh .. ' ' .. gone[1])
        redis.call('DECR', P .. 'queued')
        evicted = evicted + 1
      end
      worst_refresh(wh)
      reschedule(wh, per_host)
    end
  end
  queue_add(h, prio, job)
  reschedule(h, per_host)
  return evicted
end
local out = {}
for i = 3, #ARGV, 6 do
  local mode = ARGV[i]
  local verdict
  if mode ~= 'q' and redis.call('SADD', P .. 'seen:' .. ARGV[i + 1], ARGV[i + 2]) == 0 then
    verdict = -2
  elseif mode == 'm' then
    verdict = -3
  else
    verdict = enqueue(tonumber(ARGV[i + 3]), ARGV[i + 4], ARGV[i + 5])
  end
  out[#out + 1] = verdict
end
return out
"#;

/// The best job of the host ready longest, under a new claim id: {id, job, host, score}.
pub(crate) const CLAIM: &str = r#"
local now, per_host, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
reap(now, per_host)
local first = redis.call('ZRANGEBYSCORE', P .. 'ready', '-inf', now, 'LIMIT', 0, 1)
if #first == 0 then return false end
local h = first[1]
local top = redis.call('ZPOPMIN', qk(h))
if #top == 0 then reschedule(h, per_host) return false end
redis.call('DECR', P .. 'queued')
if redis.call('ZCARD', qk(h)) == 0 then redis.call('ZREM', P .. 'worst', h) end
local id = string.format('%016x', redis.call('INCR', P .. 'seq'))
redis.call('HSET', P .. 'claimjob', id, top[2] .. '|' .. top[1])
redis.call('HINCRBY', hk(h), 'inflight', 1)
redis.call('ZADD', P .. 'claims:' .. h, now + ttl, id)
redis.call('ZADD', P .. 'claimexp', now + ttl, h .. '|' .. id)
reschedule(h, per_host)
return {id, top[1], h, top[2]}
"#;

/// With a claim id (ARGV[4]) exactly that claim is released, and one that expired (its
/// slot given back, its job queued again) frees nothing; without, the host's oldest.
pub(crate) const RELEASE: &str = r#"
local h, nxt, per_host, id = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local freed = 1
if id ~= '' then
  freed = redis.call('ZREM', P .. 'claims:' .. h, id)
  redis.call('ZREM', P .. 'claimexp', h .. '|' .. id)
  redis.call('HDEL', P .. 'claimjob', id)
else
  local held = redis.call('ZPOPMIN', P .. 'claims:' .. h)
  if #held > 0 then
    redis.call('ZREM', P .. 'claimexp', h .. '|' .. held[1])
    redis.call('HDEL', P .. 'claimjob', held[1])
  end
end
if freed == 1 then
  local left = redis.call('HINCRBY', hk(h), 'inflight', -1)
  if left < 0 then redis.call('HSET', hk(h), 'inflight', 0) end
end
local cur = tonumber(redis.call('HGET', hk(h), 'next') or '0')
if nxt > cur then redis.call('HSET', hk(h), 'next', nxt) end
reschedule(h, per_host)
return 1
"#;

/// Renews a claim for another TTL from now; 0 when it is gone (expired and reaped).
pub(crate) const HOLD: &str = r#"
local h, id, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
reap(now, tonumber(ARGV[5]))
if not redis.call('ZSCORE', P .. 'claims:' .. h, id) then return 0 end
redis.call('ZADD', P .. 'claims:' .. h, now + ttl, id)
redis.call('ZADD', P .. 'claimexp', now + ttl, h .. '|' .. id)
return 1
"#;

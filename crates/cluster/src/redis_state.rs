//! The state interface in Redis, for the cluster: every multi-key step is one Lua script,
//! and every key of a crawl carries the hash tag `{crawl}`, so a crawl lives in one cluster
//! slot.
//!
//! Layout under `trawl:{crawl}:`:
//! - `seen:<b>`: the seen-set, 64-bit URL digests split into 65,536 sets by their top 16
//!   bits, each holding the low 48 bits as integers, so Redis keeps them as compact intsets
//!   (9.4 bytes a URL at 10 million URLs, measured by `examples/seen_bytes.rs`) instead of
//!   strings (60 to 70 bytes).
//! - `jobs` (seq -> job JSON), `jobhost` (seq -> host), `q:<host>` (seq by priority, one
//!   zset per host), `byprio` (every queued seq by priority, for eviction), `ready` (hosts
//!   with work and a free slot by next-allowed time), `host:<host>` (in flight, next allowed),
//!   `claims:<host>`, `claimexp` and `claimjob` (slots held with their jobs, by claim id:
//!   the job's queue sequence number, which travels on the job; a claim nobody renews or
//!   releases expires, and its job goes back in the queue), `robots:<host>`
//!   (with a TTL), `counters`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;
use trawl_core::state::{Admitted, Claim, Enqueued, RobotsEntry, State};
use trawl_core::{CoreError, CoreResult, FetchJob};

fn backend(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("redis {what}: {e}"))
}

use crate::redis_conn::Within;

/// Helpers shared by the scripts (prepended to each).
const LIB: &str = r#"
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
local function reap(now, per_host)
  local expired = redis.call('ZRANGEBYSCORE', P .. 'claimexp', '-inf', now, 'LIMIT', 0, 100)
  for _, m in ipairs(expired) do
    local sep = string.find(m, '|', 1, true)
    local h = string.sub(m, 1, sep - 1)
    local seq = string.sub(m, sep + 1)
    redis.call('ZREM', P .. 'claimexp', m)
    if redis.call('ZREM', P .. 'claims:' .. h, seq) == 1 then
      local left = redis.call('HINCRBY', hk(h), 'inflight', -1)
      if left < 0 then redis.call('HSET', hk(h), 'inflight', 0) end
      -- Nobody released it: whoever held the job died before fetching it (a frontier
      -- between claim and publish, or a fetcher): the job goes back in its host's queue.
      local held = redis.call('HGET', P .. 'claimjob', seq)
      if held then
        local bar = string.find(held, '|', 1, true)
        local prio = tonumber(string.sub(held, 1, bar - 1))
        -- Under a new sequence number, which is its next claim's id: the copy that may
        -- still wait in the fetch stream under the old id can no longer be held.
        local nseq = string.format('%016x', redis.call('INCR', P .. 'seq'))
        redis.call('HSET', P .. 'jobs', nseq, string.sub(held, bar + 1))
        redis.call('HSET', P .. 'jobhost', nseq, h)
        redis.call('ZADD', qk(h), prio, nseq)
        redis.call('ZADD', P .. 'byprio', prio, nseq)
        redis.call('HDEL', P .. 'claimjob', seq)
      end
      reschedule(h, per_host)
    end
  end
  return #expired
end
"#;

// Items in sextuples (mode, seen bucket, seen value, priority, host, job) after the cap and
// the per-host slots. Mode `q` offers the job to the queues; `a` first adds the URL to the
// seen-set and offers the job only when it was new; `m` only adds it to the seen-set. Per
// item: the number of URLs evicted to make room, -1 where the job ranked too low to enter,
// -2 where the URL was seen before, -3 where it was marked seen (`m`).
const ENQUEUE: &str = r#"
local max_q, per_host = tonumber(ARGV[1]), tonumber(ARGV[2])
local function enqueue(prio, h, job)
  local evicted = 0
  if redis.call('ZCARD', P .. 'byprio') >= max_q then
    local worst = redis.call('ZRANGE', P .. 'byprio', -1, -1, 'WITHSCORES')
    if #worst == 0 or tonumber(worst[2]) <= prio then return -1 end
    while redis.call('ZCARD', P .. 'byprio') >= max_q do
      local w = redis.call('ZPOPMAX', P .. 'byprio')
      if #w == 0 then break end
      local wseq = w[1]
      local wh = redis.call('HGET', P .. 'jobhost', wseq)
      redis.call('HDEL', P .. 'jobs', wseq)
      redis.call('HDEL', P .. 'jobhost', wseq)
      if wh then
        redis.call('ZREM', qk(wh), wseq)
        reschedule(wh, per_host)
      end
      evicted = evicted + 1
    end
  end
  local seq = string.format('%016x', redis.call('INCR', P .. 'seq'))
  redis.call('HSET', P .. 'jobs', seq, job)
  redis.call('HSET', P .. 'jobhost', seq, h)
  redis.call('ZADD', qk(h), prio, seq)
  redis.call('ZADD', P .. 'byprio', prio, seq)
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

/// Items per enqueue script call and commands per pipeline: a sitemap's 50,000 URLs do
/// not hold Redis (single-threaded) in one step.
const BATCH: usize = 512;

const CLAIM: &str = r#"
local now, per_host, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
reap(now, per_host)
local first = redis.call('ZRANGEBYSCORE', P .. 'ready', '-inf', now, 'LIMIT', 0, 1)
if #first == 0 then return false end
local h = first[1]
local top = redis.call('ZPOPMIN', qk(h))
if #top == 0 then reschedule(h, per_host) return false end
local seq = top[1]
local job = redis.call('HGET', P .. 'jobs', seq)
redis.call('HSET', P .. 'claimjob', seq, top[2] .. '|' .. job)
redis.call('HDEL', P .. 'jobs', seq)
redis.call('HDEL', P .. 'jobhost', seq)
redis.call('ZREM', P .. 'byprio', seq)
redis.call('HINCRBY', hk(h), 'inflight', 1)
redis.call('ZADD', P .. 'claims:' .. h, now + ttl, seq)
redis.call('ZADD', P .. 'claimexp', now + ttl, h .. '|' .. seq)
reschedule(h, per_host)
return {seq, job}
"#;

// With a claim id (ARGV[4]) exactly that claim is released, and one that expired (its
// slot given back, its job queued again) frees nothing; without, the host's oldest.
const RELEASE: &str = r#"
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
const HOLD: &str = r#"
local h, id, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
reap(now, tonumber(ARGV[5]))
if not redis.call('ZSCORE', P .. 'claims:' .. h, id) then return 0 end
redis.call('ZADD', P .. 'claims:' .. h, now + ttl, id)
redis.call('ZADD', P .. 'claimexp', now + ttl, h .. '|' .. id)
return 1
"#;

/// The host schedule, seen-set, robots cache and counters of one crawl, in Redis.
#[derive(Clone)]
pub struct RedisState {
    conn: ConnectionManager,
    prefix: String,
    max_queued: usize,
    per_host: u32,
    claim_ttl_ms: u64,
    enqueue: Script,
    claim: Script,
    release: Script,
    hold: Script,
}

impl RedisState {
    /// `claim_ttl_ms`: how long a host slot stays taken by a fetcher that never releases it.
    pub async fn connect(
        url: &str,
        crawl: &str,
        max_queued: usize,
        per_host: u32,
        claim_ttl_ms: u64,
    ) -> CoreResult<Self> {
        let conn = crate::redis_conn::connect(url)
            .await
            .map_err(|e| backend("connect", e))?;
        let script = |body: &str| Script::new(&format!("{LIB}\n{body}"));
        Ok(RedisState {
            conn,
            prefix: format!("trawl:{{{crawl}}}:"),
            max_queued: max_queued.max(1),
            per_host: per_host.max(1),
            claim_ttl_ms,
            enqueue: script(ENQUEUE),
            claim: script(CLAIM),
            release: script(RELEASE),
            hold: script(HOLD),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The seen-set's set and member for `key`.
    fn seen_slot(&self, key: &str) -> (String, i64) {
        let d = seen_digest(key);
        (
            format!("{}seen:{:04x}", self.prefix, d >> 48),
            (d & 0xffff_ffff_ffff) as i64,
        )
    }

    /// The enqueue script over items: with a key, the URL is added to the seen-set first
    /// (and its job, if any, offered only when it was new); without, the job is offered.
    async fn run_admit(
        &self,
        items: Vec<(Option<String>, Option<FetchJob>)>,
    ) -> CoreResult<Vec<Admitted>> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(BATCH) {
            let mut call = self.enqueue.key(&self.prefix);
            call.arg(self.max_queued).arg(self.per_host);
            for (key, job) in chunk {
                let mode = match (key, job) {
                    (None, _) => "q",
                    (Some(_), Some(_)) => "a",
                    (Some(_), None) => "m",
                };
                let d = key.as_deref().map(seen_digest).unwrap_or(0);
                call.arg(mode)
                    .arg(format!("{:04x}", d >> 48))
                    .arg((d & 0xffff_ffff_ffff) as i64);
                match job {
                    Some(job) => {
                        let json = serde_json::to_string(job).map_err(|e| backend("encode", e))?;
                        call.arg(job.priority).arg(&job.host).arg(json);
                    }
                    None => {
                        call.arg(0).arg("").arg("");
                    }
                }
            }
            let mut conn = self.conn.clone();
            let verdicts: Vec<i64> = call
                .invoke_async(&mut conn)
                .within()
                .await
                .map_err(|e| backend("enqueue", e))?;
            if verdicts.len() != chunk.len() {
                return Err(backend("enqueue", "one verdict per item expected"));
            }
            out.extend(verdicts.into_iter().map(|n| match n {
                -3 => Admitted::Marked,
                -2 => Admitted::Seen,
                -1 => Admitted::Queued(Enqueued::Rejected),
                0 => Admitted::Queued(Enqueued::Accepted),
                n => Admitted::Queued(Enqueued::AcceptedEvicting(n.max(0) as usize)),
            }));
        }
        Ok(out)
    }

    /// Removes every key of this crawl (SCAN + UNLINK, never KEYS).
    pub async fn clear(&self) -> CoreResult<u64> {
        let mut conn = self.conn.clone();
        crate::redis_conn::unlink_prefixed(&mut conn, &self.prefix)
            .await
            .map_err(|e| backend("clear", e))
    }
}

/// 64 bits of the seen-set digest every backend uses: the top half, where FNV-1a's
/// multiplication has mixed every input byte.
pub fn seen_digest(key: &str) -> u64 {
    (trawl_core::state::seen_digest(key) >> 64) as u64
}

#[async_trait]
impl State for RedisState {
    async fn seen_add(&self, key: &str) -> CoreResult<bool> {
        let (bucket, value) = self.seen_slot(key);
        let mut conn = self.conn.clone();
        let added: i64 = redis::cmd("SADD")
            .arg(bucket)
            .arg(value)
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("seen", e))?;
        Ok(added == 1)
    }

    async fn seen_contains_many(&self, keys: &[String]) -> CoreResult<Vec<bool>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for key in chunk {
                let (bucket, value) = self.seen_slot(key);
                pipe.cmd("SISMEMBER").arg(bucket).arg(value);
            }
            let mut conn = self.conn.clone();
            let found: Vec<bool> = pipe
                .query_async(&mut conn)
                .within()
                .await
                .map_err(|e| backend("seen", e))?;
            out.extend(found);
        }
        Ok(out)
    }

    async fn seen_contains(&self, key: &str) -> CoreResult<bool> {
        let (bucket, value) = self.seen_slot(key);
        let mut conn = self.conn.clone();
        redis::cmd("SISMEMBER")
            .arg(bucket)
            .arg(value)
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("seen", e))
    }

    async fn enqueue(&self, job: FetchJob) -> CoreResult<Enqueued> {
        match self.run_admit(vec![(None, Some(job))]).await?.pop() {
            Some(Admitted::Queued(e)) => Ok(e),
            _ => Err(backend("enqueue", "no verdict for the job")),
        }
    }

    async fn admit_many(
        &self,
        items: Vec<(String, Option<FetchJob>)>,
    ) -> CoreResult<Vec<Admitted>> {
        self.run_admit(items.into_iter().map(|(k, j)| (Some(k), j)).collect())
            .await
    }

    async fn claim(&self, now_ms: u64) -> CoreResult<Option<Claim>> {
        let mut conn = self.conn.clone();
        let claimed: Option<(String, String)> = self
            .claim
            .key(&self.prefix)
            .arg(now_ms)
            .arg(self.per_host)
            .arg(self.claim_ttl_ms)
            .invoke_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("claim", e))?;
        let Some((id, json)) = claimed else {
            return Ok(None);
        };
        let mut job: FetchJob =
            serde_json::from_str(&json).map_err(|e| backend("decode job", e))?;
        job.claim = Some(id);
        Ok(Some(Claim { job }))
    }

    async fn hold(&self, host: &str, claim: &str, now_ms: u64) -> CoreResult<bool> {
        let mut conn = self.conn.clone();
        let held: i64 = self
            .hold
            .key(&self.prefix)
            .arg(host)
            .arg(claim)
            .arg(now_ms)
            .arg(self.claim_ttl_ms)
            .arg(self.per_host)
            .invoke_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("hold", e))?;
        Ok(held == 1)
    }

    fn renew_every(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_millis(
            (self.claim_ttl_ms / 3).max(200),
        ))
    }

    async fn release(
        &self,
        host: &str,
        claim: Option<&str>,
        next_allowed_ms: u64,
    ) -> CoreResult<()> {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .release
            .key(&self.prefix)
            .arg(host)
            .arg(next_allowed_ms)
            .arg(self.per_host)
            .arg(claim.unwrap_or(""))
            .invoke_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("release", e))?;
        Ok(())
    }

    async fn next_ready_ms(&self) -> CoreResult<Option<u64>> {
        let mut conn = self.conn.clone();
        let first: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(format!("{}ready", self.prefix))
            .arg(0)
            .arg(0)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("ready", e))?;
        Ok(first.first().map(|(_, t)| *t as u64))
    }

    async fn queued(&self) -> CoreResult<usize> {
        let mut conn = self.conn.clone();
        redis::cmd("ZCARD")
            .arg(format!("{}byprio", self.prefix))
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("queued", e))
    }

    /// Claimed and not yet released or expired.
    async fn claims(&self) -> CoreResult<usize> {
        let mut conn = self.conn.clone();
        redis::cmd("ZCARD")
            .arg(format!("{}claimexp", self.prefix))
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("claims", e))
    }

    async fn robots_get(&self, host: &str, _now_ms: u64) -> CoreResult<Option<RobotsEntry>> {
        let mut conn = self.conn.clone();
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("{}robots:{host}", self.prefix))
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("robots get", e))?;
        // An entry that no longer decodes is as good as none: the robots file is fetched again.
        Ok(v.and_then(|s| serde_json::from_str(&s).ok()))
    }

    async fn robots_put(&self, host: &str, entry: RobotsEntry, ttl_ms: u64) -> CoreResult<()> {
        let json = serde_json::to_string(&entry).map_err(|e| backend("encode", e))?;
        let mut conn = self.conn.clone();
        let _: () = redis::cmd("SET")
            .arg(format!("{}robots:{host}", self.prefix))
            .arg(json)
            .arg("PX")
            .arg(ttl_ms.max(1))
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("robots put", e))?;
        Ok(())
    }

    async fn incr(&self, counter: &str, by: i64) -> CoreResult<i64> {
        let mut conn = self.conn.clone();
        redis::cmd("HINCRBY")
            .arg(format!("{}counters", self.prefix))
            .arg(counter)
            .arg(by)
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("incr", e))
    }

    async fn incr_many(&self, counters: &[(String, i64)]) -> CoreResult<Vec<i64>> {
        let mut out = Vec::with_capacity(counters.len());
        for chunk in counters.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for (c, by) in chunk {
                pipe.cmd("HINCRBY")
                    .arg(format!("{}counters", self.prefix))
                    .arg(c)
                    .arg(*by);
            }
            let mut conn = self.conn.clone();
            let values: Vec<i64> = pipe
                .query_async(&mut conn)
                .within()
                .await
                .map_err(|e| backend("incr", e))?;
            out.extend(values);
        }
        Ok(out)
    }

    async fn counters(&self) -> CoreResult<BTreeMap<String, i64>> {
        let mut conn = self.conn.clone();
        redis::cmd("HGETALL")
            .arg(format!("{}counters", self.prefix))
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("counters", e))
    }
}

//! The state interface in Redis, for the cluster: every multi-key step is one Lua script,
//! and every key of a crawl carries the hash tag `{crawl}`, so a crawl lives in one cluster
//! slot.
//!
//! Layout under `trawl:{crawl}:`:
//! - `seen:<b>`: the seen-set, 64-bit URL digests split into 65,536 sets by their top 16
//!   bits, each holding the low 48 bits as integers, so Redis keeps them as compact intsets
//!   (9.4 bytes a URL at 10 million URLs, measured by `examples/state_bytes.rs`) instead of
//!   strings (60 to 70 bytes).
//! - `q:<host>` (the host's queued jobs, each one member in its compact encoding,
//!   [`crate::queued_job`], scored by priority), `queued` (how many in all: the cap),
//!   `worst` (hosts by the lowest priority they queue, for eviction), `ready` (hosts with
//!   work and a free slot by next-allowed time), `host:<host>` (in flight, next allowed),
//!   `claims:<host>`, `claimexp` and `claimjob` (slots held with their jobs, by claim id,
//!   drawn from `seq` when the job is claimed and carried on the job; a claim nobody renews
//!   or releases expires, and its job goes back in the queue), `robots:<host>` (with a
//!   TTL), `counters`. The scripts are in [`crate::redis_scripts`].

use std::collections::BTreeMap;

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;
use trawl_core::state::{Admitted, Claim, Enqueued, RobotsEntry, State};
use trawl_core::{CoreError, CoreResult, FetchJob};

fn backend(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("redis {what}: {e}"))
}

use crate::queued_job;
use crate::redis_conn::Within;
use crate::redis_scripts::{ADMIT, CLAIM, HOLD, LIB, RELEASE};

/// Items per enqueue script call and commands per pipeline: a sitemap's 50,000 URLs do
/// not hold Redis (single-threaded) in one step.
const BATCH: usize = 512;

/// The host schedule, seen-set, robots cache and counters of one crawl, in Redis.
#[derive(Clone)]
pub struct RedisState {
    conn: ConnectionManager,
    crawl: String,
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
            crawl: crawl.to_string(),
            prefix: format!("trawl:{{{crawl}}}:"),
            max_queued: max_queued.max(1),
            per_host: per_host.max(1),
            claim_ttl_ms,
            enqueue: script(ADMIT),
            claim: script(CLAIM),
            release: script(RELEASE),
            hold: script(HOLD),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// One command an item, written by `add`,, in pipelines of [`BATCH`]; the replies in order.
    async fn pipelined<T, R: redis::FromRedisValue>(
        &self,
        items: &[T],
        what: &str,
        add: impl Fn(&mut redis::Pipeline, &T),
    ) -> CoreResult<Vec<R>> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for item in chunk {
                add(&mut pipe, item);
            }
            let mut conn = self.conn.clone();
            let replies: Vec<R> = pipe
                .query_async(&mut conn)
                .within()
                .await
                .map_err(|e| backend(what, e))?;
            out.extend(replies);
        }
        Ok(out)
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
                        let member = queued_job::encode(job).map_err(|e| backend("encode", e))?;
                        call.arg(job.priority).arg(&job.host).arg(member);
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

    /// URLs the frontier's cap dropped (evicted, or turned away), in the order it dropped
    /// them: `count` of them from the `from`th on.
    pub async fn dropped(&self, from: usize, count: usize) -> CoreResult<Vec<String>> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        let rows: Vec<String> = redis::cmd("LRANGE")
            .arg(format!("{}dropped", self.prefix))
            .arg(from)
            .arg(from + count - 1)
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("dropped", e))?;
        rows.iter()
            .map(|row| {
                let (host, member) = row
                    .split_once(' ')
                    .ok_or_else(|| backend("dropped", format!("a row without its host: {row}")))?;
                queued_job::decode(member, "", host, 0)
                    .map(|j| j.url)
                    .map_err(|e| backend("dropped", e))
            })
            .collect()
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
        self.pipelined(keys, "seen", |pipe, key| {
            let (bucket, value) = self.seen_slot(key);
            pipe.cmd("SISMEMBER").arg(bucket).arg(value);
        })
        .await
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
        let claimed: Option<(String, String, String, f64)> = self
            .claim
            .key(&self.prefix)
            .arg(now_ms)
            .arg(self.per_host)
            .arg(self.claim_ttl_ms)
            .invoke_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("claim", e))?;
        let Some((id, member, host, priority)) = claimed else {
            return Ok(None);
        };
        let mut job = queued_job::decode(&member, &self.crawl, &host, priority as i64)
            .map_err(|e| backend("decode job", e))?;
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
        let n: Option<i64> = redis::cmd("GET")
            .arg(format!("{}queued", self.prefix))
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| backend("queued", e))?;
        Ok(n.unwrap_or(0).max(0) as usize)
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
        let key = format!("{}counters", self.prefix);
        self.pipelined(counters, "incr", |pipe, (c, by)| {
            pipe.cmd("HINCRBY").arg(&key).arg(c).arg(*by);
        })
        .await
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

//! The state interface in Redis, for the cluster: every multi-key step is one Lua script,
//! and every key of a shard carries its hash tag, so a shard lives in one cluster slot.
//! Unsharded, a crawl is one shard under `trawl:{crawl}:`; sharded, each host and the
//! seen-set entries of its URLs live on one shard ([`crate::redis_shards`]), and the
//! counters on shard 0.
//!
//! Layout under a shard's prefix:
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
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures_util::future::try_join_all;
use redis::Script;
use trawl_core::state::{Admitted, Claim, Enqueued, RobotsEntry, State};
use trawl_core::{CoreError, CoreResult, FetchJob};

fn backend(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("redis {what}: {e}"))
}

use crate::queued_job;
use crate::redis_scripts::{ADMIT, CLAIM, HOLD, LIB, RELEASE};
use crate::redis_shards::{Shard, shard_of_host, shard_of_key, shard_prefix};

/// Items per enqueue script call and commands per pipeline: a sitemap's 50,000 URLs do
/// not hold Redis (single-threaded) in one step.
const BATCH: usize = 512;

/// The lease of a held claim unless set ([`RedisState::with_lease`]): a killed fetcher's
/// or frontier's hosts are free again within it.
pub const DEFAULT_LEASE_MS: u64 = 10_000;

/// One admission item: the seen-set key, if any, and the job, if any.
type AdmitItem = (Option<String>, Option<FetchJob>);

/// The host schedule, seen-set, robots cache and counters of one crawl, in Redis: on one
/// server, or with the per-host state sharded across several ([`crate::redis_shards`]).
#[derive(Clone)]
pub struct RedisState {
    shards: Arc<[Shard]>,
    crawl: String,
    /// The cap of each shard.
    max_queued: usize,
    per_host: u32,
    /// How long a claim's job may wait in the fetch stream once handed to it.
    claim_ttl_ms: u64,
    /// How long a claim lasts while its holder (a frontier publishing its job, a fetcher
    /// fetching it) is alive to renew it every third of it: a killed holder's host is free
    /// again this soon, not after the whole `claim_ttl_ms`.
    lease_ms: u64,
    /// The shard a claim asks first, in turn, so no shard's hosts wait on another's.
    turn: Arc<AtomicUsize>,
    enqueue: Script,
    claim: Script,
    release: Script,
    hold: Script,
}

impl RedisState {
    /// On one server. `claim_ttl_ms`: how long a host slot stays taken by a fetcher that
    /// never releases it.
    pub async fn connect(
        url: &str,
        crawl: &str,
        max_queued: usize,
        per_host: u32,
        claim_ttl_ms: u64,
    ) -> CoreResult<Self> {
        Self::connect_sharded(
            &[url.to_string()],
            crawl,
            max_queued,
            per_host,
            claim_ttl_ms,
        )
        .await
    }

    /// Sharded by host across `nodes`, shard `i` on `nodes[i]`. `max_queued` holds on each
    /// server (it bounds a server's memory): split, a crawl of one site, all on one shard,
    /// would get a fraction of it.
    pub async fn connect_sharded(
        nodes: &[String],
        crawl: &str,
        max_queued: usize,
        per_host: u32,
        claim_ttl_ms: u64,
    ) -> CoreResult<Self> {
        if nodes.is_empty() {
            return Err(backend("connect", "no Redis server named"));
        }
        let mut shards = Vec::with_capacity(nodes.len());
        for (i, url) in nodes.iter().enumerate() {
            let conn = crate::redis_conn::connect_patient(url).await.map_err(|e| {
                let url = trawl_core::settings::redact_url(url);
                backend("connect", format!("{url}: {e}"))
            })?;
            shards.push(Shard {
                conn,
                prefix: shard_prefix(crawl, i),
            });
        }
        let script = |body: &str| Script::new(&format!("{LIB}\n{body}"));
        Ok(RedisState {
            max_queued: max_queued.max(1),
            shards: shards.into(),
            crawl: crawl.to_string(),
            per_host: per_host.max(1),
            claim_ttl_ms,
            lease_ms: claim_ttl_ms.clamp(1, DEFAULT_LEASE_MS),
            turn: Arc::new(AtomicUsize::new(0)),
            enqueue: script(ADMIT),
            claim: script(CLAIM),
            release: script(RELEASE),
            hold: script(HOLD),
        })
    }

    /// Claims held under a lease of `lease_ms` (at most the claim TTL) instead of the
    /// default [`DEFAULT_LEASE_MS`].
    pub fn with_lease(mut self, lease_ms: u64) -> Self {
        self.lease_ms = lease_ms.clamp(1, self.claim_ttl_ms.max(1));
        self
    }

    /// The prefix of the crawl's home shard (its counters and every unsharded key).
    pub fn prefix(&self) -> &str {
        &self.shards[0].prefix
    }

    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    fn home(&self) -> &Shard {
        &self.shards[0]
    }

    fn of_host(&self, host: &str) -> &Shard {
        &self.shards[shard_of_host(host, self.shards.len())]
    }

    /// One command an item, written by `add`, in pipelines of [`BATCH`] on `shard`; the
    /// replies in order.
    async fn pipelined<T, R: redis::FromRedisValue>(
        &self,
        shard: &Shard,
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
            let mut conn = shard.conn.clone();
            let replies: Vec<R> = pipe
                .query_async(&mut conn)
                .await
                .map_err(|e| backend(what, e))?;
            out.extend(replies);
        }
        Ok(out)
    }

    /// `items` split by shard (`shard_of` each), `run` on every shard's part at once (the
    /// shard's index and its items),
    /// and the answers put back in the items' order.
    async fn by_shard<T: Clone, R, F, Fut>(
        &self,
        items: &[T],
        shard_of: impl Fn(&T) -> usize,
        run: F,
    ) -> CoreResult<Vec<R>>
    where
        F: Fn(usize, Vec<T>) -> Fut,
        Fut: std::future::Future<Output = CoreResult<Vec<R>>>,
    {
        if self.shards.len() == 1 {
            return run(0, items.to_vec()).await;
        }
        let mut parts: Vec<Vec<T>> = vec![Vec::new(); self.shards.len()];
        let mut place = Vec::with_capacity(items.len());
        for item in items {
            let s = shard_of(item);
            place.push((s, parts[s].len()));
            parts[s].push(item.clone());
        }
        let answers =
            try_join_all(parts.into_iter().enumerate().map(|(s, part)| run(s, part))).await?;
        let mut answers: Vec<Vec<Option<R>>> = answers
            .into_iter()
            .map(|a| a.into_iter().map(Some).collect())
            .collect();
        place
            .into_iter()
            .map(|(s, i)| {
                answers[s]
                    .get_mut(i)
                    .and_then(Option::take)
                    .ok_or_else(|| backend("shard", "one answer per item expected"))
            })
            .collect()
    }

    /// The seen-set's set and member for `key`, on the shard of the key's host.
    fn seen_slot(&self, key: &str) -> (&Shard, String, i64) {
        let shard = &self.shards[shard_of_key(key, self.shards.len())];
        let (bucket, value) = seen_member(shard, key);
        (shard, bucket, value)
    }

    /// The shard an admission item goes to: its job's host's, so the job's queue stays
    /// with the host's politeness slot; else its key's (the same shard, for the
    /// frontier's keys: the normalized URL of the job).
    fn admit_shard(&self, item: &AdmitItem) -> usize {
        match item {
            (_, Some(job)) => shard_of_host(&job.host, self.shards.len()),
            (Some(key), None) => shard_of_key(key, self.shards.len()),
            (None, None) => 0,
        }
    }

    async fn run_admit(&self, items: Vec<AdmitItem>) -> CoreResult<Vec<Admitted>> {
        self.by_shard(
            &items,
            |item| self.admit_shard(item),
            |s, part| self.admit_on(&self.shards[s], part),
        )
        .await
    }

    /// The enqueue script over items on one shard: with a key, the URL is added to the
    /// seen-set first (and its job, if any, offered only when it was new); without, the
    /// job is offered.
    async fn admit_on(&self, shard: &Shard, items: Vec<AdmitItem>) -> CoreResult<Vec<Admitted>> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(BATCH) {
            let mut call = self.enqueue.key(&shard.prefix);
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
            let mut conn = shard.conn.clone();
            let verdicts: Vec<i64> = call
                .invoke_async(&mut conn)
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

    /// URLs the frontier's cap dropped (evicted, or turned away): `count` of them from
    /// the `from`th on, in the order each shard dropped them, shard after shard (sharded,
    /// a drop on an earlier shard moves the later shards' rows: page through a drained
    /// crawl).
    pub async fn dropped(&self, from: usize, count: usize) -> CoreResult<Vec<String>> {
        let mut rows: Vec<String> = Vec::new();
        let mut skip = from;
        for shard in self.shards.iter() {
            if rows.len() >= count {
                break;
            }
            let key = format!("{}dropped", shard.prefix);
            let mut conn = shard.conn.clone();
            let len: usize = redis::cmd("LLEN")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .map_err(|e| backend("dropped", e))?;
            if skip >= len {
                skip -= len;
                continue;
            }
            let last = (skip + (count - rows.len())).min(len) - 1;
            let part: Vec<String> = redis::cmd("LRANGE")
                .arg(&key)
                .arg(skip)
                .arg(last)
                .query_async(&mut conn)
                .await
                .map_err(|e| backend("dropped", e))?;
            rows.extend(part);
            skip = 0;
        }
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

    /// Removes every key of this crawl, on every shard (SCAN + UNLINK, never KEYS).
    pub async fn clear(&self) -> CoreResult<u64> {
        let mut removed = 0;
        for shard in self.shards.iter() {
            let mut conn = shard.conn.clone();
            removed += crate::redis_conn::unlink_prefixed(&mut conn, &shard.prefix)
                .await
                .map_err(|e| backend("clear", e))?;
        }
        Ok(removed)
    }

    /// Renews a named claim for `ttl_ms` from `now_ms`; false when it is gone.
    async fn hold_for(
        &self,
        host: &str,
        claim: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> CoreResult<bool> {
        let shard = self.of_host(host);
        let mut conn = shard.conn.clone();
        let held: i64 = self
            .hold
            .key(&shard.prefix)
            .arg(host)
            .arg(claim)
            .arg(now_ms)
            .arg(ttl_ms)
            .arg(self.per_host)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| backend("hold", e))?;
        Ok(held == 1)
    }

    /// The claim script on one shard.
    async fn claim_on(&self, shard: &Shard, now_ms: u64) -> CoreResult<Option<Claim>> {
        let mut conn = shard.conn.clone();
        let claimed: Option<(String, String, String, f64)> = self
            .claim
            .key(&shard.prefix)
            .arg(now_ms)
            .arg(self.per_host)
            .arg(self.lease_ms)
            .invoke_async(&mut conn)
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

    /// One number from every shard.
    async fn each_shard<R: redis::FromRedisValue>(
        &self,
        what: &str,
        cmd: impl Fn(&str) -> redis::Cmd,
    ) -> CoreResult<Vec<R>> {
        try_join_all(self.shards.iter().map(|shard| {
            let mut conn = shard.conn.clone();
            let cmd = cmd(&shard.prefix);
            async move {
                cmd.query_async::<R>(&mut conn)
                    .await
                    .map_err(|e| backend(what, e))
            }
        }))
        .await
    }
}

/// The set (on `shard`) and member of `key` in the seen-set.
fn seen_member(shard: &Shard, key: &str) -> (String, i64) {
    let d = seen_digest(key);
    (
        format!("{}seen:{:04x}", shard.prefix, d >> 48),
        (d & 0xffff_ffff_ffff) as i64,
    )
}

/// The lease of `key` (its digest, so a long URL costs 16 hex digits).
fn lease_key(shard: &Shard, key: &str) -> String {
    format!("{}lease:{:016x}", shard.prefix, seen_digest(key))
}

/// 64 bits of the seen-set digest every backend uses: the top half, where FNV-1a's
/// multiplication has mixed every input byte.
pub fn seen_digest(key: &str) -> u64 {
    (trawl_core::state::seen_digest(key) >> 64) as u64
}

#[async_trait]
impl State for RedisState {
    async fn seen_add(&self, key: &str) -> CoreResult<bool> {
        let (shard, bucket, value) = self.seen_slot(key);
        let mut conn = shard.conn.clone();
        let added: i64 = redis::cmd("SADD")
            .arg(bucket)
            .arg(value)
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("seen", e))?;
        Ok(added == 1)
    }

    async fn seen_contains_many(&self, keys: &[String]) -> CoreResult<Vec<bool>> {
        let n = self.shards.len();
        self.by_shard(
            keys,
            |key| shard_of_key(key, n),
            |s, part| async move {
                // The shard is known: the key's URL is not parsed again.
                let shard = &self.shards[s];
                self.pipelined(shard, &part, "seen", |pipe, key| {
                    let (bucket, value) = seen_member(shard, key);
                    pipe.cmd("SISMEMBER").arg(bucket).arg(value);
                })
                .await
            },
        )
        .await
    }

    /// A lease per key on the crawl's home shard, one pipeline a batch: taken when free or
    /// already held under `token` (a call the patient connection sent twice).
    async fn lease_many(&self, keys: &[String], ttl_ms: u64, token: &str) -> CoreResult<Vec<bool>> {
        const TAKE: &str = "local v = redis.call('GET', KEYS[1]) \
            if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end \
            if v == ARGV[1] then return 1 end return 0";
        let home = self.home();
        let taken: Vec<i64> = self
            .pipelined(home, keys, "lease", |pipe, key| {
                pipe.cmd("EVAL")
                    .arg(TAKE)
                    .arg(1)
                    .arg(lease_key(home, key))
                    .arg(token)
                    .arg(ttl_ms.max(1));
            })
            .await?;
        Ok(taken.into_iter().map(|t| t == 1).collect())
    }

    /// Each lease given back only by its holder: one that expired and was taken by
    /// another writer stays theirs.
    async fn unlease_many(&self, keys: &[String], token: &str) -> CoreResult<()> {
        const GIVE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
            return redis.call('DEL', KEYS[1]) end return 0";
        let home = self.home();
        let _: Vec<i64> = self
            .pipelined(home, keys, "unlease", |pipe, key| {
                pipe.cmd("EVAL")
                    .arg(GIVE)
                    .arg(1)
                    .arg(lease_key(home, key))
                    .arg(token);
            })
            .await?;
        Ok(())
    }

    async fn seen_contains(&self, key: &str) -> CoreResult<bool> {
        let (shard, bucket, value) = self.seen_slot(key);
        let mut conn = shard.conn.clone();
        redis::cmd("SISMEMBER")
            .arg(bucket)
            .arg(value)
            .query_async(&mut conn)
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

    /// The shards in turn, from the one after the last claim's start: the first job
    /// any of them has ready.
    async fn claim(&self, now_ms: u64) -> CoreResult<Option<Claim>> {
        let n = self.shards.len();
        let first = self.turn.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            if let Some(c) = self.claim_on(&self.shards[(first + k) % n], now_ms).await? {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    async fn hold(&self, host: &str, claim: &str, now_ms: u64) -> CoreResult<bool> {
        self.hold_for(host, claim, now_ms, self.lease_ms).await
    }

    async fn handed(&self, host: &str, claim: &str, now_ms: u64) -> CoreResult<bool> {
        self.hold_for(host, claim, now_ms, self.claim_ttl_ms).await
    }

    fn renew_every(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_millis(
            (self.lease_ms / 3).max(200),
        ))
    }

    async fn release(
        &self,
        host: &str,
        claim: Option<&str>,
        next_allowed_ms: u64,
    ) -> CoreResult<()> {
        let shard = self.of_host(host);
        let mut conn = shard.conn.clone();
        let _: i64 = self
            .release
            .key(&shard.prefix)
            .arg(host)
            .arg(next_allowed_ms)
            .arg(self.per_host)
            .arg(claim.unwrap_or(""))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| backend("release", e))?;
        Ok(())
    }

    async fn next_ready_ms(&self) -> CoreResult<Option<u64>> {
        let firsts: Vec<Vec<(String, f64)>> = self
            .each_shard("ready", |prefix| {
                let mut cmd = redis::cmd("ZRANGE");
                cmd.arg(format!("{prefix}ready"))
                    .arg(0)
                    .arg(0)
                    .arg("WITHSCORES");
                cmd
            })
            .await?;
        Ok(firsts
            .iter()
            .filter_map(|f| f.first().map(|(_, t)| *t as u64))
            .min())
    }

    async fn queued(&self) -> CoreResult<usize> {
        let counts: Vec<Option<i64>> = self
            .each_shard("queued", |prefix| {
                let mut cmd = redis::cmd("GET");
                cmd.arg(format!("{prefix}queued"));
                cmd
            })
            .await?;
        Ok(counts.iter().map(|n| n.unwrap_or(0).max(0) as usize).sum())
    }

    /// Claimed and not yet released or expired.
    async fn claims(&self) -> CoreResult<usize> {
        let counts: Vec<usize> = self
            .each_shard("claims", |prefix| {
                let mut cmd = redis::cmd("ZCARD");
                cmd.arg(format!("{prefix}claimexp"));
                cmd
            })
            .await?;
        Ok(counts.iter().sum())
    }

    async fn robots_get(&self, host: &str, _now_ms: u64) -> CoreResult<Option<RobotsEntry>> {
        let shard = self.of_host(host);
        let mut conn = shard.conn.clone();
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("{}robots:{host}", shard.prefix))
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("robots get", e))?;
        // An entry that no longer decodes is as good as none: the robots file is fetched again.
        Ok(v.and_then(|s| serde_json::from_str(&s).ok()))
    }

    async fn robots_put(&self, host: &str, entry: RobotsEntry, ttl_ms: u64) -> CoreResult<()> {
        let json = serde_json::to_string(&entry).map_err(|e| backend("encode", e))?;
        let shard = self.of_host(host);
        let mut conn = shard.conn.clone();
        let _: () = redis::cmd("SET")
            .arg(format!("{}robots:{host}", shard.prefix))
            .arg(json)
            .arg("PX")
            .arg(ttl_ms.max(1))
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("robots put", e))?;
        Ok(())
    }

    async fn incr(&self, counter: &str, by: i64) -> CoreResult<i64> {
        let mut conn = self.home().conn.clone();
        redis::cmd("HINCRBY")
            .arg(format!("{}counters", self.prefix()))
            .arg(counter)
            .arg(by)
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("incr", e))
    }

    async fn incr_many(&self, counters: &[(String, i64)]) -> CoreResult<Vec<i64>> {
        let key = format!("{}counters", self.prefix());
        self.pipelined(self.home(), counters, "incr", |pipe, (c, by)| {
            pipe.cmd("HINCRBY").arg(&key).arg(c).arg(*by);
        })
        .await
    }

    async fn counters(&self) -> CoreResult<BTreeMap<String, i64>> {
        let mut conn = self.home().conn.clone();
        redis::cmd("HGETALL")
            .arg(format!("{}counters", self.prefix()))
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("counters", e))
    }
}

//! The shared state a stage needs: the seen-set, the host schedule (per-host priority queues
//! plus hosts ordered by the time they may next be fetched: Mercator's back-queue heap), the
//! robots cache and counters.
//!
//! Every method is one atomic step, so the Redis implementation can make each a Lua script.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{CoreResult, FetchJob};

/// What fetching a host's robots.txt gave, per RFC 9309 section 2.3.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RobotsAccess {
    /// 2xx: the (capped) file body.
    Body(Vec<u8>),
    /// 4xx: the crawler may fetch everything.
    Unavailable,
    /// 5xx or no answer: the crawler must fetch nothing.
    Unreachable,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RobotsEntry {
    pub access: RobotsAccess,
    pub fetched_at_ms: u64,
    /// The host's `/.well-known/tdmrep.json` body, when it answered 2xx (fetched with
    /// robots.txt, cached with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tdmrep: Option<Vec<u8>>,
}

/// The result of offering a URL to the host schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    /// Accepted, and this many lower-priority URLs were evicted to stay under the cap.
    AcceptedEvicting(usize),
    /// The frontier is full of URLs that all rank higher: this one was dropped.
    Rejected,
}

/// What [`State::admit_many`] did with one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// Already in the seen-set: nothing was done.
    Seen,
    /// Added to the seen-set; no job was given.
    Marked,
    /// Added to the seen-set, and its job offered to the queues.
    Queued(Enqueued),
}

/// A claimed fetch: the job plus the host slot it holds until [`State::release`].
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub job: FetchJob,
}

#[async_trait]
pub trait State: Send + Sync {
    /// Adds `key` to the seen-set; true when it was not there before.
    async fn seen_add(&self, key: &str) -> CoreResult<bool>;
    /// [`State::seen_contains`] of each key, in one round trip where the backend is
    /// remote: most links of a page were seen before, and are dropped on this read alone.
    async fn seen_contains_many(&self, keys: &[String]) -> CoreResult<Vec<bool>> {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            out.push(self.seen_contains(k).await?);
        }
        Ok(out)
    }
    /// Takes a lease of `ttl_ms` on each key for this caller, where none is held: true
    /// where taken. Two processes handed the same page at once (a redelivery while the
    /// first delivery is still being written) write it once: the second waits for the
    /// first. A lease whose holder died ends with its TTL. A state of one process, where no
    /// page is handed out twice at once, grants every lease.
    /// `token` names the holder: a lease already held under it is taken again (a call
    /// sent twice), and only its holder gives it back.
    async fn lease_many(
        &self,
        keys: &[String],
        _ttl_ms: u64,
        _token: &str,
    ) -> CoreResult<Vec<bool>> {
        Ok(vec![true; keys.len()])
    }
    /// Gives back the leases of `keys` held under `token` ([`State::lease_many`]).
    async fn unlease_many(&self, _keys: &[String], _token: &str) -> CoreResult<()> {
        Ok(())
    }
    /// For each (key, job) in order: adds the key to the seen-set and, when it was new and
    /// a job is given, offers the job to the queues. One atomic step for the whole batch
    /// where the backend is remote, so a batch that fails is not half admitted: run again
    /// (a redelivery), it finds each key either seen and queued, or neither.
    async fn admit_many(
        &self,
        items: Vec<(String, Option<FetchJob>)>,
    ) -> CoreResult<Vec<Admitted>> {
        let mut out = Vec::with_capacity(items.len());
        for (key, job) in items {
            out.push(match (self.seen_add(&key).await?, job) {
                (false, _) => Admitted::Seen,
                (true, None) => Admitted::Marked,
                (true, Some(job)) => Admitted::Queued(self.enqueue(job).await?),
            });
        }
        Ok(out)
    }
    /// Whether `key` is in the seen-set.
    async fn seen_contains(&self, key: &str) -> CoreResult<bool>;
    /// Puts a job in its host's queue, evicting the lowest-priority URL when full.
    async fn enqueue(&self, job: FetchJob) -> CoreResult<Enqueued>;
    /// Takes the best job of the host that has been ready longest (`next_allowed <= now`)
    /// and has a free slot; the slot stays taken until released.
    async fn claim(&self, now_ms: u64) -> CoreResult<Option<Claim>>;
    /// Frees a slot on `host` (the claim `claim`, when claims are named); no request to it
    /// starts before `next_allowed_ms`. A named claim that already expired frees nothing:
    /// its slot was given back when it expired.
    async fn release(
        &self,
        host: &str,
        claim: Option<&str>,
        next_allowed_ms: u64,
    ) -> CoreResult<()>;
    /// Renews the named claim a fetcher is about to fetch under; false when it expired
    /// (its job went back in the queue and is fetched under a new claim, so this copy must
    /// not be). States whose claims never expire hold every claim.
    async fn hold(&self, _host: &str, _claim: &str, _now_ms: u64) -> CoreResult<bool> {
        Ok(true)
    }
    /// Extends a named claim whose job was just handed to the fetch queue from its short
    /// lease to the lifetime a job may wait there ([`State::hold`] shortens it again when
    /// a fetcher takes the job); false when it expired meanwhile. A frontier that dies
    /// between its claim and this call leaves a lease that ends soon, not a host that waits
    /// the whole lifetime.
    async fn handed(&self, _host: &str, _claim: &str, _now_ms: u64) -> CoreResult<bool> {
        Ok(true)
    }
    /// How often a fetch in progress renews its named claim ([`State::hold`]), so that a
    /// long one (Crawl-delay waits, redirect hops, slow servers) never outlives it; `None`
    /// where claims never expire.
    fn renew_every(&self) -> Option<std::time::Duration> {
        None
    }
    /// Earliest time any queued host becomes ready, if any host has work and a free slot.
    async fn next_ready_ms(&self) -> CoreResult<Option<u64>>;
    /// URLs waiting in host queues.
    async fn queued(&self) -> CoreResult<usize>;
    /// Host slots held right now (claimed and not yet released).
    async fn claims(&self) -> CoreResult<usize>;
    async fn robots_get(&self, host: &str, now_ms: u64) -> CoreResult<Option<RobotsEntry>>;
    async fn robots_put(&self, host: &str, entry: RobotsEntry, ttl_ms: u64) -> CoreResult<()>;
    /// Adds `by` to a counter and returns its new value.
    async fn incr(&self, counter: &str, by: i64) -> CoreResult<i64>;
    /// [`State::incr`] of a typed counter.
    async fn count(&self, counter: &crate::counters::Counter, by: i64) -> CoreResult<i64> {
        self.incr(&counter.key(), by).await
    }
    /// [`State::incr`] of each counter in order, in one round trip where the backend is
    /// remote; the new values, in order.
    async fn incr_many(&self, counters: &[(String, i64)]) -> CoreResult<Vec<i64>> {
        let mut out = Vec::with_capacity(counters.len());
        for (c, by) in counters {
            out.push(self.incr(c, *by).await?);
        }
        Ok(out)
    }
    /// [`State::incr_many`] of typed counters.
    async fn count_many(
        &self,
        counters: &[(crate::counters::Counter, i64)],
    ) -> CoreResult<Vec<i64>> {
        let keyed: Vec<(String, i64)> = counters
            .iter()
            .map(|(c, by)| (c.key().into_owned(), *by))
            .collect();
        self.incr_many(&keyed).await
    }
    async fn counters(&self) -> CoreResult<BTreeMap<String, i64>>;
    /// Waits until the host schedule may have changed (a job queued, a host released), or
    /// `max` passed. Implementations without change notification simply sleep.
    async fn wait_change(&self, max: std::time::Duration) {
        tokio::time::sleep(max).await;
    }
}

/// Counts units of work that exist anywhere in the embedded pipeline. Work is always
/// registered downstream before it is removed upstream, so zero means the crawl is done.
#[derive(Debug, Clone, Default)]
pub struct WorkTracker(Arc<AtomicI64>);

impl WorkTracker {
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::SeqCst);
    }
    pub fn done(&self, n: i64) {
        self.0.fetch_sub(n, Ordering::SeqCst);
    }
    pub fn outstanding(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The digest of a seen-set key, for every state backend: 16 bytes per URL instead of the
/// whole string in memory; Redis keeps the top 64 bits (see `trawl_cluster::redis_state`).
pub fn seen_digest(key: &str) -> u128 {
    // FNV-1a 128: stable across processes and releases, unlike std's hasher.
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in key.bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    h
}

mod memory;
pub use memory::MemoryState;

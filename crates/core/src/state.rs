//! The shared state a stage needs: the seen-set, the host schedule (per-host priority queues
//! plus hosts ordered by the time they may next be fetched: Mercator's back-queue heap), the
//! robots cache and counters.
//!
//! Every method is one atomic step, so the Redis implementation can make each a Lua script.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

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

#[derive(Default)]
struct HostQueue {
    jobs: BTreeMap<(i64, u64), FetchJob>,
    in_flight: u32,
    next_allowed: u64,
    /// The key under which the host sits in `ready`, when it does.
    ready_key: Option<(u64, u64)>,
}

#[derive(Default)]
struct Inner {
    seen: HashSet<u128>,
    hosts: HashMap<String, HostQueue>,
    /// Hosts with work and a free slot, by (next allowed time, rotation sequence).
    ready: BTreeSet<(u64, u64, String)>,
    /// Every queued job by (priority, sequence), to find the worst one to evict.
    by_priority: BTreeSet<(i64, u64, String)>,
    seq: u64,
    robots: HashMap<String, (RobotsEntry, u64)>,
    /// Bytes of robots.txt bodies in `robots`.
    robots_bytes: usize,
    counters: BTreeMap<String, i64>,
    /// Releases since the last sweep of idle hosts.
    releases: u32,
}

/// robots.txt bodies kept, at most (a file may be 500 KiB, and a crawl of many hosts
/// keeps one each): past this the entries closest to expiry go, and their hosts' files
/// are fetched again when next needed.
const ROBOTS_CACHE_BYTES: usize = 64 << 20;
/// A host with nothing queued, nothing in flight and its politeness gap over is dropped
/// from the schedule at most this many releases after (it costs nothing to recreate).
const SWEEP_EVERY: u32 = 4096;

fn robots_size(e: &RobotsEntry) -> usize {
    match &e.access {
        RobotsAccess::Body(b) => b.len(),
        _ => 0,
    }
}

/// The embedded runtime's state: everything in one process behind one lock.
pub struct MemoryState {
    inner: Mutex<Inner>,
    /// One permit is kept when nobody waits, so a release between the dispatcher's last
    /// claim and its wait is not missed (there is one dispatcher per process).
    changed: tokio::sync::Notify,
    max_queued: usize,
    per_host: u32,
    tracker: WorkTracker,
}

impl MemoryState {
    /// `max_queued` caps URLs waiting in host queues; `per_host` is the number of requests
    /// that may be in flight to one host.
    pub fn new(max_queued: usize, per_host: u32, tracker: WorkTracker) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            changed: tokio::sync::Notify::new(),
            max_queued: max_queued.max(1),
            per_host: per_host.max(1),
            tracker,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` is in the seen-set.
    pub fn is_seen(&self, key: &str) -> bool {
        self.lock().seen.contains(&seen_digest(key))
    }

    /// Puts [`seen_digest`]s back into the seen-set (a resumed crawl's).
    pub fn restore_seen(&self, digests: impl IntoIterator<Item = u128>) {
        self.lock().seen.extend(digests);
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

impl Inner {
    /// Drops hosts that hold nothing and may be fetched again already.
    fn sweep_idle(&mut self, now: u64) {
        self.hosts
            .retain(|_, q| !q.jobs.is_empty() || q.in_flight > 0 || q.next_allowed > now);
    }

    fn put_robots(&mut self, host: &str, entry: RobotsEntry, expires: u64) {
        self.robots_bytes += robots_size(&entry);
        if let Some((old, _)) = self.robots.insert(host.to_string(), (entry, expires)) {
            self.robots_bytes -= robots_size(&old);
        }
        if self.robots_bytes <= ROBOTS_CACHE_BYTES {
            return;
        }
        let mut by_expiry: Vec<(u64, String)> = self
            .robots
            .iter()
            .map(|(h, (_, exp))| (*exp, h.clone()))
            .collect();
        by_expiry.sort_unstable();
        for (_, h) in by_expiry {
            if self.robots_bytes <= ROBOTS_CACHE_BYTES * 3 / 4 {
                break;
            }
            if let Some((old, _)) = self.robots.remove(&h) {
                self.robots_bytes -= robots_size(&old);
            }
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Puts `host` in the ready set if it has work and a free slot, out of it otherwise.
    fn reschedule(&mut self, host: &str, per_host: u32) {
        let seq = self.next_seq();
        let Some(q) = self.hosts.get_mut(host) else {
            return;
        };
        let eligible = !q.jobs.is_empty() && q.in_flight < per_host;
        if let Some((t, s)) = q.ready_key.take() {
            self.ready.remove(&(t, s, host.to_string()));
        }
        if eligible {
            q.ready_key = Some((q.next_allowed, seq));
            self.ready.insert((q.next_allowed, seq, host.to_string()));
        } else if q.jobs.is_empty() && q.in_flight == 0 && q.next_allowed == 0 {
            self.hosts.remove(host);
        }
    }

    fn evict_worst(&mut self, per_host: u32) -> bool {
        let Some((prio, seq, host)) = self.by_priority.pop_last() else {
            return false;
        };
        if let Some(q) = self.hosts.get_mut(&host) {
            q.jobs.remove(&(prio, seq));
        }
        self.reschedule(&host, per_host);
        true
    }
}

#[async_trait]
impl State for MemoryState {
    async fn seen_add(&self, key: &str) -> CoreResult<bool> {
        Ok(self.lock().seen.insert(seen_digest(key)))
    }

    async fn enqueue(&self, job: FetchJob) -> CoreResult<Enqueued> {
        let mut inner = self.lock();
        let mut evicted = 0;
        if inner.by_priority.len() >= self.max_queued {
            let worst = inner.by_priority.last().map(|(p, _, _)| *p);
            match worst {
                Some(w) if w > job.priority => {
                    while inner.by_priority.len() >= self.max_queued {
                        if !inner.evict_worst(self.per_host) {
                            break;
                        }
                        evicted += 1;
                    }
                }
                _ => return Ok(Enqueued::Rejected),
            }
        }
        let seq = inner.next_seq();
        let host = job.host.clone();
        inner.by_priority.insert((job.priority, seq, host.clone()));
        inner
            .hosts
            .entry(host.clone())
            .or_default()
            .jobs
            .insert((job.priority, seq), job);
        inner.reschedule(&host, self.per_host);
        drop(inner);
        // One unit in, `evicted` units gone.
        self.tracker.add(1 - evicted as i64);
        self.changed.notify_one();
        Ok(if evicted > 0 {
            Enqueued::AcceptedEvicting(evicted)
        } else {
            Enqueued::Accepted
        })
    }

    async fn claim(&self, now_ms: u64) -> CoreResult<Option<Claim>> {
        let mut inner = self.lock();
        let Some(first) = inner.ready.first().cloned() else {
            return Ok(None);
        };
        if first.0 > now_ms {
            return Ok(None);
        }
        let host = first.2;
        let Some(q) = inner.hosts.get_mut(&host) else {
            inner.ready.remove(&(first.0, first.1, host));
            return Ok(None);
        };
        let Some(((prio, seq), job)) = q.jobs.pop_first() else {
            return Ok(None);
        };
        q.in_flight += 1;
        inner.by_priority.remove(&(prio, seq, host.clone()));
        inner.reschedule(&host, self.per_host);
        // The job's unit of work stays counted until the slot is released.
        Ok(Some(Claim { job }))
    }

    async fn release(
        &self,
        host: &str,
        _claim: Option<&str>,
        next_allowed_ms: u64,
    ) -> CoreResult<()> {
        let mut inner = self.lock();
        let q = inner.hosts.entry(host.to_string()).or_default();
        q.in_flight = q.in_flight.saturating_sub(1);
        q.next_allowed = q.next_allowed.max(next_allowed_ms);
        inner.reschedule(host, self.per_host);
        inner.releases += 1;
        if inner.releases >= SWEEP_EVERY {
            inner.releases = 0;
            inner.sweep_idle(crate::clock::now_ms());
        }
        drop(inner);
        self.tracker.done(1);
        self.changed.notify_one();
        Ok(())
    }

    async fn next_ready_ms(&self) -> CoreResult<Option<u64>> {
        Ok(self.lock().ready.first().map(|(t, _, _)| *t))
    }

    async fn queued(&self) -> CoreResult<usize> {
        Ok(self.lock().by_priority.len())
    }

    async fn seen_contains(&self, key: &str) -> CoreResult<bool> {
        Ok(self.is_seen(key))
    }

    async fn claims(&self) -> CoreResult<usize> {
        let inner = self.lock();
        Ok(inner.hosts.values().map(|q| q.in_flight as usize).sum())
    }

    async fn robots_get(&self, host: &str, now_ms: u64) -> CoreResult<Option<RobotsEntry>> {
        let inner = self.lock();
        Ok(inner
            .robots
            .get(host)
            .filter(|(_, expires)| *expires > now_ms)
            .map(|(e, _)| e.clone()))
    }

    async fn robots_put(&self, host: &str, entry: RobotsEntry, ttl_ms: u64) -> CoreResult<()> {
        let expires = entry.fetched_at_ms.saturating_add(ttl_ms);
        self.lock().put_robots(host, entry, expires);
        Ok(())
    }

    async fn incr(&self, counter: &str, by: i64) -> CoreResult<i64> {
        let mut inner = self.lock();
        let v = inner.counters.entry(counter.to_string()).or_insert(0);
        *v += by;
        Ok(*v)
    }

    async fn counters(&self) -> CoreResult<BTreeMap<String, i64>> {
        Ok(self.lock().counters.clone())
    }

    async fn wait_change(&self, max: std::time::Duration) {
        let _ = tokio::time::timeout(max, self.changed.notified()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MESSAGE_VERSION, UrlKind};

    fn job(host: &str, path: &str, priority: i64) -> FetchJob {
        FetchJob {
            v: MESSAGE_VERSION,
            crawl: "t".into(),
            url: format!("http://{host}{path}"),
            host: host.into(),
            depth: 0,
            kind: UrlKind::Page,
            priority,
            retries: 0,
            lastmod: None,
            robots_wait_since_ms: None,
            claim: None,
        }
    }

    #[tokio::test]
    async fn seen_set_adds_once() {
        let s = MemoryState::new(10, 1, WorkTracker::default());
        assert!(s.seen_add("http://a/").await.unwrap());
        assert!(!s.seen_add("http://a/").await.unwrap());
        assert!(s.seen_add("http://a/b").await.unwrap());
    }

    #[tokio::test]
    async fn one_in_flight_per_host_and_release_time_respected() {
        let tracker = WorkTracker::default();
        let s = MemoryState::new(10, 1, tracker.clone());
        s.enqueue(job("a", "/1", 1)).await.unwrap();
        s.enqueue(job("a", "/2", 2)).await.unwrap();
        let c = s.claim(100).await.unwrap().unwrap();
        assert_eq!(c.job.url, "http://a/1");
        assert!(s.claim(100).await.unwrap().is_none(), "host busy");
        s.release("a", None, 500).await.unwrap();
        assert!(s.claim(499).await.unwrap().is_none(), "too early");
        assert_eq!(s.next_ready_ms().await.unwrap(), Some(500));
        assert_eq!(s.claim(500).await.unwrap().unwrap().job.url, "http://a/2");
        s.release("a", None, 600).await.unwrap();
        assert_eq!(tracker.outstanding(), 0);
    }

    #[tokio::test]
    async fn hosts_rotate() {
        let s = MemoryState::new(100, 1, WorkTracker::default());
        for i in 0..3 {
            s.enqueue(job("a", &format!("/{i}"), 0)).await.unwrap();
            s.enqueue(job("b", &format!("/{i}"), 0)).await.unwrap();
        }
        let mut order = Vec::new();
        for t in 1..=6 {
            let c = s.claim(t * 10).await.unwrap().unwrap();
            order.push(c.job.host.clone());
            s.release(&c.job.host, None, t * 10).await.unwrap();
        }
        assert_eq!(order, ["a", "b", "a", "b", "a", "b"]);
    }

    #[tokio::test]
    async fn cap_evicts_lowest_priority() {
        let tracker = WorkTracker::default();
        let s = MemoryState::new(2, 1, tracker.clone());
        assert_eq!(
            s.enqueue(job("a", "/deep", 5)).await.unwrap(),
            Enqueued::Accepted
        );
        assert_eq!(
            s.enqueue(job("b", "/mid", 3)).await.unwrap(),
            Enqueued::Accepted
        );
        assert_eq!(
            s.enqueue(job("c", "/deeper", 9)).await.unwrap(),
            Enqueued::Rejected
        );
        assert_eq!(
            s.enqueue(job("c", "/top", 0)).await.unwrap(),
            Enqueued::AcceptedEvicting(1)
        );
        assert_eq!(s.queued().await.unwrap(), 2);
        assert_eq!(tracker.outstanding(), 2);
        let first = s.claim(1).await.unwrap().unwrap();
        let second = s.claim(1).await.unwrap().unwrap();
        let mut urls = vec![first.job.url, second.job.url];
        urls.sort();
        assert_eq!(urls, ["http://b/mid", "http://c/top"]);
        assert!(s.claim(1).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_robots_cache_and_idle_hosts_stay_bounded() {
        let s = MemoryState::new(1_000_000, 1, WorkTracker::default());
        let body = vec![b'#'; 500 << 10];
        for i in 0..400 {
            let e = RobotsEntry {
                access: RobotsAccess::Body(body.clone()),
                fetched_at_ms: i,
            };
            s.robots_put(&format!("h{i}"), e, 1_000_000).await.unwrap();
        }
        {
            let inner = s.lock();
            assert!(
                inner.robots_bytes <= ROBOTS_CACHE_BYTES,
                "{}",
                inner.robots_bytes
            );
            assert!(inner.robots.contains_key("h399"), "the newest entries stay");
            assert!(!inner.robots.contains_key("h0"), "the oldest went");
        }

        // Hosts done with, their gap over, leave the schedule.
        for i in 0..SWEEP_EVERY {
            s.enqueue(job(&format!("d{i}"), "/", 0)).await.unwrap();
            let c = s.claim(0).await.unwrap().unwrap();
            s.release(&c.job.host, None, 1).await.unwrap();
        }
        assert!(s.lock().hosts.len() < 10, "{}", s.lock().hosts.len());
    }

    #[tokio::test]
    async fn robots_cache_expires() {
        let s = MemoryState::new(1, 1, WorkTracker::default());
        let e = RobotsEntry {
            access: RobotsAccess::Unavailable,
            fetched_at_ms: 1000,
        };
        s.robots_put("a", e.clone(), 50).await.unwrap();
        assert_eq!(s.robots_get("a", 1049).await.unwrap(), Some(e));
        assert_eq!(s.robots_get("a", 1050).await.unwrap(), None);
    }
}

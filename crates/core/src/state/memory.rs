//! [`MemoryState`]: the embedded runtime's state, everything in one process behind one
//! lock, its frontier spilling to a file past what it keeps in memory.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Claim, Enqueued, RobotsAccess, RobotsEntry, State, WorkTracker, seen_digest};
use crate::spill::Spill;
use crate::{CoreError, CoreResult, FetchJob};

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
    /// The top 64 bits of each [`seen_digest`], as Redis keeps them: 8 bytes a URL.
    seen: HashSet<u64>,
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
    /// Jobs past `in_memory`, when the state has a file for them.
    spill: Option<Spill>,
    /// URLs the cap dropped (evicted or turned away) since the last
    /// [`MemoryState::take_dropped`], when the state records them.
    dropped: Option<Vec<String>>,
}

/// robots.txt bodies kept, at most (a file may be 500 KiB, and a crawl of many hosts
/// keeps one each): past this the entries closest to expiry go, and their hosts' files
/// are fetched again when next needed.
const ROBOTS_CACHE_BYTES: usize = 64 << 20;
/// A host with nothing queued, nothing in flight and its politeness gap over is dropped
/// from the schedule at most this many releases after (it costs nothing to recreate).
const SWEEP_EVERY: u32 = 4096;

fn robots_size(e: &RobotsEntry) -> usize {
    let tdmrep = e.tdmrep.as_ref().map_or(0, Vec::len);
    match &e.access {
        RobotsAccess::Body(b) => b.len() + tdmrep,
        _ => tdmrep,
    }
}

/// The embedded runtime's state: everything in one process behind one lock.
pub struct MemoryState {
    inner: Mutex<Inner>,
    /// One permit is kept when nobody waits, so a release between the dispatcher's last
    /// claim and its wait is not missed (there is one dispatcher per process).
    changed: tokio::sync::Notify,
    max_queued: usize,
    /// Jobs kept in the host queues; the rest wait in the spill file (when there is one).
    in_memory: usize,
    per_host: u32,
    tracker: WorkTracker,
}

/// Jobs read back from the spill file at once.
const REFILL_MAX: usize = 8192;

impl MemoryState {
    /// `max_queued` caps URLs waiting in host queues; `per_host` is the number of requests
    /// that may be in flight to one host.
    pub fn new(max_queued: usize, per_host: u32, tracker: WorkTracker) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            changed: tokio::sync::Notify::new(),
            max_queued: max_queued.max(1),
            in_memory: usize::MAX,
            per_host: per_host.max(1),
            tracker,
        }
    }

    /// Keeps at most `in_memory` jobs in the host queues and the rest, up to the cap, in
    /// `spill`: memory then stays flat however far the frontier runs ahead of the fetches.
    /// The host queues keep the best-ranked jobs they are offered; the file gives its jobs
    /// back oldest first whenever the queues fall under half of `in_memory`.
    pub fn with_spill(mut self, spill: Spill, in_memory: usize) -> Self {
        self.in_memory = in_memory.max(2);
        self.lock().spill = Some(spill);
        self
    }

    /// Keeps the URLs the cap drops, for [`MemoryState::take_dropped`] (the embedded
    /// runtime journals them).
    pub fn recording_dropped(self) -> Self {
        self.lock().dropped = Some(Vec::new());
        self
    }

    /// The URLs the cap dropped since the last call.
    pub fn take_dropped(&self) -> Vec<String> {
        self.lock()
            .dropped
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` is in the seen-set.
    pub fn is_seen(&self, key: &str) -> bool {
        self.lock().seen.contains(&seen_key(key))
    }

    /// Puts [`seen_digest`]s back into the seen-set (a resumed crawl's).
    pub fn restore_seen(&self, digests: impl IntoIterator<Item = u128>) {
        self.lock()
            .seen
            .extend(digests.into_iter().map(fold_digest));
    }
}

/// What the in-memory seen-set keeps of a key: two keys share it with odds of one in
/// 3.7 million at ten million URLs.
fn seen_key(key: &str) -> u64 {
    fold_digest(seen_digest(key))
}

/// The top 64 bits of a digest, where FNV-1a's multiplication has mixed every byte.
fn fold_digest(d: u128) -> u64 {
    (d >> 64) as u64
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

    /// Takes the lowest-ranked job out of the host queues.
    fn take_worst(&mut self, per_host: u32) -> Option<FetchJob> {
        let (prio, seq, host) = self.by_priority.pop_last()?;
        let job = self
            .hosts
            .get_mut(&host)
            .and_then(|q| q.jobs.remove(&(prio, seq)));
        self.reschedule(&host, per_host);
        job
    }

    fn record_dropped(&mut self, url: String) {
        if let Some(d) = &mut self.dropped {
            d.push(url);
        }
    }

    fn spilled(&self) -> usize {
        self.spill.as_ref().map_or(0, Spill::len)
    }

    fn insert(&mut self, job: FetchJob, per_host: u32) {
        let seq = self.next_seq();
        let host = job.host.clone();
        self.by_priority.insert((job.priority, seq, host.clone()));
        self.hosts
            .entry(host.clone())
            .or_default()
            .jobs
            .insert((job.priority, seq), job);
        self.reschedule(&host, per_host);
    }

    /// Moves jobs from the spill file back into the host queues once they run low. Their
    /// units of work were counted when they were spilled.
    fn refill(&mut self, in_memory: usize, per_host: u32) -> CoreResult<()> {
        let held = self.by_priority.len();
        let Some(spill) = self.spill.as_mut().filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        if held >= in_memory / 2 {
            return Ok(());
        }
        for job in spill.pop((in_memory - held).min(REFILL_MAX))? {
            self.insert(job, per_host);
        }
        Ok(())
    }
}

#[async_trait]
impl State for MemoryState {
    async fn seen_add(&self, key: &str) -> CoreResult<bool> {
        Ok(self.lock().seen.insert(seen_key(key)))
    }

    async fn enqueue(&self, job: FetchJob) -> CoreResult<Enqueued> {
        let mut inner = self.lock();
        let held = inner.by_priority.len();
        let worst = inner.by_priority.last().map(|(p, _, _)| *p);
        let ranks_higher = worst.is_some_and(|w| w > job.priority);
        let mut evicted = 0;
        if held + inner.spilled() >= self.max_queued {
            if !ranks_higher {
                inner.record_dropped(job.url);
                return Ok(Enqueued::Rejected);
            }
            while inner.by_priority.len() + inner.spilled() >= self.max_queued {
                let Some(gone) = inner.take_worst(self.per_host) else {
                    break;
                };
                inner.record_dropped(gone.url);
                evicted += 1;
            }
        } else if held >= self.in_memory {
            // The host queues are full: the lower-ranked of the job and their worst goes to
            // the file. A failed write puts the worst back, so it changes nothing.
            let Some(spill) = inner.spill.as_mut() else {
                return Err(CoreError::Backend("the host queues are full".into()));
            };
            if !ranks_higher {
                spill.push(&job)?;
                drop(inner);
                self.tracker.add(1);
                return Ok(Enqueued::Accepted);
            }
            if let Some(moved) = inner.take_worst(self.per_host) {
                let pushed = inner.spill.as_mut().map_or(Ok(()), |s| s.push(&moved));
                if let Err(e) = pushed {
                    inner.insert(moved, self.per_host);
                    return Err(e);
                }
            }
        }
        inner.insert(job, self.per_host);
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
        inner.refill(self.in_memory, self.per_host)?;
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
        let mut inner = self.lock();
        inner.refill(self.in_memory, self.per_host)?;
        Ok(inner.ready.first().map(|(t, _, _)| *t))
    }

    async fn queued(&self) -> CoreResult<usize> {
        let inner = self.lock();
        Ok(inner.by_priority.len() + inner.spilled())
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

    /// Past `in_memory` the jobs wait in the file: the host queues never hold more, every
    /// job comes back exactly once, and the best-ranked jobs offered stay in memory.
    #[tokio::test]
    async fn the_frontier_spills_past_its_memory_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let tracker = WorkTracker::default();
        let spill = Spill::create(&dir.path().join("spill")).unwrap();
        let s = MemoryState::new(1_000, 1, tracker.clone()).with_spill(spill, 8);
        let n = 300;
        for i in 0..n {
            // Priorities mixed: every tenth job ranks above all the others.
            let prio = if i % 10 == 0 { 0 } else { 5 + i as i64 };
            let r = s.enqueue(job(&format!("h{}", i % 3), &format!("/{i}"), prio));
            assert_eq!(r.await.unwrap(), Enqueued::Accepted);
            assert!(s.lock().by_priority.len() <= 8);
        }
        assert_eq!(s.queued().await.unwrap(), n);
        assert_eq!(tracker.outstanding(), n as i64);
        let mut got = Vec::new();
        let mut now = 0;
        while let Some(c) = s.claim(now).await.unwrap() {
            got.push(c.job);
            let host = got.last().unwrap().host.clone();
            s.release(&host, None, now).await.unwrap();
            now += 1;
            assert!(s.lock().by_priority.len() <= 8);
        }
        // The first claims are of top-ranked jobs: the host queues kept them.
        assert!(got[..3].iter().all(|j| j.priority == 0), "{:?}", &got[..3]);
        let mut urls: Vec<String> = got.iter().map(|j| j.url.clone()).collect();
        urls.sort();
        urls.dedup();
        assert_eq!((got.len(), urls.len()), (n, n), "every job once");
        assert_eq!(s.queued().await.unwrap(), 0);
        assert_eq!(tracker.outstanding(), 0);
    }

    /// The cap counts the jobs in the file too, and every URL it drops is kept for the
    /// journal, the one turned away as well as the ones evicted.
    #[tokio::test]
    async fn the_cap_counts_the_spill_and_names_what_it_drops() {
        let dir = tempfile::tempdir().unwrap();
        let tracker = WorkTracker::default();
        let spill = Spill::create(&dir.path().join("spill")).unwrap();
        let s = MemoryState::new(6, 1, tracker.clone())
            .with_spill(spill, 3)
            .recording_dropped();
        for i in 0..6 {
            let r = s.enqueue(job("a", &format!("/{i}"), 10 + i)).await.unwrap();
            assert_eq!(r, Enqueued::Accepted);
        }
        assert_eq!(
            s.enqueue(job("a", "/late", 99)).await.unwrap(),
            Enqueued::Rejected
        );
        assert_eq!(
            s.enqueue(job("a", "/top", 0)).await.unwrap(),
            Enqueued::AcceptedEvicting(1)
        );
        assert_eq!(s.queued().await.unwrap(), 6);
        assert_eq!(tracker.outstanding(), 6);
        // In memory were /0../2 (the file took /3../5): /2 ranked lowest there.
        assert_eq!(s.take_dropped(), ["http://a/late", "http://a/2"]);
        assert!(s.take_dropped().is_empty());
    }

    #[tokio::test]
    async fn the_robots_cache_and_idle_hosts_stay_bounded() {
        let s = MemoryState::new(1_000_000, 1, WorkTracker::default());
        let body = vec![b'#'; 500 << 10];
        for i in 0..400 {
            let e = RobotsEntry {
                access: RobotsAccess::Body(body.clone()),
                fetched_at_ms: i,
                tdmrep: None,
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
            tdmrep: None,
        };
        s.robots_put("a", e.clone(), 50).await.unwrap();
        assert_eq!(s.robots_get("a", 1049).await.unwrap(), Some(e));
        assert_eq!(s.robots_get("a", 1050).await.unwrap(), None);
    }
}

//! The embedded runtime's state and discovered hop, reporting to the journal.
//!
//! Only what a resumed crawl cannot rebuild is reported: a URL entering the seen-set, a job
//! entering a host queue, a discovered batch published and acknowledged. Claims, robots
//! and the fetch, fetched and docs hops are not: a page in flight at a kill is fetched again.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use trawl_core::queue::{Delivery, MemoryQueue, Queue};
use trawl_core::state::{Claim, Enqueued, MemoryState, RobotsEntry, State};
use trawl_core::{CoreResult, Discovered, FetchJob};

use crate::journal::Journal;

/// [`MemoryState`] whose seen-set and host queues are journaled.
pub struct DurableState {
    inner: Arc<MemoryState>,
    journal: Journal,
}

impl DurableState {
    pub fn new(inner: Arc<MemoryState>, journal: Journal) -> Self {
        DurableState { inner, journal }
    }
}

#[async_trait]
impl State for DurableState {
    async fn seen_add(&self, key: &str) -> CoreResult<bool> {
        let new = self.inner.seen_add(key).await?;
        if new {
            self.journal.seen(key)?;
        }
        Ok(new)
    }

    async fn enqueue(&self, job: FetchJob) -> CoreResult<Enqueued> {
        // Reported first: the page a fetch of this job writes is reported after it.
        self.journal.queued(&job)?;
        let r = self.inner.enqueue(job).await;
        // Recorded, not only counted: a dropped URL is marked in the store.
        for url in self.inner.take_dropped() {
            self.journal.dropped(&url)?;
        }
        r
    }

    async fn claim(&self, now_ms: u64) -> CoreResult<Option<Claim>> {
        self.inner.claim(now_ms).await
    }

    async fn release(
        &self,
        host: &str,
        claim: Option<&str>,
        next_allowed_ms: u64,
    ) -> CoreResult<()> {
        self.inner.release(host, claim, next_allowed_ms).await
    }

    async fn next_ready_ms(&self) -> CoreResult<Option<u64>> {
        self.inner.next_ready_ms().await
    }

    async fn queued(&self) -> CoreResult<usize> {
        self.inner.queued().await
    }

    async fn seen_contains(&self, key: &str) -> CoreResult<bool> {
        self.inner.seen_contains(key).await
    }

    async fn claims(&self) -> CoreResult<usize> {
        self.inner.claims().await
    }

    async fn robots_get(&self, host: &str, now_ms: u64) -> CoreResult<Option<RobotsEntry>> {
        self.inner.robots_get(host, now_ms).await
    }

    async fn robots_put(&self, host: &str, entry: RobotsEntry, ttl_ms: u64) -> CoreResult<()> {
        self.inner.robots_put(host, entry, ttl_ms).await
    }

    async fn incr(&self, counter: &str, by: i64) -> CoreResult<i64> {
        self.inner.incr(counter, by).await
    }

    async fn counters(&self) -> CoreResult<BTreeMap<String, i64>> {
        self.inner.counters().await
    }

    async fn wait_change(&self, max: Duration) {
        self.inner.wait_change(max).await
    }
}

/// The discovered hop: a [`MemoryQueue`] whose batches are in the store from publish to
/// ack, so the links of a written page survive a kill even when the frontier had not
/// admitted them yet.
pub struct JournaledQueue {
    inner: MemoryQueue<(u64, Discovered)>,
    /// Delivery id -> journal id, for deliveries not yet acked.
    ids: Mutex<HashMap<u64, u64>>,
    next: AtomicU64,
    journal: Journal,
}

impl JournaledQueue {
    /// `first_id`: above every id a resumed store still holds.
    pub fn new(inner: MemoryQueue<(u64, Discovered)>, journal: Journal, first_id: u64) -> Self {
        JournaledQueue {
            inner,
            ids: Mutex::new(HashMap::new()),
            next: AtomicU64::new(first_id.max(1)),
            journal,
        }
    }

    /// Puts back a batch the store kept from an earlier run, under its stored id.
    pub async fn republish(&self, id: u64, msg: Discovered) -> CoreResult<()> {
        self.inner.publish((id, msg)).await
    }

    pub fn close(&self) {
        self.inner.close();
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn done(&self, delivery: u64) -> CoreResult<()> {
        if let Some(id) = self.ids().remove(&delivery) {
            self.journal.acked(id)?;
        }
        Ok(())
    }
}

#[async_trait]
impl Queue<Discovered> for JournaledQueue {
    async fn publish(&self, msg: Discovered) -> CoreResult<()> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.journal.published(id, &msg)?;
        self.inner.publish((id, msg)).await
    }

    async fn pull(&self, max: usize, wait: Duration) -> CoreResult<Vec<Delivery<Discovered>>> {
        let got = self.inner.pull(max, wait).await?;
        let mut ids = self.ids();
        Ok(got
            .into_iter()
            .map(|d| {
                let (id, msg) = d.msg;
                ids.insert(d.id, id);
                Delivery {
                    id: d.id,
                    attempt: d.attempt,
                    msg,
                }
            })
            .collect())
    }

    async fn ack(&self, id: u64) -> CoreResult<()> {
        self.inner.ack(id).await?;
        self.done(id)
    }

    async fn nak(&self, id: u64, delay: Duration) -> CoreResult<()> {
        self.inner.nak(id, delay).await
    }

    async fn term(&self, id: u64) -> CoreResult<()> {
        self.inner.term(id).await?;
        self.done(id)
    }

    async fn len(&self) -> CoreResult<usize> {
        self.inner.len().await
    }
}

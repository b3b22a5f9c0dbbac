//! The queue interface every hop uses, shaped after JetStream work queues with pull
//! consumers: publish, pull a batch, then ack, nak with a delay, or terminate each delivery.
//!
//! The in-memory implementation bounds ready + unacknowledged messages, and optionally
//! their bytes, so a fast producer waits for a slow consumer (back-pressure) instead of
//! growing memory.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, Semaphore};

use crate::clock::now_ms;
use crate::state::WorkTracker;
use crate::{CoreError, CoreResult};

/// One message handed to a consumer; it stays owned by the queue until acked or terminated.
#[derive(Debug, Clone)]
pub struct Delivery<M> {
    pub id: u64,
    /// 1 on the first delivery, incremented on every redelivery.
    pub attempt: u32,
    pub msg: M,
}

#[async_trait]
pub trait Queue<M: Send + 'static>: Send + Sync {
    /// Adds a message; waits while the queue is full.
    async fn publish(&self, msg: M) -> CoreResult<()>;
    /// Returns up to `max` messages, waiting at most `wait` for the first one.
    async fn pull(&self, max: usize, wait: Duration) -> CoreResult<Vec<Delivery<M>>>;
    /// The message is done; it will not be delivered again.
    async fn ack(&self, id: u64) -> CoreResult<()>;
    /// The message failed; deliver it again after `delay`.
    async fn nak(&self, id: u64, delay: Duration) -> CoreResult<()>;
    /// The message can never succeed (poison); drop it without redelivery.
    async fn term(&self, id: u64) -> CoreResult<()>;
    /// `term` with the reason the dead letter keeps (the backends without dead letters
    /// just drop the message).
    async fn term_with(&self, id: u64, _reason: &str) -> CoreResult<()> {
        self.term(id).await
    }
    /// `publish` of a message known by `key`: a backend with a duplicate window (JetStream's
    /// `Nats-Msg-Id`) stores a message published again under the same key within it once,
    /// so a producer that repeats its last steps after a crash does not double them.
    async fn publish_keyed(&self, msg: M, _key: &str) -> CoreResult<()> {
        self.publish(msg).await
    }
    /// Ready plus unacknowledged messages.
    async fn len(&self) -> CoreResult<usize>;
    /// The delivery is still being worked on: not redelivered to another consumer yet.
    async fn progress(&self, _id: u64) -> CoreResult<()> {
        Ok(())
    }
    /// How often a long task says [`Queue::progress`]; `None` where deliveries never time
    /// out (the in-memory queue).
    fn progress_every(&self) -> Option<Duration> {
        None
    }
    async fn is_empty(&self) -> CoreResult<bool> {
        Ok(self.len().await? == 0)
    }
}

/// `work` with the deliveries `ids` kept alive meanwhile ([`Queue::progress`] every
/// [`Queue::progress_every`]), for work that may outlast the backend's ack wait: a
/// download, a batch slowed by a loaded machine. Without it the backend hands the messages
/// to another consumer while they are still being worked on, and they are done twice.
pub async fn keep_alive<M: Send + 'static, T>(
    q: &dyn Queue<M>,
    ids: &[u64],
    work: impl std::future::Future<Output = T>,
) -> T {
    let Some(every) = q.progress_every() else {
        return work.await;
    };
    tokio::pin!(work);
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            r = &mut work => return r,
            _ = tick.tick() => {
                // A keep-alive that fails only risks the redelivery it was for.
                for &id in ids {
                    let _ = q.progress(id).await;
                }
            }
        }
    }
}

struct Slot<M> {
    msg: M,
    attempt: u32,
    /// KiB of the byte budget this message holds until it is acked or terminated.
    kib: u32,
}

/// A queue's byte budget: a message's weight (its body, say) in KiB permits, taken when
/// it is published and given back when it is done. One message heavier than the whole
/// budget takes all of it, so it waits for an empty queue instead of forever.
struct ByteBudget<M> {
    permits: Arc<Semaphore>,
    max_kib: u32,
    weigh: fn(&M) -> usize,
}

struct Inner<M> {
    ready: VecDeque<(u64, Slot<M>)>,
    /// Naked messages by the time they become ready again.
    delayed: BTreeMap<(u64, u64), Slot<M>>,
    unacked: HashMap<u64, Slot<M>>,
    next_id: u64,
    closed: bool,
}

/// A bounded in-process work queue.
pub struct MemoryQueue<M> {
    inner: Mutex<Inner<M>>,
    notify: Notify,
    capacity: Arc<Semaphore>,
    bytes: Option<ByteBudget<M>>,
    tracker: WorkTracker,
}

impl<M> MemoryQueue<M> {
    /// At most `capacity` messages, and at most `budget_bytes` of them as `weigh` counts.
    pub fn with_byte_budget(
        capacity: usize,
        budget_bytes: usize,
        weigh: fn(&M) -> usize,
        tracker: WorkTracker,
    ) -> Self {
        let max_kib =
            (budget_bytes / 1024).clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize)) as u32;
        Self {
            bytes: Some(ByteBudget {
                permits: Arc::new(Semaphore::new(max_kib as usize)),
                max_kib,
                weigh,
            }),
            ..Self::new(capacity, tracker)
        }
    }

    pub fn new(capacity: usize, tracker: WorkTracker) -> Self {
        Self {
            inner: Mutex::new(Inner {
                ready: VecDeque::new(),
                delayed: BTreeMap::new(),
                unacked: HashMap::new(),
                next_id: 1,
                closed: false,
            }),
            notify: Notify::new(),
            capacity: Arc::new(Semaphore::new(capacity.max(1))),
            bytes: None,
            tracker,
        }
    }

    /// Wakes every waiting consumer; later pulls return empty and publishes fail.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
        self.capacity.close();
        if let Some(b) = &self.bytes {
            b.permits.close();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<M>> {
        // A panic while holding the lock cannot leave the queue half-updated: every
        // critical section is a few collection operations. Keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finish(&self, id: u64) -> CoreResult<()> {
        let removed = self.lock().unacked.remove(&id);
        match removed {
            Some(slot) => {
                if let Some(b) = &self.bytes {
                    b.permits.add_permits(slot.kib as usize);
                }
                self.capacity.add_permits(1);
                self.tracker.done(1);
                Ok(())
            }
            None => Err(CoreError::UnknownDelivery(id)),
        }
    }
}

impl<M> Inner<M> {
    fn promote_delayed(&mut self, now: u64) -> Option<u64> {
        while let Some(entry) = self.delayed.first_entry() {
            let (at, id) = *entry.key();
            if at > now {
                return Some(at);
            }
            let slot = entry.remove();
            self.ready.push_back((id, slot));
        }
        None
    }
}

#[async_trait]
impl<M: Clone + Send + 'static> Queue<M> for MemoryQueue<M> {
    async fn publish(&self, msg: M) -> CoreResult<()> {
        let permit = self
            .capacity
            .acquire()
            .await
            .map_err(|_| CoreError::Closed)?;
        let mut kib = 0;
        if let Some(b) = &self.bytes {
            kib = ((b.weigh)(&msg).div_ceil(1024)).min(b.max_kib as usize) as u32;
            // Both permits are forgotten only once both are held: a publish cancelled
            // while it waits for bytes gives its slot back.
            let bytes = b
                .permits
                .acquire_many(kib)
                .await
                .map_err(|_| CoreError::Closed)?;
            bytes.forget();
        }
        permit.forget();
        {
            let mut inner = self.lock();
            if inner.closed {
                return Err(CoreError::Closed);
            }
            let id = inner.next_id;
            inner.next_id += 1;
            inner.ready.push_back((
                id,
                Slot {
                    msg,
                    attempt: 0,
                    kib,
                },
            ));
        }
        self.tracker.add(1);
        self.notify.notify_one();
        Ok(())
    }

    async fn pull(&self, max: usize, wait: Duration) -> CoreResult<Vec<Delivery<M>>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.notify.notified();
            let next_delayed = {
                let mut inner = self.lock();
                if inner.closed {
                    return Ok(Vec::new());
                }
                let next = inner.promote_delayed(now_ms());
                let mut out = Vec::new();
                while out.len() < max {
                    let Some((id, mut slot)) = inner.ready.pop_front() else {
                        break;
                    };
                    slot.attempt += 1;
                    out.push(Delivery {
                        id,
                        attempt: slot.attempt,
                        msg: slot.msg.clone(),
                    });
                    inner.unacked.insert(id, slot);
                }
                if !out.is_empty() {
                    if !inner.ready.is_empty() {
                        // Pass the wake-up on: more is ready for another consumer.
                        self.notify.notify_one();
                    }
                    return Ok(out);
                }
                next
            };
            let mut until = deadline;
            if let Some(at) = next_delayed {
                let in_ms = at.saturating_sub(now_ms());
                until = until.min(tokio::time::Instant::now() + Duration::from_millis(in_ms));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Vec::new());
            }
            let _ = tokio::time::timeout_at(until, notified).await;
        }
    }

    async fn ack(&self, id: u64) -> CoreResult<()> {
        self.finish(id)
    }

    async fn nak(&self, id: u64, delay: Duration) -> CoreResult<()> {
        {
            let mut inner = self.lock();
            let slot = inner
                .unacked
                .remove(&id)
                .ok_or(CoreError::UnknownDelivery(id))?;
            if delay.is_zero() {
                inner.ready.push_back((id, slot));
            } else {
                let at = now_ms() + delay.as_millis() as u64;
                inner.delayed.insert((at, id), slot);
            }
        }
        self.notify.notify_one();
        Ok(())
    }

    async fn term(&self, id: u64) -> CoreResult<()> {
        self.finish(id)
    }

    async fn len(&self) -> CoreResult<usize> {
        let inner = self.lock();
        Ok(inner.ready.len() + inner.delayed.len() + inner.unacked.len())
    }
}

/// A hop this process does not use: every call fails. A service connects only the hops
/// of its stage ([`crate::pipeline::Stage::hops`]), and a stage that reached for another
/// would be a wiring mistake.
pub struct Unconnected(pub crate::pipeline::Hop);

impl Unconnected {
    fn refuse<T>(&self) -> CoreResult<T> {
        Err(CoreError::Backend(format!(
            "the {} hop is not connected in this process",
            self.0
        )))
    }
}

#[async_trait]
impl<M: Send + 'static> Queue<M> for Unconnected {
    async fn publish(&self, _msg: M) -> CoreResult<()> {
        self.refuse()
    }
    async fn pull(&self, _max: usize, _wait: Duration) -> CoreResult<Vec<Delivery<M>>> {
        self.refuse()
    }
    async fn ack(&self, _id: u64) -> CoreResult<()> {
        self.refuse()
    }
    async fn nak(&self, _id: u64, _delay: Duration) -> CoreResult<()> {
        self.refuse()
    }
    async fn term(&self, _id: u64) -> CoreResult<()> {
        self.refuse()
    }
    async fn len(&self) -> CoreResult<usize> {
        self.refuse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn delivers_acks_and_redelivers_after_nak() {
        let tracker = WorkTracker::default();
        let q = MemoryQueue::new(10, tracker.clone());
        q.publish(1u32).await.unwrap();
        q.publish(2u32).await.unwrap();
        assert_eq!(tracker.outstanding(), 2);
        let got = q.pull(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(got.iter().map(|d| d.msg).collect::<Vec<_>>(), vec![1, 2]);
        q.ack(got[0].id).await.unwrap();
        q.nak(got[1].id, Duration::from_millis(50)).await.unwrap();
        assert!(
            q.pull(10, Duration::from_millis(5))
                .await
                .unwrap()
                .is_empty()
        );
        let again = q.pull(10, Duration::from_millis(500)).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].attempt, 2);
        q.term(again[0].id).await.unwrap();
        assert_eq!(tracker.outstanding(), 0);
        assert!(q.ack(again[0].id).await.is_err());
    }

    #[tokio::test]
    async fn publish_waits_while_full() {
        let q = Arc::new(MemoryQueue::new(2, WorkTracker::default()));
        q.publish(1u8).await.unwrap();
        q.publish(2u8).await.unwrap();
        let q2 = q.clone();
        let blocked = tokio::spawn(async move { q2.publish(3u8).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!blocked.is_finished(), "third publish must wait for room");
        let got = q.pull(1, Duration::from_millis(10)).await.unwrap();
        // Pulled but unacked still counts against capacity.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!blocked.is_finished());
        q.ack(got[0].id).await.unwrap();
        tokio::time::timeout(Duration::from_secs(1), blocked)
            .await
            .expect("publish resumes after an ack")
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn publish_waits_while_the_bytes_are_spent() {
        // Room for 100 messages, but only 3 MiB of them.
        let q = Arc::new(MemoryQueue::with_byte_budget(
            100,
            3 << 20,
            Vec::len,
            WorkTracker::default(),
        ));
        q.publish(vec![0u8; 1 << 20]).await.unwrap();
        q.publish(vec![0u8; 2 << 20]).await.unwrap();
        let q2 = q.clone();
        let blocked = tokio::spawn(async move { q2.publish(vec![0u8; 1 << 20]).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!blocked.is_finished(), "a fourth MiB must wait");
        let got = q.pull(1, Duration::from_millis(10)).await.unwrap();
        q.nak(got[0].id, Duration::ZERO).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!blocked.is_finished(), "a nak keeps its bytes");
        let got = q.pull(1, Duration::from_millis(10)).await.unwrap();
        q.ack(got[0].id).await.unwrap();
        tokio::time::timeout(Duration::from_secs(1), blocked)
            .await
            .expect("publish resumes once the bytes are back")
            .unwrap()
            .unwrap();
        // A message heavier than the whole budget waits for an empty queue, not forever.
        let q = MemoryQueue::with_byte_budget(10, 1 << 20, Vec::len, WorkTracker::default());
        tokio::time::timeout(Duration::from_secs(1), q.publish(vec![0u8; 5 << 20]))
            .await
            .expect("an oversized message gets in alone")
            .unwrap();
    }
}

//! The fetch loop shared by both runtimes: pull a job, fetch, hand the result on, release
//! the host. Order matters for at-least-once delivery: results are published before the host
//! is released and the job acknowledged, so a crash in between only repeats work.

use std::sync::Arc;
use std::time::Duration;

use trawl_core::clock::now_ms;
use trawl_core::counters::Counter;
use trawl_core::pipeline::{Hops, Shutdown, Workers};
use trawl_core::queue::Queue;
use trawl_core::state::Enqueued;
use trawl_core::{CoreError, Discovered, FetchJob, Fetched, MESSAGE_VERSION};

use crate::{FetchError, Fetcher, Outcome};

/// `n` fetch workers over the hops.
pub fn spawn(
    workers: &mut Workers,
    n: usize,
    fetcher: &Arc<Fetcher>,
    hops: &Hops,
    stop: &Shutdown,
) {
    workers.spawn_n(n, || {
        run_worker(
            fetcher.clone(),
            hops.fetch.clone(),
            hops.fetched.clone(),
            hops.discovered.clone(),
            stop.clone(),
        )
    });
}

pub async fn run_worker(
    fetcher: Arc<Fetcher>,
    jobs: Arc<dyn Queue<FetchJob>>,
    fetched: Arc<dyn Queue<Fetched>>,
    discovered: Arc<dyn Queue<Discovered>>,
    stop: impl Into<Shutdown>,
) -> Result<(), FetchError> {
    let mut stop = stop.into();
    let state = fetcher.state().clone();
    loop {
        let Some(batch) = stop
            .run_until(jobs.pull(1, Duration::from_millis(200)))
            .await
        else {
            return Ok(());
        };
        for d in batch? {
            if still_held(&fetcher, &*fetched, &d.msg).await? {
                let delivery = Some((&*jobs, d.id));
                handle(&fetcher, &*fetched, &*discovered, d.msg, delivery).await?;
            }
            jobs.ack(d.id).await?;
            // Fast path: a host that is ready now is claimed here directly instead of waiting
            // for the dispatcher and a queue hop. The claim enforces politeness the same way;
            // with one request in flight per host this hand-off is the crawl's critical path.
            while !stop.is_shutdown() {
                let Some(claim) = state.claim(now_ms()).await? else {
                    break;
                };
                handle(&fetcher, &*fetched, &*discovered, claim.job, None).await?;
            }
        }
    }
}

/// Whether the job's named claim is still held (renewed for another TTL). A job that
/// waited in the fetch stream past its claim's TTL was put back in its host's queue when
/// the claim expired; that copy is fetched under a new claim, so this one is dropped.
async fn still_held(
    fetcher: &Fetcher,
    fetched: &dyn Queue<Fetched>,
    job: &FetchJob,
) -> Result<bool, FetchError> {
    let state = fetcher.state();
    let Some(id) = job.claim.as_deref() else {
        if state.renew_every().is_none() {
            return Ok(true);
        }
        // Claims are named here, and this job holds none (a dead letter replayed onto the
        // hop): into its host's queue, to be claimed, and spaced, like any other.
        requeue(fetcher, fetched, job.clone(), 0).await?;
        return Ok(false);
    };
    if state.hold(&job.host, id, now_ms()).await? {
        return Ok(true);
    }
    tracing::warn!(url = %job.url, "claim expired while the job waited: fetched under its new claim");
    state.count(&Counter::ClaimsExpired, 1).await?;
    Ok(false)
}

/// Where a job came from on the fetch hop, to say it is still being worked on.
type FromHop<'a> = Option<(&'a dyn Queue<FetchJob>, u64)>;

/// Runs `work` while renewing the job's named claim and its delivery, so that a long
/// fetch (Crawl-delay waits between robots.txt, redirect hops and the page, a slow server)
/// outlives neither: the claim's expiry would queue the job again, the delivery's would
/// hand it to another fetcher, and either would fetch it twice at once.
async fn renewing<T>(
    state: &Arc<dyn trawl_core::state::State>,
    job: &FetchJob,
    from: FromHop<'_>,
    work: impl std::future::Future<Output = T>,
) -> T {
    let claim = job.claim.as_deref().zip(state.renew_every());
    let delivery = from.and_then(|(q, id)| q.progress_every().map(|every| (q, id, every)));
    let every = match (claim.map(|c| c.1), delivery.map(|d| d.2)) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return work.await,
    };
    tokio::pin!(work);
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tick.tick() => {
                if let Some((id, _)) = claim {
                    match state.hold(&job.host, id, now_ms()).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(url = %job.url, "claim lost during the fetch"),
                        Err(e) => tracing::warn!(url = %job.url, "claim not renewed: {e}"),
                    }
                }
                if let Some((q, id, _)) = delivery
                    && let Err(e) = q.progress(id).await
                {
                    tracing::warn!(url = %job.url, "delivery not renewed: {e}");
                }
            }
        }
    }
}

/// Fetches one claimed job, hands its results on, re-queues it on 429/503 and releases the
/// host. Outputs are published before the release so a crash repeats work, never loses it.
async fn handle(
    fetcher: &Fetcher,
    fetched: &dyn Queue<Fetched>,
    discovered: &dyn Queue<Discovered>,
    job: FetchJob,
    from: FromHop<'_>,
) -> Result<(), FetchError> {
    let state = fetcher.state();
    let out = renewing(state, &job, from, fetcher.fetch(&job)).await?;
    // Nothing is handed on unarchived: the job stays unacked (redelivered after a restart,
    // fetched again on a resume) and the stage stops naming the cause.
    if let Some(e) = fetcher.warc_failure() {
        return Err(FetchError::Warc(e));
    }
    if !out.discovered.is_empty() {
        publish(
            discovered,
            Discovered {
                v: MESSAGE_VERSION,
                crawl: job.crawl.clone(),
                source: Some(job.url.clone()),
                urls: out.discovered,
            },
        )
        .await?;
    }
    match out.outcome {
        Outcome::Done(f) => publish(fetched, *f).await?,
        Outcome::Retry { after, status } => {
            tracing::debug!(url = %job.url, status, ?after, "backing off host");
            let mut again = job.clone();
            again.retries += 1;
            requeue(fetcher, fetched, again, status).await?;
        }
        Outcome::Wait { after, since } => {
            tracing::debug!(url = %job.url, ?after, "robots.txt unreachable: the page waits");
            let mut again = job.clone();
            again.robots_wait_since_ms = Some(since);
            requeue(fetcher, fetched, again, 0).await?;
        }
    }
    let now = trawl_core::clock::now_ms();
    if out.next_allowed_ms > now {
        state
            .count(
                &trawl_core::counters::Counter::PolitenessWaitMs,
                (out.next_allowed_ms - now) as i64,
            )
            .await?;
    }
    state
        .release(&job.host, job.claim.as_deref(), out.next_allowed_ms)
        .await?;
    Ok(())
}

/// Puts a job back in its host's queue; one the full frontier turns away becomes a failed
/// record (`retry_rejected`, counted) instead of vanishing. A queued URL the job's return
/// evicted is counted like the frontier's own evictions.
async fn requeue(
    fetcher: &Fetcher,
    fetched: &dyn Queue<Fetched>,
    job: FetchJob,
    status: u16,
) -> Result<(), FetchError> {
    let state = fetcher.state();
    match state.enqueue(job.clone()).await? {
        Enqueued::Accepted => {}
        Enqueued::AcceptedEvicting(n) => {
            state.count(&Counter::FrontierEvicted, n as i64).await?;
        }
        Enqueued::Rejected => {
            state.count(&Counter::RetriesRejected, 1).await?;
            publish(fetched, crate::rejected_retry(&job, status)).await?;
        }
    }
    Ok(())
}

async fn publish<M: Send + 'static>(q: &dyn Queue<M>, m: M) -> Result<(), CoreError> {
    q.publish(m).await
}

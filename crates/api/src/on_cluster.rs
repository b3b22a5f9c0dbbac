//! `trawl serve --cluster`: crawl and batch jobs run on the cluster's services instead of
//! in the server. The services serve one crawl id (`TRAWL_CRAWL`), so jobs take it in
//! turn: once it has drained, the server clears it (state, seen-set, kept pages), stores
//! the job's spec, waits until every live replica runs that spec (`spec_watch`), publishes
//! the seeds, waits for the drain again and copies the kept records (`RedisHistory`) into
//! the job's `pages.jsonl`, which status pages read as they read an embedded job's. A
//! marker names the job the cluster runs, so a restarted server waits for that one
//! instead of submitting it again.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{Semaphore, watch};
use trawl_cluster::redis_history::RedisHistory;
use trawl_cluster::redis_state::RedisState;
use trawl_cluster::service;
use trawl_core::pipeline::Shutdown;
use trawl_core::queue::Queue;
use trawl_core::settings::ClusterSettings;
use trawl_core::spec::CrawlSpec;
use trawl_core::{Discovered, PageRecord};

use trawl_runtime::{CrawlPlan, LiveCounts};

/// The longest wait for every replica to run a new spec (an indexer finishing its index
/// before it restarts takes a while).
const SPEC_WAIT: Duration = Duration::from_secs(180);
/// Status polls in a row that must find the crawl drained.
const DRAINED_POLLS: u32 = 3;

/// How a job on the cluster ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    Completed,
    /// Cancelled: what was written by then is the result.
    Cancelled,
    /// The server stops; the job goes on on the cluster and is waited for at the next start.
    Stopped,
}

pub struct Cluster {
    pub settings: ClusterSettings,
    /// The crawl id the services run.
    pub crawl: String,
    turn: Semaphore,
}

impl Cluster {
    pub fn new(settings: ClusterSettings, crawl: String) -> Arc<Self> {
        Arc::new(Self {
            settings,
            crawl,
            turn: Semaphore::new(1),
        })
    }

    async fn running_job(&self) -> anyhow::Result<Option<String>> {
        retry(|| async {
            trawl_cluster::spec::submitter(&self.settings.redis_url, &self.crawl)
                .await
                .map_err(anyhow::Error::msg)
        })
        .await
    }

    /// Runs job `id` (its crawl planned as `opts`) to its end; `stop` is the job's stop
    /// (a cancel, or the server's stop: `server_stopping` tells them apart).
    /// `unfinished` says whether a job is still to be ended: a restarted server lets the
    /// job the cluster runs finish before it submits another.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        id: &str,
        opts: &CrawlPlan,
        out: &Path,
        live: &watch::Sender<LiveCounts>,
        mut stop: Shutdown,
        server_stopping: impl Fn() -> bool,
        unfinished: impl Fn(&str) -> bool,
    ) -> anyhow::Result<Ended> {
        let ended = |server_stopping: &dyn Fn() -> bool| {
            if server_stopping() {
                Ended::Stopped
            } else {
                Ended::Cancelled
            }
        };
        let turn = loop {
            let turn = tokio::select! {
                t = self.turn.acquire() => t?,
                _ = stop.recv() => return Ok(ended(&server_stopping)),
            };
            match self.running_job().await? {
                Some(other) if other != id && unfinished(&other) => {
                    // Another job of ours is on the cluster (a restart): it goes first.
                    drop(turn);
                    if stop
                        .run_until(tokio::time::sleep(Duration::from_secs(1)))
                        .await
                        .is_none()
                    {
                        return Ok(ended(&server_stopping));
                    }
                }
                running => break (turn, running),
            }
        };
        let (_turn, running) = turn;
        if running.as_deref() != Some(id) {
            if !self.wait_drained(&mut stop, None).await? {
                return Ok(ended(&server_stopping));
            }
            if !self.submit(id, opts, &mut stop).await? {
                return Ok(ended(&server_stopping));
            }
        }
        let drained = self.wait_drained(&mut stop, Some(live)).await?;
        if !drained && server_stopping() {
            return Ok(Ended::Stopped);
        }
        if drained {
            retry(|| self.copy_records(out)).await?;
            return Ok(Ended::Completed);
        }
        // Cancelled: nothing more is admitted (a spec that admits nothing), what was
        // queued drains, and what was written is the result.
        self.stop_admitting(opts).await?;
        let mut never = trawl_core::pipeline::shutdown().1;
        let _ = self.wait_drained(&mut never, None).await?;
        retry(|| self.copy_records(out)).await?;
        Ok(Ended::Cancelled)
    }

    async fn stop_admitting(&self, opts: &CrawlPlan) -> anyhow::Result<()> {
        let mut settings = opts.crawl.clone();
        settings.history = true;
        // No start URL: every URL is out of scope (the host scope of no seed).
        settings.scope = trawl_core::scope::ScopeKind::Host;
        let spec = CrawlSpec {
            crawl: self.crawl.clone(),
            start: Vec::new(),
            settings,
            index: opts.index.settings.index.clone(),
            since: None,
            due_only: false,
            state_shards: self.settings.state_nodes().len() as u32,
        };
        trawl_cluster::spec::put(&self.settings.redis_url, &spec, true)
            .await
            .map_err(anyhow::Error::msg)?;
        trawl_cluster::spec_watch::wait_taken(
            &self.settings.redis_url,
            &self.crawl,
            &spec,
            SPEC_WAIT,
        )
        .await
        .map_err(anyhow::Error::msg)
    }

    async fn clear(&self) -> anyhow::Result<()> {
        let state = RedisState::connect_sharded(&self.settings.state_nodes(), &self.crawl, 1, 1, 1)
            .await
            .context("connecting to Redis")?;
        state.clear().await?;
        Ok(())
    }

    /// The job's spec stored, every replica running it, its seeds published; `false`
    /// when `stop` came first (nothing published).
    async fn submit(
        &self,
        id: &str,
        opts: &CrawlPlan,
        stop: &mut Shutdown,
    ) -> anyhow::Result<bool> {
        let (_, start) = opts.targets.resolve(&opts.crawl.normalizer())?;
        let mut settings = opts.crawl.clone();
        // The results are read back from the records the indexers keep.
        settings.history = true;
        let spec = CrawlSpec {
            crawl: self.crawl.clone(),
            start: start.iter().map(|(u, k)| (u.to_string(), *k)).collect(),
            settings,
            index: opts.index.settings.index.clone(),
            since: None,
            due_only: false,
            state_shards: self.settings.state_nodes().len() as u32,
        };
        // The last job's state, seen-set and pages go: this job crawls from nothing.
        self.clear().await?;
        trawl_cluster::spec::put(&self.settings.redis_url, &spec, true)
            .await
            .map_err(anyhow::Error::msg)?;
        let taken = stop
            .run_until(trawl_cluster::spec_watch::wait_taken(
                &self.settings.redis_url,
                &self.crawl,
                &spec,
                SPEC_WAIT,
            ))
            .await;
        match taken {
            None => return Ok(false),
            Some(r) => r.map_err(|e| {
                anyhow::anyhow!("{e}: are they running with TRAWL_CRAWL={}?", self.crawl)
            })?,
        }
        let client = service::nats(&self.settings)
            .await
            .map_err(anyhow::Error::msg)?;
        let discovered: Arc<trawl_cluster::jetstream::JetStreamQueue<Discovered>> = service::queue(
            &client,
            &self.settings,
            trawl_core::pipeline::Hop::Discovered,
        )
        .await
        .map_err(anyhow::Error::msg)?;
        discovered.publish(spec.seeds_message()).await?;
        // Named only once its seeds are out: a server stopped before then submits it again.
        trawl_cluster::spec::set_submitter(&self.settings.redis_url, &self.crawl, id)
            .await
            .map_err(anyhow::Error::msg)?;
        tracing::info!(job = id, crawl = %self.crawl, "job submitted to the cluster");
        Ok(true)
    }

    /// Waits for the crawl to drain: `false` when `stop` came first. With `live`, the
    /// crawl's counts are sent on as it goes.
    async fn wait_drained(
        &self,
        stop: &mut Shutdown,
        live: Option<&watch::Sender<LiveCounts>>,
    ) -> anyhow::Result<bool> {
        let mut quiet = 0;
        loop {
            match trawl_cluster::status::status(&self.settings, &self.crawl).await {
                Ok(s) => {
                    if let Some(l) = live {
                        l.send_replace(LiveCounts {
                            pages: s.pages_indexed,
                            queued: s.queued_urls
                                + s.pending
                                    .iter()
                                    .filter(|(h, _)| {
                                        trawl_core::pipeline::Hop::from_name(h)
                                            .is_some_and(trawl_core::pipeline::Hop::is_crawl_hop)
                                    })
                                    .map(|(_, n)| *n as usize)
                                    .sum::<usize>(),
                        });
                    }
                    quiet = if s.drained { quiet + 1 } else { 0 };
                    if quiet >= DRAINED_POLLS {
                        return Ok(true);
                    }
                }
                // NATS or Redis briefly away: keep waiting, from the start.
                Err(e) => {
                    quiet = 0;
                    tracing::warn!("cluster status: {e:#}");
                }
            }
            if stop
                .run_until(tokio::time::sleep(Duration::from_millis(500)))
                .await
                .is_none()
            {
                return Ok(false);
            }
        }
    }

    /// The records the crawl's indexers kept, each once, as the job's `pages.jsonl`.
    async fn copy_records(&self, out: &Path) -> anyhow::Result<()> {
        let history = RedisHistory::connect(&self.settings.redis_url, &self.crawl).await?;
        std::fs::create_dir_all(out)?;
        let tmp = out.join("pages.jsonl.part");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        let mut seen = HashSet::new();
        let mut cursor = 0;
        loop {
            let (next, records) = history.scan_records(cursor).await?;
            for r in records {
                if seen.insert(r.url.clone()) {
                    write_line(&mut f, &r)?;
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        f.flush()?;
        drop(f);
        std::fs::rename(&tmp, out.join("pages.jsonl"))?;
        Ok(())
    }
}

fn write_line(f: &mut impl Write, r: &PageRecord) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *f, r)?;
    f.write_all(b"\n")?;
    Ok(())
}

/// A call to the backends, tried 3 times over a few seconds (a blip must not lose a job).
async fn retry<T, F, Fut>(f: F) -> anyhow::Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut last = None;
    for pause in [0u64, 1, 4] {
        tokio::time::sleep(Duration::from_secs(pause)).await;
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
}

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
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::sync::{Semaphore, watch};
use trawl_cluster::redis_history::RedisHistory;
use trawl_cluster::redis_state::RedisState;
use trawl_cluster::{service, spec_watch};
use trawl_core::pipeline::Shutdown;
use trawl_core::queue::Queue;
use trawl_core::settings::ClusterSettings;
use trawl_core::spec::CrawlSpec;
use trawl_core::{Discovered, PageRecord};

use crate::options::{CrawlOptions, LiveCounts};

/// The longest wait for every replica to run a new spec.
const SPEC_WAIT: Duration = Duration::from_secs(60);
/// Status polls in a row that must find the crawl drained.
const DRAINED_POLLS: u32 = 3;
/// The stages a crawl cannot do without.
const STAGES: [&str; 4] = ["frontier", "fetcher", "extractor", "indexer"];

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
        trawl_cluster::spec::submitter(&self.settings.redis_url, &self.crawl)
            .await
            .map_err(anyhow::Error::msg)
    }

    /// Runs job `id` (its crawl planned as `opts`) to its end; `stop` is the job's stop
    /// (a cancel, or the server's stop: `server_stopping` tells them apart).
    pub async fn run(
        &self,
        id: &str,
        opts: &CrawlOptions,
        out: &Path,
        live: &watch::Sender<LiveCounts>,
        mut stop: Shutdown,
        server_stopping: impl Fn() -> bool,
    ) -> anyhow::Result<Ended> {
        let _turn = tokio::select! {
            t = self.turn.acquire() => t?,
            _ = stop.recv() => return Ok(if server_stopping() { Ended::Stopped } else { Ended::Cancelled }),
        };
        if self.running_job().await?.as_deref() != Some(id) {
            match self.wait_drained(&mut stop, None).await? {
                true => {}
                false if server_stopping() => return Ok(Ended::Stopped),
                false => return Ok(Ended::Cancelled),
            }
            self.submit(id, opts).await?;
        }
        let drained = self.wait_drained(&mut stop, Some(live)).await?;
        if !drained && server_stopping() {
            return Ok(Ended::Stopped);
        }
        self.copy_records(out).await?;
        if drained {
            Ok(Ended::Completed)
        } else {
            // Cancelled: the URLs still queued are dropped with the crawl's state.
            self.clear().await?;
            Ok(Ended::Cancelled)
        }
    }

    async fn clear(&self) -> anyhow::Result<()> {
        let state = RedisState::connect(&self.settings.redis_url, &self.crawl, 1, 1, 1)
            .await
            .context("connecting to Redis")?;
        state.clear().await?;
        Ok(())
    }

    /// The job's spec stored, every replica running it, its seeds published.
    async fn submit(&self, id: &str, opts: &CrawlOptions) -> anyhow::Result<()> {
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
        };
        // The last job's state, seen-set and pages go: this job crawls from nothing.
        self.clear().await?;
        trawl_cluster::spec::put(&self.settings.redis_url, &spec, true)
            .await
            .map_err(anyhow::Error::msg)?;
        self.wait_running(&spec).await?;
        let client = service::nats(&self.settings)
            .await
            .map_err(anyhow::Error::msg)?;
        let discovered: Arc<trawl_cluster::jetstream::JetStreamQueue<Discovered>> =
            service::queue(&client, &self.settings, "discovered")
                .await
                .map_err(anyhow::Error::msg)?;
        discovered.publish(spec.seeds_message()).await?;
        // Named only once its seeds are out: a server stopped before then submits it again.
        trawl_cluster::spec::set_submitter(&self.settings.redis_url, &self.crawl, id)
            .await
            .map_err(anyhow::Error::msg)?;
        tracing::info!(job = id, crawl = %self.crawl, "job submitted to the cluster");
        Ok(())
    }

    /// Until every live replica of the crawl runs `spec`, and each stage has one.
    async fn wait_running(&self, spec: &CrawlSpec) -> anyhow::Result<()> {
        let want = spec_watch::digest(spec);
        let started = Instant::now();
        loop {
            let marks = spec_watch::running(&self.settings.redis_url, &self.crawl)
                .await
                .map_err(anyhow::Error::msg)?;
            let all_new = marks.iter().all(|(_, d)| *d == want);
            let staffed = STAGES.iter().all(|s| {
                marks
                    .iter()
                    .any(|(name, d)| name.starts_with(&format!("{s}:")) && *d == want)
            });
            if all_new && staffed {
                return Ok(());
            }
            if started.elapsed() > SPEC_WAIT {
                let names: Vec<&str> = marks.iter().map(|(n, _)| n.as_str()).collect();
                bail!(
                    "the cluster's services did not take the job's spec in {} s (running: {}); \
                     are the frontier, fetcher, extractor and indexer running with TRAWL_CRAWL={}?",
                    SPEC_WAIT.as_secs(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    },
                    self.crawl
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
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
            match crate::cluster::status(&self.settings, &self.crawl).await {
                Ok(s) => {
                    if let Some(l) = live {
                        l.send_replace(LiveCounts {
                            pages: s.pages_indexed,
                            admitted: s.counters.get("frontier.queued").copied().unwrap_or(0),
                            queued: s.queued_urls
                                + s.pending
                                    .iter()
                                    .filter(|(h, _)| trawl_core::pipeline::is_crawl_hop(h))
                                    .map(|(_, n)| *n as usize)
                                    .sum::<usize>(),
                        });
                    }
                    quiet = if s.drained { quiet + 1 } else { 0 };
                    if quiet >= DRAINED_POLLS {
                        return Ok(true);
                    }
                }
                // NATS or Redis briefly away: keep waiting.
                Err(e) => tracing::warn!("cluster status: {e:#}"),
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

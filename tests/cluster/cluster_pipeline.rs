//! The stage code the embedded runtime runs, run over the cluster's backends instead: four
//! JetStream work queues, the Redis state and the Redis dedup gate, two fetch and two
//! extraction workers, against the test site. The pages written must be the ones an
//! embedded crawl of the same site writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use trawl_core::pipeline::Hop;

use tokio::sync::watch;
use trawl_cluster::jetstream::{JetStreamQueue, QueueConfig};
use trawl_cluster::redis_state::RedisState;
use trawl_core::queue::Queue;
use trawl_core::scope::{Scope, ScopeKind};
use trawl_core::state::State;
use trawl_core::urlnorm::{DEFAULT_TRACKING_PARAMS, Normalizer};
use trawl_core::{Discovered, DiscoveredUrl, Doc, FetchJob, Fetched, MESSAGE_VERSION, UrlKind};
use trawl_testsite::{Robots, SiteConfig, TestSite};

async fn backends() -> Option<async_nats::Client> {
    let nats = async_nats::connect("nats://127.0.0.1:4222").await;
    let redis_ok = redis::Client::open("redis://127.0.0.1:6379")
        .ok()
        .map(|c| c.get_connection().is_ok())
        .unwrap_or(false);
    match (nats, redis_ok) {
        (Ok(c), true) => Some(c),
        (n, r) => {
            let why = format!(
                "nats: {:?}, redis reachable: {r}",
                n.err().map(|e| e.to_string())
            );
            if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("nats-server and redis-server required (TRAWL_REQUIRE_SERVICES=1): {why}");
            }
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

async fn queue<M>(client: &async_nats::Client, prefix: &str, hop: Hop) -> Arc<JetStreamQueue<M>> {
    let mut c = QueueConfig::for_hop(prefix, hop);
    c.ack_wait = Duration::from_secs(30);
    Arc::new(JetStreamQueue::connect(client, c).await.unwrap())
}

/// url -> (status, title, text, duplicate_of) of every page record.
fn read_pages(path: &std::path::Path) -> BTreeMap<String, (u64, String, String, bool)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|p| {
            (
                p["url"].as_str().unwrap().to_string(),
                (
                    p["status"].as_u64().unwrap(),
                    p["title"].as_str().unwrap_or("").to_string(),
                    p["text"].as_str().unwrap_or("").to_string(),
                    p["duplicate_of"].is_string(),
                ),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stages_over_jetstream_and_redis_write_what_the_embedded_crawl_writes() {
    let Some(client) = backends().await else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 12,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let seed = site.url("/page/1");
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let crawl = format!("c{}", &tag[..12]);
    let prefix = format!("t{}", &tag[..12]);

    let normalizer = Normalizer::new(DEFAULT_TRACKING_PARAMS.iter().copied());
    let seed_url = normalizer.parse(&seed, None).unwrap();
    let scope = Scope::new(ScopeKind::Host, std::slice::from_ref(&seed_url));
    let state = Arc::new(
        RedisState::connect("redis://127.0.0.1:6379", &crawl, 100_000, 1, 60_000)
            .await
            .unwrap(),
    );
    let gate = Arc::new(
        trawl_cluster::redis_gate::RedisGate::connect("redis://127.0.0.1:6379", &crawl, 2)
            .await
            .unwrap(),
    );
    let discovered: Arc<JetStreamQueue<Discovered>> =
        queue(&client, &prefix, Hop::Discovered).await;
    let fetch: Arc<JetStreamQueue<FetchJob>> = queue(&client, &prefix, Hop::Fetch).await;
    let fetched: Arc<JetStreamQueue<Fetched>> = queue(&client, &prefix, Hop::Fetched).await;
    let docs: Arc<JetStreamQueue<Doc>> = queue(&client, &prefix, Hop::Docs).await;

    let frontier = Arc::new(trawl_frontier::Frontier::new(
        trawl_frontier::FrontierConfig {
            crawl: crawl.clone(),
            scope: scope.clone(),
            max_depth: 1000,
            max_pages: 0,
            max_pages_per_host: 0,
            traps: trawl_frontier::TrapConfig::default(),
            normalizer: normalizer.clone(),
            robots_agent: "trawl".into(),
            paths: Default::default(),
        },
        state.clone() as Arc<dyn State>,
    ));
    let mut fcfg = trawl_fetcher::FetcherConfig::new(crawl.clone());
    fcfg.allow_private = true;
    fcfg.delay = Duration::from_millis(0);
    let fetcher = Arc::new(
        trawl_fetcher::Fetcher::new(
            fcfg,
            state.clone() as Arc<dyn State>,
            scope,
            normalizer,
            None,
        )
        .unwrap(),
    );
    let out = tempfile::tempdir().unwrap();
    let sink = Arc::new(std::sync::Mutex::new(
        trawl_indexer::JsonlSink::create(&out.path().join("pages.jsonl")).unwrap(),
    ));
    discovered
        .publish(Discovered {
            v: MESSAGE_VERSION,
            crawl: crawl.clone(),
            source: None,
            urls: vec![DiscoveredUrl {
                url: seed_url.to_string(),
                depth: 0,
                kind: UrlKind::Page,
                lastmod: None,
            }],
        })
        .await
        .unwrap();

    let (stop_tx, stop) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    {
        let (f, q, s) = (
            frontier.clone(),
            discovered.clone() as Arc<dyn Queue<Discovered>>,
            stop.clone(),
        );
        tasks.spawn(async move {
            trawl_frontier::run_ingest(f, q, s)
                .await
                .map_err(|e| e.to_string())
        });
        let (st, q, s) = (
            state.clone() as Arc<dyn State>,
            fetch.clone() as Arc<dyn Queue<FetchJob>>,
            stop.clone(),
        );
        tasks.spawn(async move {
            trawl_frontier::dispatch(st, q, s)
                .await
                .map_err(|e| e.to_string())
        });
    }
    for _ in 0..2 {
        let (f, j, o, d, s) = (
            fetcher.clone(),
            fetch.clone() as Arc<dyn Queue<FetchJob>>,
            fetched.clone() as Arc<dyn Queue<Fetched>>,
            discovered.clone() as Arc<dyn Queue<Discovered>>,
            stop.clone(),
        );
        tasks.spawn(async move {
            trawl_fetcher::run_worker(f, j, o, d, s)
                .await
                .map_err(|e| e.to_string())
        });
        let (i, o, d, s) = (
            fetched.clone() as Arc<dyn Queue<Fetched>>,
            docs.clone() as Arc<dyn Queue<Doc>>,
            discovered.clone() as Arc<dyn Queue<Discovered>>,
            stop.clone(),
        );
        let dedup = trawl_extractor::DedupStage {
            gate: Some(gate.clone() as Arc<dyn trawl_dedup::Gate>),
            boilerplate: None,
        };
        tasks.spawn(async move {
            let out = trawl_extractor::Outputs {
                docs: o,
                discovered: d,
                render: Arc::new(trawl_core::queue::Unconnected(Hop::Render)),
                refine: Arc::new(trawl_core::queue::Unconnected(Hop::Refine)),
            };
            trawl_extractor::run_worker(
                i,
                out,
                trawl_extractor::ExtractorConfig {
                    dedup,
                    ..Default::default()
                },
                s,
            )
            .await
            .map_err(|e| e.to_string())
        });
    }
    {
        let (q, k, st, s) = (
            docs.clone() as Arc<dyn Queue<Doc>>,
            sink.clone(),
            state.clone() as Arc<dyn State>,
            stop.clone(),
        );
        tasks.spawn(async move {
            trawl_indexer::run_worker(q, k, st, Default::default(), s)
                .await
                .map_err(|e| e.to_string())
        });
    }

    // Drained: every queue empty, nothing queued in the state and no host slot held, three
    // checks in a row (work is published downstream before it is acked upstream).
    let start = std::time::Instant::now();
    let mut quiet = 0;
    while quiet < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the crawl did not drain"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
        let busy = discovered.len().await.unwrap()
            + fetch.len().await.unwrap()
            + fetched.len().await.unwrap()
            + docs.len().await.unwrap()
            + state.queued().await.unwrap()
            + state.claims().await.unwrap();
        quiet = if busy == 0 { quiet + 1 } else { 0 };
    }
    stop_tx.send(true).unwrap();
    while let Some(r) = tasks.join_next().await {
        r.unwrap().unwrap();
    }
    sink.lock().unwrap().flush().unwrap();

    // The embedded runtime on the same site.
    let emb = tempfile::tempdir().unwrap();
    let mut o = support::options(std::slice::from_ref(&seed), emb.path());
    o.concurrency = 2;
    o.crawl.delay_ms = 0;
    trawl::crawl(o).await.unwrap();
    let cluster = read_pages(&out.path().join("pages.jsonl"));
    let embedded_pages = read_pages(&emb.path().join("pages.jsonl"));
    assert!(cluster.len() >= 12, "{}", cluster.len());
    assert_eq!(cluster, embedded_pages);

    // Clean up this crawl's streams and keys.
    let js = async_nats::jetstream::new(client.clone());
    for q in [
        discovered.config(),
        fetch.config(),
        fetched.config(),
        docs.config(),
    ] {
        let _ = js.delete_stream(&q.stream).await;
        let _ = js.delete_stream(&q.dead_letter_stream).await;
    }
    state.clear().await.unwrap();
    let _ = gate.clear().await;
}

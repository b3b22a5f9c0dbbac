//! The four service binaries as separate processes (one frontier, two fetchers, two
//! extractors, one indexer) over the real nats-server and redis-server: `trawl submit
//! --wait` drains the crawl, the pages the indexer wrote are the ones the embedded crawler
//! writes for the same site, politely across replicas, `/readyz` and `/metrics` answer,
//! SIGTERM stops every service cleanly; killed replicas and a Redis restart lose nothing.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use trawl_core::pipeline::Stage;

use support::services::{NAMES, Services, Stack, free_port, service_bins, spawn, submit_wait};
use support::{cleanup, max_overlap, min_gap_ms, options};
use trawl_testsite::{Robots, SiteConfig, TestSite};

fn pages(path: &std::path::Path) -> BTreeMap<String, (u64, String, String, bool)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(path).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("pages") && name.ends_with(".jsonl")) {
            continue;
        }
        for l in std::fs::read_to_string(&p).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            out.insert(
                v["url"].as_str().unwrap().to_string(),
                (
                    v["status"].as_u64().unwrap(),
                    v["title"].as_str().unwrap_or("").to_string(),
                    v["text"].as_str().unwrap_or("").to_string(),
                    v["duplicate_of"].is_string(),
                ),
            );
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_services_in_six_processes_crawl_what_the_embedded_crawler_crawls() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 15,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let seed = site.url("/page/1");
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (crawl, prefix) = (format!("c{}", &tag[..10]), format!("p{}", &tag[..10]));
    let out = tempfile::tempdir().unwrap();
    let env = |c: &mut Command, port: u16| {
        c.env("TRAWL_CRAWL", &crawl)
            .env("TRAWL_QUEUE_PREFIX", &prefix)
            .env("TRAWL_OUT", out.path())
            .env("TRAWL_CONCURRENCY", "4")
            .env("TRAWL_METRICS_ADDR", format!("127.0.0.1:{port}"))
            .env("TRAWL_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
    };
    let mut services = Services(Vec::new());
    let mut ports = Vec::new();
    for (i, stage) in [1usize, 2, 2, 3, 3, 4].iter().enumerate() {
        let port = free_port();
        ports.push(port);
        let mut c = Command::new(&paths[*stage]);
        env(&mut c, port);
        services
            .0
            .push((format!("{}#{i}", NAMES[*stage]), c.spawn().unwrap()));
    }
    // Before the crawl is submitted the services are alive but not ready.
    let http = reqwest::Client::new();
    let mut alive = false;
    for _ in 0..50 {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{}/healthz", ports[0]))
            .send()
            .await
        {
            alive = r.status().is_success();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(alive, "/healthz");
    let r = http
        .get(format!("http://127.0.0.1:{}/readyz", ports[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    // Yet each counts as a replica of its stage from its start: the extractor must know a
    // renderer is deployed before the first page that needs one comes (this cluster has
    // none, and says so).
    let mut redis = trawl_cluster::redis_conn::connect("redis://127.0.0.1:6379")
        .await
        .unwrap();
    let live = async |redis: &mut redis::aio::ConnectionManager, stage: Stage| {
        trawl_cluster::spec_watch::stage_live(redis, &crawl, stage)
            .await
            .unwrap()
    };
    for stage in [
        Stage::Frontier,
        Stage::Fetcher,
        Stage::Extractor,
        Stage::Indexer,
    ] {
        let mut marked = false;
        for _ in 0..50 {
            marked = live(&mut redis, stage).await;
            if marked {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(marked, "{stage} waiting for the spec is not marked live");
    }
    assert!(!live(&mut redis, Stage::Renderer).await);

    let report = submit_wait(
        &paths[0],
        &[&seed, "--allow-private", "--delay", "100"],
        &[("TRAWL_CRAWL", &crawl), ("TRAWL_QUEUE_PREFIX", &prefix)],
    )
    .await
    .unwrap();
    assert_eq!(report["drained"], true);
    assert_eq!(report["dead_letters"], 0);

    // Politeness across replicas, from the server's log: two fetchers, yet never two
    // requests in flight to the host, and at least the delay between one request's end and
    // the next one's start.
    let log = site.log();
    assert!(log.len() >= 15);
    assert_eq!(max_overlap(&log), 1);
    let gap = min_gap_ms(&log);
    assert!(gap >= 99.0, "smallest gap {gap} ms");

    for port in &ports {
        let r = http
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "port {port}");
    }
    // /metrics serves a snapshot refreshed every 5 s: the drained crawl's counters appear
    // in the next one.
    let mut metrics = String::new();
    for _ in 0..40 {
        metrics = http
            .get(format!("http://127.0.0.1:{}/metrics", ports[5]))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.contains("trawl_crawl_events_total{event=\"pages.total\"}") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        metrics.contains("trawl_queue_pending_messages{hop=\"fetch\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("trawl_crawl_events_total{event=\"pages.total\"}"),
        "{metrics}"
    );

    // SIGTERM: each service drains and exits 0.
    for (_, c) in &services.0 {
        Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for (name, c) in &mut services.0 {
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                assert!(s.success(), "{name} exited with {s}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not stop after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let cluster = pages(out.path());
    let emb = tempfile::tempdir().unwrap();
    let mut o = options(std::slice::from_ref(&seed), emb.path());
    o.crawl.delay_ms = 0;
    trawl::crawl(o).await.unwrap();
    let embedded = pages(emb.path());
    assert!(cluster.len() >= 15, "{}", cluster.len());
    assert_eq!(cluster, embedded);
    // Report counts agree with what was written.
    assert_eq!(
        report["pages_indexed"].as_u64().unwrap() as usize,
        cluster.len()
    );

    cleanup(&prefix, &crawl, Some("redis://127.0.0.1:6379")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_killed_at_random_moments_lose_no_page() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 30,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let seed = site.url("/page/1");
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (crawl, prefix) = (format!("k{}", &tag[..10]), format!("q{}", &tag[..10]));
    let out = tempfile::tempdir().unwrap();
    // Fast redelivery and claim expiry so that the killed replicas' work comes back soon;
    // enough deliveries that kills alone never dead-letter a message.
    let env: Vec<(&str, String)> = vec![
        ("TRAWL_CRAWL", crawl.clone()),
        ("TRAWL_QUEUE_PREFIX", prefix.clone()),
        ("TRAWL_OUT", out.path().display().to_string()),
        ("TRAWL_CONCURRENCY", "2".into()),
        ("TRAWL_ACK_WAIT_S", "1".into()),
        ("TRAWL_CLAIM_TTL_S", "3".into()),
        ("TRAWL_MAX_DELIVER", "20".into()),
        // The indexer also builds the search index (text only: no model needed here).
        (
            "TRAWL_INDEX_URI",
            out.path().join("index").display().to_string(),
        ),
        ("TRAWL_EMBED", "false".into()),
    ];
    let stages = [1usize, 2, 2, 3, 3, 4];
    let mut services = Services(Vec::new());
    for (i, stage) in stages.iter().enumerate() {
        let c = spawn(&paths[*stage], &env, free_port());
        services.0.push((format!("{}#{i}", NAMES[*stage]), c));
    }
    let waiter = submit_wait(
        &paths[0],
        &[&seed, "--allow-private", "--delay", "150"],
        &[("TRAWL_CRAWL", &crawl), ("TRAWL_QUEUE_PREFIX", &prefix)],
    );

    // Ten times, at a random moment, kill -9 a random replica and start it again.
    let mut rng = trawl_core::mutate::Rng::new(0x7a11);
    let mut killed = Vec::new();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(150 + rng.below(350) as u64)).await;
        let i = rng.below(services.0.len());
        let (name, child) = &mut services.0[i];
        child.kill().unwrap();
        child.wait().unwrap();
        killed.push(name.clone());
        *child = spawn(&paths[stages[i]], &env, free_port());
    }
    let report = waiter.await.unwrap();
    assert_eq!(report["drained"], true);
    for (_, c) in &mut services.0 {
        let _ = c.kill();
        let _ = c.wait();
    }

    // Every page the embedded crawler writes is in the cluster's output, with the same
    // content; a page may be written twice (an indexer killed between flush and ack), never
    // lost.
    let cluster = pages(out.path());
    let emb = tempfile::tempdir().unwrap();
    let mut o = options(std::slice::from_ref(&seed), emb.path());
    o.crawl.delay_ms = 0;
    trawl::crawl(o).await.unwrap();
    let embedded = pages(emb.path());
    assert_eq!(report["dead_letters"], 0, "{report}");
    assert_eq!(
        cluster.keys().collect::<Vec<_>>(),
        embedded.keys().collect::<Vec<_>>(),
        "killed: {killed:?}"
    );
    for (url, (status, title, text, _)) in &embedded {
        let c = &cluster[url];
        assert_eq!((&c.0, &c.1, &c.2), (status, title, text), "{url}");
    }
    eprintln!("killed and restarted: {killed:?}");

    // The index holds every indexable page, each chunk once, whatever was killed when.
    let store = trawl_index::Store::open_existing(&out.path().join("index").display().to_string())
        .await
        .unwrap();
    let ids = index_column(&store, "id").await;
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(
        ids.len(),
        unique.len(),
        "a chunk is in the index twice (killed: {killed:?})"
    );
    let mut indexed: Vec<String> = index_column(&store, "canonical_url").await;
    indexed.sort();
    indexed.dedup();
    let want: Vec<&String> = embedded
        .iter()
        .filter(|(_, (status, _, text, dup))| {
            (200..300).contains(status) && !text.is_empty() && !dup
        })
        .map(|(u, _)| u)
        .collect();
    assert_eq!(
        indexed.iter().collect::<Vec<_>>(),
        want,
        "indexed pages (killed: {killed:?})"
    );

    cleanup(&prefix, &crawl, Some("redis://127.0.0.1:6379")).await;
}

async fn index_column(store: &trawl_index::Store, name: &str) -> Vec<String> {
    trawl_index::store::string_column(store.chunks(), name)
        .await
        .unwrap()
}

/// A redis-server of the test's own, with AOF persistence, on a spare loopback port.
fn start_redis(dir: &std::path::Path, port: u16) -> Option<Child> {
    let c = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--dir",
        ])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    support::services::listening(c, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_mid_crawl_is_survived() {
    let Some(paths) = service_bins() else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let Some(mut redis) = start_redis(data.path(), port) else {
        if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
            panic!("cannot start a redis-server of this test's own");
        }
        eprintln!("SKIPPED: cannot start redis-server");
        return;
    };
    let redis_url = format!("redis://127.0.0.1:{port}");
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 25,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let seed = site.url("/page/1");
    let stack = Stack::start(
        &paths,
        &[
            ("TRAWL_REDIS_URL", &redis_url),
            ("TRAWL_ACK_WAIT_S", "1"),
            // A claim whose reply was lost in the outage frees itself (and its job) soon.
            ("TRAWL_CLAIM_TTL_S", "3"),
            ("TRAWL_MAX_DELIVER", "50"),
        ],
    );
    let waiter = stack.submit(&[&seed, "--allow-private", "--delay", "150"]);
    // Mid-crawl: Redis goes down (its AOF on disk), stays down a moment, comes back.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Command::new("kill")
        .args(["-TERM", &redis.id().to_string()])
        .status()
        .unwrap();
    redis.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut redis = start_redis(data.path(), port).expect("redis restarts on its AOF");
    waiter.await.unwrap();
    let cluster = pages(stack.out.path());
    stack.stop().await;
    let emb = tempfile::tempdir().unwrap();
    let mut o = options(std::slice::from_ref(&seed), emb.path());
    o.crawl.delay_ms = 0;
    trawl::crawl(o).await.unwrap();
    let embedded = pages(emb.path());
    assert_eq!(
        cluster.keys().collect::<Vec<_>>(),
        embedded.keys().collect::<Vec<_>>()
    );
    let _ = redis.kill();
    let _ = redis.wait();
}

/// A page that makes the extractor fail every time (fault injection: its body holds the
/// `TRAWL_FAULT_POISON` marker) is retried `max_deliver` times, lands in the extractor's
/// dead-letter stream with its reason, and every other page of the crawl still gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_page_is_dead_lettered_and_blocks_nothing() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 8,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let stack = Stack::start(
        &paths,
        &[
            ("TRAWL_MAX_DELIVER", "3"),
            ("TRAWL_ACK_WAIT_S", "5"),
            // Page 2 of the chain is the poison; the crawl's other seeds go on around it.
            ("TRAWL_FAULT_POISON", "page number 2 of the chain"),
        ],
    );
    let (crawl, prefix, out) = (&stack.crawl, &stack.prefix, &stack.out);
    let seeds: Vec<String> = [1, 4]
        .iter()
        .map(|n| site.url(&format!("/page/{n}")))
        .collect();
    let mut args: Vec<&str> = seeds.iter().map(String::as_str).collect();
    args.extend(["--allow-private", "--delay", "0"]);
    let report = stack.submit(&args).await.unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(report["dead_letters"], 1, "{report}");

    // Page 2 is dead-lettered (its links were never read, so page 3 was not reached),
    // and still has its line, marked; pages 1 and 4 to 8 are written as usual.
    let written = pages(out.path());
    let got: Vec<String> = written
        .keys()
        .filter_map(|u| u.rsplit_once("/page/").map(|(_, n)| n.to_string()))
        .collect();
    assert_eq!(got, ["1", "2", "4", "5", "6", "7", "8"], "{written:?}");
    let lines = support::all_pages(out.path());
    let dead: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["error"]["kind"] == "dead_lettered")
        .collect();
    assert_eq!(dead.len(), 1, "{lines:?}");
    assert!(
        dead[0]["url"].as_str().unwrap().ends_with("/page/2"),
        "{}",
        dead[0]
    );
    let why = dead[0]["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("fetched hop") && why.contains("3 deliveries"),
        "{why}"
    );
    assert_eq!(
        report["pages_indexed"].as_u64().unwrap() as usize,
        lines.len(),
        "the dead-lettered page counted like any other: {report}"
    );
    let dlq = Command::new(&paths[0])
        .args(["dlq", "list", "extractor"])
        .env("TRAWL_CRAWL", crawl)
        .env("TRAWL_QUEUE_PREFIX", prefix)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&dlq.stdout);
    assert!(
        dlq.status.success(),
        "{}",
        String::from_utf8_lossy(&dlq.stderr)
    );
    let letters: Vec<serde_json::Value> = listing
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(letters.len(), 1, "{listing}");
    assert_eq!(letters[0]["deliveries"], 3, "{listing}");
    assert!(
        letters[0]["payload"].as_str().unwrap().contains("/page/2"),
        "{listing}"
    );
    assert!(
        !letters[0]["reason"].as_str().unwrap().is_empty(),
        "{listing}"
    );
    stack.stop().await;
}

/// NATS carries at most `max_payload` (1 MB for the test server): a page whose record is
/// larger (its text and Markdown) is cut to fit and marked, instead of failing the
/// extractor's publish, restarting the stage and ending in the dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_larger_than_a_message_is_cut_to_fit() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        farm_bytes: 680 << 10,
        farm_links: 2_000,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let stack = Stack::start(
        &paths,
        &[("TRAWL_MAX_DELIVER", "2"), ("TRAWL_ACK_WAIT_S", "5")],
    );
    let seed = site.url("/farm/seed");
    let args = [&seed, "--allow-private", "--delay", "0", "--max-pages", "3"];
    let report = stack.submit(&args).await.unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(report["dead_letters"], 0, "{report}");
    let lines = support::all_pages(stack.out.path());
    assert_eq!(lines.len(), 3, "{report}");
    for l in &lines {
        assert_eq!(l["error"]["kind"], "record_too_large", "{}", l["error"]);
        let text = l["text"].as_str().unwrap();
        assert!(
            text.starts_with("grow the farm"),
            "the text's start is kept"
        );
        assert!(serde_json::to_vec(l).unwrap().len() < 1 << 20);
    }
    stack.stop().await;
}

/// A fetch that outlasts its claim's TTL and its delivery's ack wait (a 5 s page, 2 s
/// each, one delivery allowed): the fetcher renews both while it waits, so the job is
/// neither queued again and fetched a second time, in parallel, by the other worker, nor
/// given up by the server and dead-lettered while it is fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_longer_than_its_claim_is_fetched_once() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        slow_secs: 5,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let stack = Stack::start(
        &paths,
        &[
            ("TRAWL_CLAIM_TTL_S", "2"),
            ("TRAWL_ACK_WAIT_S", "2"),
            ("TRAWL_MAX_DELIVER", "1"),
        ],
    );
    let seed = site.url("/slow");
    let report = stack
        .submit(&[&seed, "--allow-private", "--delay", "0", "--timeout", "20"])
        .await
        .unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(report["dead_letters"], 0, "{report}");
    assert_eq!(site.started("slow"), 1, "fetched once");
    let lines = support::all_pages(stack.out.path());
    let slow: Vec<_> = lines
        .iter()
        .filter(|l| l["url"].as_str().unwrap().ends_with("/slow"))
        .collect();
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0]["status"], 200, "{}", slow[0]);
    stack.stop().await;
}

/// A fetcher killed while it holds a job, with one delivery allowed: the server gives the
/// job up, it is dead-lettered and gets its line, and its host claim is released then, so
/// the claim's expiry does not queue it again (a fetch, a second letter, a second line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_fetch_job_is_not_fetched_again() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        slow_secs: 12,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let mut stack = Stack::start(
        &paths,
        &[
            ("TRAWL_MAX_DELIVER", "1"),
            ("TRAWL_ACK_WAIT_S", "8"),
            ("TRAWL_CLAIM_TTL_S", "12"),
        ],
    );
    let seed = site.url("/slow");
    let submitted = stack.submit(&[&seed, "--allow-private", "--delay", "0", "--timeout", "60"]);
    tokio::pin!(submitted);
    let deadline = Instant::now() + Duration::from_secs(20);
    while site.started("slow") == 0 {
        assert!(Instant::now() < deadline, "the fetcher never took the job");
        tokio::select! {
            r = &mut submitted => panic!("drained before the fetch: {r:?}"),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    stack.kill_and_restart(1);
    let report = submitted.await.unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(report["dead_letters"], 1, "{report}");
    // Past the claim's TTL: had the claim stayed, its expiry would have queued the job.
    tokio::time::sleep(Duration::from_secs(13)).await;
    assert_eq!(site.started("slow"), 1, "fetched once");
    let lines = support::all_pages(stack.out.path());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["error"]["kind"], "dead_lettered", "{}", lines[0]);

    // Replayed, the job goes back to its host's queue for a claim of its own, and is
    // fetched; the fetch outlasts the delivery's ack wait (12 s against 8), which the
    // fetcher keeps renewing, so its one allowed delivery is not given up again.
    let replay = Command::new(&paths[0])
        .args(["dlq", "replay", "fetcher"])
        .env("TRAWL_CRAWL", &stack.crawl)
        .env("TRAWL_QUEUE_PREFIX", &stack.prefix)
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let fetched = loop {
        let lines = support::all_pages(stack.out.path());
        if let Some(l) = lines.iter().find(|l| l["status"] == 200) {
            break l.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the replayed job was not fetched: {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        fetched["url"].as_str().unwrap().ends_with("/slow"),
        "{fetched}"
    );
    assert_eq!(site.started("slow"), 2);
    stack.stop().await;
}

/// `trawl submit` with the default gate (MinHash): the services' extractors share it in
/// Redis. Of the three versions of one article, crawled by two extractors at once, exactly
/// one is kept and the others name a page of their group with their similarity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_share_the_minhash_gate() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let stack = Stack::start(&paths, &[]);
    let group = ["/dup/original", "/dup/copy", "/dup/near"];
    let seeds: Vec<String> = group
        .iter()
        .chain(&["/dup/other"])
        .map(|p| site.url(p))
        .collect();
    let mut args: Vec<&str> = seeds.iter().map(String::as_str).collect();
    args.extend(["--allow-private", "--delay", "0", "--max-depth", "0"]);
    let report = stack.submit(&args).await.unwrap();
    assert_eq!(report["drained"], true, "{report}");
    let lines = support::all_pages(stack.out.path());
    assert_eq!(lines.len(), 4, "{report}");
    let line = |p: &str| {
        lines
            .iter()
            .find(|l| l["url"].as_str().unwrap().ends_with(p))
            .unwrap_or_else(|| panic!("no line for {p}"))
    };
    let kept: Vec<&str> = group
        .iter()
        .copied()
        .filter(|p| line(p)["duplicate_of"].is_null())
        .collect();
    assert_eq!(kept.len(), 1, "one of the group kept: {kept:?}");
    for p in group.iter().filter(|p| **p != kept[0]) {
        let l = line(p);
        let of = l["duplicate_of"].as_str().unwrap();
        assert!(
            group.iter().any(|g| of.ends_with(g)) && !of.ends_with(p),
            "{l}"
        );
        let s = l["similarity"].as_f64().unwrap();
        assert!((0.93..=1.0).contains(&s), "{l}");
        assert!(l["distance"].is_null(), "{l}");
    }
    assert!(line("/dup/other")["duplicate_of"].is_null());
    stack.stop().await;
}

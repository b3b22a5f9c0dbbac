//! Faults and hostile sites: nothing lost. A robots.txt that fails once does not end the
//! crawl (its pages wait and are fetched once it answers); only a sustained outage records
//! them blocked; a retry the full frontier cannot take back is recorded, not dropped; the
//! services survive a NATS restart mid-crawl.

use std::sync::Arc;
use std::time::Duration;

use support::{error_kind, options, page, pages, report};
use trawl_core::queue::{MemoryQueue, Queue};
use trawl_core::scope::{Scope, ScopeKind};
use trawl_core::state::{MemoryState, State, WorkTracker};
use trawl_core::urlnorm::Normalizer;
use trawl_core::{FetchJob, Fetched, MESSAGE_VERSION, UrlKind};
use trawl_testsite::{Robots, SiteConfig, TestSite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robots_txt_blip_does_not_end_the_crawl() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::FailFirst {
            status: 503,
            times: 1,
            then: "User-agent: *\nAllow: /\n".into(),
        },
        pages: 11,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.robots_retry_s = 1;
    trawl::crawl(o).await.unwrap();
    let ps = pages(out.path());
    let chain: Vec<_> = ps
        .iter()
        .filter(|p| p["url"].as_str().unwrap().contains("/page/"))
        .collect();
    assert_eq!(chain.len(), 11, "every page of the chain");
    for p in &chain {
        assert_eq!(p["status"], 200, "{p}");
    }
    let r = report(out.path());
    assert_eq!(r["robots_blocked"], 0, "{r}");
    assert!(
        r["robots_waits"].as_i64().unwrap() >= 1,
        "the seed waited: {r}"
    );
    let asked = site.hits("/robots.txt").len();
    assert_eq!(asked, 2, "asked once more after the 503, then cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sustained_robots_outage_records_the_pages_blocked() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(503),
        pages: 3,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.robots_retry_s = 1;
    o.crawl.robots_outage_s = 2;
    let started = std::time::Instant::now();
    trawl::crawl(o).await.unwrap();
    let ps = pages(out.path());
    let seed = page(&ps, "/page/1");
    assert_eq!(error_kind(seed), Some("robots_disallowed"), "{seed}");
    assert!(
        seed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{seed}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "it waited out the outage"
    );
    let asked = site.hits("/robots.txt").len();
    assert!(
        asked >= 2,
        "robots.txt asked again while it waited: {asked}"
    );
    assert!(
        !site.hits("/page/").iter().any(|e| e.status == 200),
        "no page fetched"
    );
}

/// The toolchain docs' case in small: a page that links to many disallowed pages before
/// the allowed ones. robots.txt is read before admission, so `--max-pages` buys allowed
/// pages only, and the disallowed ones are counted, not fetched or written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urls_robots_txt_disallows_use_none_of_max_pages() {
    let docs = tempfile::tempdir().unwrap();
    let mut links = String::new();
    for i in 0..30 {
        links.push_str(&format!(
            "<li><a href=\"/old/{i}.html\">old edition {i}</a></li>"
        ));
    }
    for i in 0..10 {
        links.push_str(&format!(
            "<li><a href=\"/new/{i}.html\">chapter {i}</a></li>"
        ));
    }
    let html = |title: &str, body: &str| {
        format!(
            "<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{body} It has a paragraph of words.</p>{links}</main></body></html>"
        )
    };
    for dir in ["old", "new"] {
        std::fs::create_dir_all(docs.path().join(dir)).unwrap();
        for i in 0..30 {
            let page = html(&format!("{dir} {i}"), &format!("This is {dir} page {i}."));
            std::fs::write(docs.path().join(format!("{dir}/{i}.html")), page).unwrap();
        }
    }
    std::fs::write(docs.path().join("index.html"), html("Index", "The index.")).unwrap();
    let site = TestSite::start(SiteConfig {
        robots: Robots::Body("User-agent: *\nDisallow: /old/\n".into()),
        dir: Some(docs.path().to_path_buf()),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/index.html")], out.path());
    o.crawl.max_pages = 11;
    trawl::crawl(o).await.unwrap();
    let ps = pages(out.path());
    let fetched: Vec<&str> = ps.iter().map(|p| p["url"].as_str().unwrap()).collect();
    assert_eq!(
        ps.len(),
        11,
        "the index and the 10 allowed chapters: {fetched:?}"
    );
    assert!(ps.iter().all(|p| p["status"] == 200), "{fetched:?}");
    assert!(fetched.iter().all(|u| !u.contains("/old/")), "{fetched:?}");
    assert!(
        site.hits("/old/").is_empty(),
        "a disallowed page was requested"
    );
    let r = report(out.path());
    assert_eq!(r["frontier"]["robots_blocked"], 30, "{r}");
    assert_eq!(r["robots_blocked"], 30, "{r}");
    assert_eq!(r["frontier"]["max_pages_reached"], 0, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_the_full_frontier_turns_away_is_recorded() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let tracker = WorkTracker::default();
    // A frontier of one URL, held by a higher-ranked job of another host.
    let state = Arc::new(MemoryState::new(1, 1, tracker.clone()));
    let job = |url: &str, host: &str, priority: i64| FetchJob {
        v: MESSAGE_VERSION,
        crawl: "t".into(),
        url: url.into(),
        host: host.into(),
        kind: UrlKind::Page,
        priority,
        ..FetchJob::default()
    };
    state
        .enqueue(job("http://other.invalid/", "other.invalid", -1_000_000))
        .await
        .unwrap();
    let target = site.url("/retry/full");
    let host = target
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    let mut cfg = trawl_fetcher::FetcherConfig::new("t");
    cfg.allow_private = true;
    cfg.delay = Duration::ZERO;
    let seed = url::Url::parse(&target).unwrap();
    let fetcher = Arc::new(
        trawl_fetcher::Fetcher::new(
            cfg,
            state.clone() as Arc<dyn State>,
            Scope::new(ScopeKind::Any, &[seed]),
            Normalizer::default(),
            None,
        )
        .unwrap(),
    );
    let jobs: Arc<MemoryQueue<FetchJob>> = Arc::new(MemoryQueue::new(8, tracker.clone()));
    let fetched: Arc<MemoryQueue<Fetched>> = Arc::new(MemoryQueue::new(8, tracker.clone()));
    let discovered = Arc::new(MemoryQueue::new(8, tracker.clone()));
    jobs.publish(job(&target, host, 0)).await.unwrap();
    let (trigger, stop) = trawl_core::pipeline::shutdown();
    let worker = tokio::spawn(trawl_fetcher::run_worker(
        fetcher,
        jobs.clone() as Arc<dyn Queue<FetchJob>>,
        fetched.clone() as Arc<dyn Queue<Fetched>>,
        discovered as _,
        stop,
    ));
    let mut records = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !records.iter().any(|f: &Fetched| f.job.url == target)
        && std::time::Instant::now() < deadline
    {
        for d in fetched.pull(8, Duration::from_millis(200)).await.unwrap() {
            fetched.ack(d.id).await.unwrap();
            records.push(d.msg);
        }
    }
    trigger.trigger();
    worker.await.unwrap().unwrap();
    let rejected = records
        .iter()
        .find(|f| f.job.url == target)
        .expect("the 429 page has a record");
    let e = rejected.error.as_ref().expect("recorded as failed");
    assert_eq!(e.kind, "retry_rejected", "{e:?}");
    assert_eq!(rejected.status, 429);
    let counters = state.counters().await.unwrap();
    assert_eq!(counters["fetcher.retries_rejected"], 1, "{counters:?}");
}

/// A nats-server of the test's own (JetStream on a file store in `dir`) on `port`.
fn start_nats(dir: &std::path::Path, port: u16) -> Option<std::process::Child> {
    let c = std::process::Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    support::services::listening(c, port)
}

/// The URLs of every line the indexers wrote (`pages-*.jsonl`).
fn indexed_urls(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("pages-") && name.ends_with(".jsonl") {
            for l in std::fs::read_to_string(&p).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                out.insert(v["url"].as_str().unwrap().to_string());
            }
        }
    }
    out
}

/// The services over a nats-server that goes down mid-crawl (SIGTERM) and comes back on
/// its JetStream file store: the crawl completes with the embedded crawl's pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_restart_mid_crawl_is_survived() {
    use support::services::{Stack, free_port, service_bins};
    let Some(paths) = service_bins() else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let port = free_port();
    let Some(mut nats) = start_nats(store.path(), port) else {
        if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
            panic!("cannot start a nats-server of this test's own");
        }
        eprintln!("SKIPPED: cannot start nats-server");
        return;
    };
    let nats_url = format!("nats://127.0.0.1:{port}");
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
            ("TRAWL_NATS_URL", &nats_url),
            ("TRAWL_ACK_WAIT_S", "1"),
            ("TRAWL_CLAIM_TTL_S", "3"),
            ("TRAWL_MAX_DELIVER", "50"),
        ],
    );
    let out = &stack.out;
    let waiter = stack.submit(&[&seed, "--allow-private", "--delay", "150"]);
    // Mid-crawl: NATS goes down, stays down a moment, comes back on its store.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = indexed_urls(out.path()).len();
    std::process::Command::new("kill")
        .args(["-TERM", &nats.id().to_string()])
        .status()
        .unwrap();
    nats.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut nats = start_nats(store.path(), port).expect("nats-server restarts on its store");
    let report = waiter.await.unwrap();
    let cluster = indexed_urls(out.path());
    assert_eq!(report["drained"], true, "{report}");
    let emb = tempfile::tempdir().unwrap();
    let mut o = options(std::slice::from_ref(&seed), emb.path());
    o.crawl.delay_ms = 0;
    trawl::crawl(o).await.unwrap();
    let embedded: std::collections::BTreeSet<String> = pages(emb.path())
        .iter()
        .map(|p| p["url"].as_str().unwrap().to_string())
        .collect();
    assert!(
        before < embedded.len(),
        "NATS went down mid-crawl ({before} pages written)"
    );
    assert_eq!(cluster, embedded);
    // The crawl's keys in the shared Redis; its streams go with the test's own NATS.
    stack.stop().await;
    let _ = nats.kill();
    let _ = nats.wait();
}

/// `/metrics` answers from a snapshot refreshed in the background: with Redis accepting
/// connections and never answering, a scrape still returns at once, with the queue series
/// NATS gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_at_once_while_redis_hangs() {
    use support::services::{free_port, service_bins, spawn};
    let Some(paths) = service_bins() else {
        return;
    };
    // A "Redis" that takes connections and never says a word.
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hole_port = hole.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in hole.incoming().flatten() {
            held.push(c);
        }
    });
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let port = free_port();
    let env: Vec<(&str, String)> = vec![
        ("TRAWL_CRAWL", format!("m{}", &tag[..10])),
        ("TRAWL_QUEUE_PREFIX", format!("m{}", &tag[..10])),
        ("TRAWL_REDIS_URL", format!("redis://127.0.0.1:{hole_port}")),
    ];
    let mut frontier = spawn(&paths[1], &env, port);
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut body = String::new();
    while !body.contains("trawl_queue_pending_messages") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Ok(r) = http.get(&url).timeout(Duration::from_secs(15)).send().await {
            body = r.text().await.unwrap_or_default();
        }
    }
    assert!(body.contains("trawl_queue_pending_messages"), "{body}");
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let r = http.get(&url).send().await.unwrap();
        assert!(r.status().is_success());
        let text = r.text().await.unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "a scrape took {:?}",
            started.elapsed()
        );
        assert!(text.contains("trawl_frontier_ready 0"), "{text}");
        assert!(
            text.contains("trawl_frontier_metrics_age_seconds"),
            "{text}"
        );
    }
    let _ = frontier.kill();
    let _ = frontier.wait();
}

/// A 64 KiB tmpfs of the test's own, unmounted when dropped; `None` where mounting is not
/// allowed (the test command runs as root, which may).
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount() -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// `pages.jsonl` on a disk that fills up: the write that fails is an error, and the file
/// still ends on a whole line, every line a record (no torn line to glue the next append
/// to).
#[test]
fn a_full_disk_leaves_no_torn_line() {
    let Some(disk) = SmallDisk::mount() else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    };
    let path = disk.0.path().join("pages.jsonl");
    let mut sink = trawl_indexer::JsonlSink::create(&path).unwrap();
    let record = |i: usize| serde_json::json!({"url": format!("http://a.test/{i}"), "text": "x".repeat(700 + i % 50)});
    let mut failed = None;
    for batch in 0..1000 {
        for i in 0..7 {
            sink.write(&record(batch * 7 + i)).unwrap();
        }
        if let Err(e) = sink.flush() {
            failed = Some(e);
            break;
        }
    }
    let e = failed.expect("a 64 KiB disk fills up");
    assert!(e.to_string().to_lowercase().contains("space"), "{e}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.is_empty() && text.ends_with('\n'),
        "ends on a whole line"
    );
    for l in text.lines() {
        serde_json::from_str::<serde_json::Value>(l).expect("every line a record");
    }
    assert_eq!(
        sink.len(),
        text.len() as u64,
        "the sink knows where the file ends"
    );
}

/// The SimHash gate's file (`gate.db`) on a disk that fills up: a check that cannot store
/// its page is an error that names the full disk, not a panic and not a verdict (the
/// extractor's worker ends on it, which stops the crawl; the next start makes the file
/// anew from the crawl store).
#[test]
fn a_full_disk_under_the_gate_file_is_an_error() {
    let Some(disk) = SmallDisk::mount() else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    };
    let path = disk.0.path().join(trawl_store::gate_file::GATE_FILE);
    let file = trawl_store::gate_file::GateFile::create(&path).unwrap();
    let gate = trawl_dedup::SimGate::with_store(file, 2);
    let mut failed = None;
    for i in 0..100_000u64 {
        let fp = trawl_dedup::Fingerprint {
            simhash: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            exact: u128::from(i),
        };
        let id = format!("http://a.test/a/long/enough/path/to/fill/pages/{i}");
        match gate.try_check_and_insert(fp, &id) {
            Ok(v) => assert_eq!(v, trawl_dedup::GateVerdict::Kept),
            Err(e) => {
                failed = Some((i, e));
                break;
            }
        }
    }
    let (stored, e) = failed.expect("a 64 KiB disk fills up");
    assert!(stored > 10, "pages fit before the disk filled: {stored}");
    assert!(e.to_string().contains("full"), "{e}");
}

/// The WARC files on a disk that fills up mid-crawl: the crawl stops with the WARC error
/// instead of going on without archives, and no page in `pages.jsonl` points at a record
/// that was not written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_warc_disk_stops_the_crawl() {
    let out = tempfile::tempdir().unwrap();
    let warc_dir = out.path().join("warc");
    std::fs::create_dir_all(&warc_dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&warc_dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(warc_dir.clone());
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 200,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let o = options(&[site.url("/page/1")], out.path());
    let err = trawl::crawl(o)
        .await
        .expect_err("the crawl stops when the WARC disk is full");
    let msg = format!("{err:#}");
    assert!(msg.contains("WARC"), "{msg}");
    let ps = pages(out.path());
    assert!(ps.len() < 200, "it stopped early ({} pages)", ps.len());
    let archived: std::collections::BTreeSet<String> =
        trawl_fetcher::warcout::list_warc_files(&warc_dir)
            .unwrap()
            .iter()
            .flat_map(|f| {
                let mut ids = Vec::new();
                if let Ok(r) = warc::WarcReader::from_path_gzip(f) {
                    // The file ends where the disk filled: its reader errs at the torn
                    // record, and may err again at every call after it.
                    for rec in r.iter_records() {
                        let Ok(rec) = rec else { break };
                        ids.push(rec.warc_id().to_string());
                    }
                }
                ids
            })
            .collect();
    for p in &ps {
        if let Some(id) = p["response"]["warc"]["record_id"].as_str() {
            assert!(
                archived.contains(id),
                "{} points at a record not written",
                p["url"]
            );
        }
    }
}

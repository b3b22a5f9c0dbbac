//! A crawl's per-host state sharded across two real redis-servers: the one on
//! 127.0.0.1:6379 and one each test starts on 127.0.0.3. `TRAWL_REQUIRE_SERVICES=1` makes
//! a missing server (or `redis-server` binary) a failure.

use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use trawl_cluster::redis_shards::{shard_of_host, shard_prefix};
use trawl_cluster::redis_state::RedisState;
use trawl_core::FetchJob;
use trawl_core::settings::ClusterSettings;
use trawl_core::spec::CrawlSpec;
use trawl_core::state::{Admitted, Enqueued, State};

use crate::common;
use common::job;

const HOME: &str = "redis://127.0.0.1:6379";

/// A redis-server of the test's own, stopped when dropped.
struct Node {
    child: Child,
    url: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn skip(why: String) -> Option<(Node, RedisState, Vec<String>)> {
    if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
        panic!("TRAWL_REQUIRE_SERVICES=1: {why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

fn start_node() -> Result<Node, String> {
    let port = std::net::TcpListener::bind("127.0.0.3:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port on 127.0.0.3: {e}"))?
        .port();
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.3", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server: {e}"))?;
    let node = Node {
        child,
        url: format!("redis://127.0.0.3:{port}"),
    };
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.3", port)).is_err() {
        if t.elapsed() > Duration::from_secs(10) {
            return Err("redis-server on 127.0.0.3 did not listen within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(node)
}

/// The crawl's state over the home server and a fresh one.
async fn sharded(max_queued: usize, per_host: u32) -> Option<(Node, RedisState, Vec<String>)> {
    let node = match start_node() {
        Ok(n) => n,
        Err(e) => return skip(e),
    };
    let nodes = vec![HOME.to_string(), node.url.clone()];
    let crawl = format!("test-{}", uuid::Uuid::new_v4().simple());
    match RedisState::connect_sharded(&nodes, &crawl, max_queued, per_host, 60_000).await {
        Ok(s) => Some((node, s, nodes)),
        Err(e) => skip(format!("no redis-server at {HOME}: {e}")),
    }
}

/// The keys under `prefix` on the server at `url`.
async fn keys(url: &str, prefix: &str) -> Vec<String> {
    let mut conn = trawl_cluster::redis_conn::connect(url).await.unwrap();
    trawl_cluster::redis_conn::keys_matching(&mut conn, &format!("{prefix}*"))
        .await
        .unwrap()
}

/// Each host's queue and its URLs' seen-set entries land on its shard's server; a URL is
/// admitted once across both; concurrent claimers get every job once and never two of one
/// host at a time, from both servers; `clear` leaves nothing on either.
#[tokio::test]
async fn hosts_are_sharded_and_politeness_holds_across_servers() {
    let Some((_node, s, nodes)) = sharded(10_000, 1).await else {
        return;
    };
    let hosts: Vec<String> = (0..30).map(|h| format!("h{h}.test")).collect();
    let items: Vec<(String, Option<FetchJob>)> = hosts
        .iter()
        .flat_map(|h| (0..4).map(move |p| job(h, &format!("/{p}"), p)))
        .map(|j| (j.url.clone(), Some(j)))
        .collect();
    let first = s.admit_many(items.clone()).await.unwrap();
    assert!(
        first
            .iter()
            .all(|a| *a == Admitted::Queued(Enqueued::Accepted)),
        "{first:?}"
    );
    let again = s.admit_many(items.clone()).await.unwrap();
    assert!(again.iter().all(|a| *a == Admitted::Seen), "{again:?}");
    let urls: Vec<String> = items.iter().map(|(u, _)| u.clone()).collect();
    assert!(
        s.seen_contains_many(&urls)
            .await
            .unwrap()
            .iter()
            .all(|b| *b)
    );
    assert!(!s.seen_contains("http://h1.test/never").await.unwrap());
    assert_eq!(s.queued().await.unwrap(), 120);

    let crawl = s
        .prefix()
        .trim_start_matches("trawl:{")
        .trim_end_matches("}:")
        .to_string();
    let crawl = crawl.as_str();
    for (i, url) in nodes.iter().enumerate() {
        let prefix = shard_prefix(crawl, i);
        let here: HashSet<String> = keys(url, &format!("{prefix}q:"))
            .await
            .into_iter()
            .collect();
        let mine: HashSet<String> = hosts
            .iter()
            .filter(|h| shard_of_host(h, 2) == i)
            .map(|h| format!("{prefix}q:{h}"))
            .collect();
        assert!(!mine.is_empty(), "30 hosts, none on shard {i}");
        assert_eq!(here, mine, "the queues on shard {i}'s server");
        assert!(!keys(url, &format!("{prefix}seen:")).await.is_empty());
    }

    let s = Arc::new(s);
    let in_flight = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let claimed = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (s, f, c) = (s.clone(), in_flight.clone(), claimed.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                match s.claim(0).await.unwrap() {
                    Some(cl) => {
                        let host = cl.job.host.clone();
                        {
                            let mut g = f.lock().unwrap();
                            let n = g.entry(host.clone()).or_default();
                            *n += 1;
                            assert_eq!(*n, 1, "two fetches of {host} at once");
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        *f.lock().unwrap().get_mut(&host).unwrap() -= 1;
                        c.lock().unwrap().push(cl.job.url.clone());
                        s.release(&host, cl.job.claim.as_deref(), 0).await.unwrap();
                    }
                    None if s.queued().await.unwrap() == 0 => return,
                    None => tokio::task::yield_now().await,
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut got = claimed.lock().unwrap().clone();
    got.sort();
    let mut want = urls.clone();
    want.sort();
    assert_eq!(got, want, "every job claimed once");
    assert_eq!(s.claims().await.unwrap(), 0);
    assert_eq!(s.next_ready_ms().await.unwrap(), None);

    s.incr("pages", 3).await.unwrap();
    assert_eq!(s.counters().await.unwrap()["pages"], 3);
    s.clear().await.unwrap();
    for (i, url) in nodes.iter().enumerate() {
        assert!(keys(url, &shard_prefix(crawl, i)).await.is_empty());
    }
}

/// The cap holds on each shard (a server's memory); each URL it drops is recorded on its
/// shard and read back across them, page by page.
#[tokio::test]
async fn the_cap_holds_on_each_shard_and_every_drop_is_read_back() {
    let Some((_node, s, _)) = sharded(3, 1).await else {
        return;
    };
    let mut rejected = 0;
    let mut evicted = 0;
    for i in 0..40 {
        match s
            .enqueue(job(&format!("h{}.test", i % 10), &format!("/{i}"), 40 - i))
            .await
            .unwrap()
        {
            Enqueued::Rejected => rejected += 1,
            Enqueued::AcceptedEvicting(n) => evicted += n,
            Enqueued::Accepted => {}
        }
    }
    let queued = s.queued().await.unwrap();
    // Ten hosts, five on each shard, each shard full at 3.
    assert_eq!(queued, 6, "3 a shard");
    assert_eq!(queued + rejected + evicted, 40);
    let all = s.dropped(0, 100).await.unwrap();
    assert_eq!(all.len(), rejected + evicted);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
    let mut paged = Vec::new();
    let mut from = 0;
    loop {
        let page = s.dropped(from, 5).await.unwrap();
        if page.is_empty() {
            break;
        }
        from += page.len();
        paged.extend(page);
    }
    assert_eq!(paged, all);
    s.clear().await.unwrap();
}

/// A service that names another count of servers than the crawl was submitted with is
/// refused: it would look for hosts on the wrong shards.
#[tokio::test]
async fn a_service_naming_other_servers_is_refused() {
    let spec = CrawlSpec {
        crawl: "sharded".into(),
        start: Vec::new(),
        settings: Default::default(),
        index: Default::default(),
        since: None,
        due_only: false,
        state_shards: 2,
    };
    let one = ClusterSettings::default();
    let err = match trawl_cluster::service::state_for(&one, &spec).await {
        Ok(_) => panic!("one server for a crawl of two shards"),
        Err(e) => e,
    };
    assert!(
        err.is_fatal(),
        "settings that cannot work are not retried: {err}"
    );
    assert!(err.to_string().contains("TRAWL_REDIS_STATE_URLS"), "{err}");
}

//! The cluster rides through `kill -9` of its backends and its own replicas, with the
//! services' default delivery settings (ack wait, claim lease and lifetime): each test
//! crawls a synthetic web of six hosts twice, on a nats-server (JetStream on a file
//! store) and a redis-server (AOF every second, as `docker-compose.yml` runs it) of its
//! own, once without faults and once with its fault mid-crawl, and reports, judged by the
//! web server's counters and the indexers' lines: how soon pages flowed again, pages lost
//! (none), pages fetched more than once, lines written twice, and the crawl's time
//! against the same crawl without faults.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::services::{Stack, free_port, listening, service_bins};
use trawl_testsite::web::{Web, WebConfig, WebStats};

/// A backend server of the test's own: how to start it again on the same data.
struct Server {
    child: Child,
    args: Vec<String>,
    program: &'static str,
    port: u16,
}

impl Server {
    fn spawn(program: &str, args: &[String], port: u16) -> Option<Child> {
        let child = Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        listening(child, port)
    }

    fn start(program: &'static str, args: Vec<String>, port: u16) -> Option<Server> {
        let child = Self::spawn(program, &args, port)?;
        Some(Server {
            child,
            args,
            program,
            port,
        })
    }

    /// JetStream on a file store in `dir`, optionally one node of a cluster.
    fn nats(dir: &Path, port: u16, cluster: Option<(&str, u16, &[u16])>) -> Option<Server> {
        let mut args: Vec<String> = ["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(dir.display().to_string());
        if let Some((name, cport, routes)) = cluster {
            let routes: Vec<String> = routes
                .iter()
                .map(|p| format!("nats://127.0.0.1:{p}"))
                .collect();
            args.extend([
                "--name".into(),
                name.into(),
                "--cluster_name".into(),
                "trawl-test".into(),
                "--cluster".into(),
                format!("nats://127.0.0.1:{cport}"),
                "--routes".into(),
                routes.join(","),
            ]);
        }
        Self::start("nats-server", args, port)
    }

    /// Redis with its AOF written every second, as the compose stack runs it.
    fn redis(dir: &Path, port: u16) -> Option<Server> {
        let args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--dir",
            &dir.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Self::start("redis-server", args, port)
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Started again on the same data and port.
    fn restart(&mut self) {
        self.kill9();
        self.child = Self::spawn(self.program, &self.args, self.port)
            .unwrap_or_else(|| panic!("{} starts again on its data", self.program));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// What happens mid-crawl.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    /// nats-server killed at 40% of the pages, started again on its store after 1 s.
    Nats,
    /// redis-server killed at 40%, started again on its AOF after 1 s.
    Redis,
    /// A fetcher killed at 20%, the indexer at 35%, the extractor and the frontier at
    /// 50%, each started again at once.
    Replicas,
    /// One node of a three-node JetStream cluster (streams replicated three times)
    /// killed at 40% and left down.
    NatsNode,
    /// The replicas as in `Replicas`, then nats-server at 65% and redis-server at 80%.
    All,
}

/// The web's pages and hosts: 600 on six, or `TRAWL_FAULTS_PAGES` and `TRAWL_FAULTS_HOSTS`
/// (`bench/faults` runs the same crawls at the 20,000 pages on 20 hosts).
fn shape() -> (u64, u32) {
    let var = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    (
        var("TRAWL_FAULTS_PAGES", 600),
        var("TRAWL_FAULTS_HOSTS", 6) as u32,
    )
}

/// One crawl's figures.
#[derive(Debug)]
struct Run {
    secs: f64,
    /// From the backend's return (or the last replica's kill) to the next page fetched.
    flowing_after: Option<f64>,
    web: WebStats,
    lines: usize,
    distinct: usize,
    /// Each line's host by its place in the web and its path (`3/p/7`).
    #[allow(dead_code)]
    paths: std::collections::BTreeSet<String>,
    /// The pages the crawl without faults wrote that this one did not.
    lost: Vec<String>,
    /// Some URLs written twice, for a failure's message.
    #[allow(dead_code)]
    twice: Vec<String>,
    repeated: i64,
}

/// How many lines, URLs, their hosts' places and paths, and a few URLs written twice.
type Lines = (
    usize,
    usize,
    std::collections::BTreeSet<String>,
    Vec<String>,
);

/// The indexers' lines of the web's pages (`/p/N` and its query variants, reached directly
/// or at the end of a redirect chain).
fn lines(dir: &Path) -> Lines {
    let mut urls = std::collections::HashSet::new();
    let mut paths = std::collections::BTreeSet::new();
    let mut twice = Vec::new();
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("pages-") && name.ends_with(".jsonl") {
            for l in std::fs::read_to_string(&p).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let url = v["url"].as_str().unwrap();
                // A page first reached through a redirect chain (`/r/N/k`) has its line
                // under the chain's URL: its page is where the chain ended, when that
                // answered (a chain stopped at a page the crawl had is a 3xx line).
                let page = match v["final_url"].as_str() {
                    Some(f) if v["status"] == 200 && f.contains("/p/") => f,
                    _ => url,
                };
                if page.contains("/p/") {
                    if !urls.insert(url.to_string()) && twice.len() < 5 {
                        twice.push(url.to_string());
                    }
                    let url = page;
                    // The host by its place (the address's last number) and the path:
                    // each crawl's web of the same shape is served at other addresses.
                    // Without the query: which variants of a page the per-host budget
                    // admits first depends on the crawl's timing.
                    let url = url.split_once('?').map_or(url, |(u, _)| u);
                    let rest = url.split_once("://").map_or(url, |(_, r)| r);
                    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                    let place = host.split(':').next().unwrap_or(host).rsplit('.').next();
                    paths.insert(format!("{}/{path}", place.unwrap_or(host)));
                    n += 1;
                }
            }
        }
    }
    (n, urls.len(), paths, twice)
}

async fn until_fetched(web: &Web, pages: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while web.stats().pages_fetched < pages {
        assert!(Instant::now() < deadline, "stuck at {:?}", web.stats());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Seconds until the web serves a page it had not before.
async fn flowing_again(web: &Web) -> f64 {
    let (from, at) = (web.stats().pages_fetched, Instant::now());
    let deadline = at + Duration::from_secs(120);
    while web.stats().pages_fetched <= from {
        assert!(Instant::now() < deadline, "no page fetched for 120 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    at.elapsed().as_secs_f64()
}

/// A JetStream cluster of `n` nodes on loopback, once it has elected its meta leader.
async fn nats_cluster(dir: &Path, n: usize) -> Option<Vec<Server>> {
    let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
    let routes: Vec<u16> = ports.iter().map(|p| p.1).collect();
    let mut nodes = Vec::new();
    for (i, (port, cport)) in ports.iter().enumerate() {
        let name = format!("n{i}");
        let store = dir.join(&name);
        let Some(node) = Server::nats(&store, *port, Some((&name, *cport, &routes))) else {
            eprintln!("nats-server {name} did not start");
            return None;
        };
        nodes.push(node);
    }
    let url = format!("nats://127.0.0.1:{}", ports[0].0);
    let client = async_nats::connect(url).await.ok()?;
    let js = async_nats::jetstream::new(client);
    let deadline = Instant::now() + Duration::from_secs(30);
    // Ready once a stream with a copy on every node can be made.
    let probe = async_nats::jetstream::stream::Config {
        name: "READY".into(),
        subjects: vec!["ready.probe".into()],
        num_replicas: n,
        ..Default::default()
    };
    while let Err(e) = js.get_or_create_stream(probe.clone()).await {
        if Instant::now() > deadline {
            eprintln!("the JetStream cluster took no stream of {n} copies in 30 s: {e}");
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = js.delete_stream("READY").await;
    Some(nodes)
}

/// Backends of the test's own (`nodes` NATS servers: one, or a JetStream cluster), or
/// `None` (a skip, or a failure where services are required).
async fn backends(dir: &Path, nodes: usize) -> Option<(Vec<Server>, Server)> {
    let nats = if nodes == 1 {
        Server::nats(&dir.join("nats"), free_port(), None).map(|s| vec![s])
    } else {
        nats_cluster(dir, nodes).await
    };
    let redis = Server::redis(dir, free_port());
    match (nats, redis) {
        (Some(n), Some(r)) => Some((n, r)),
        _ => {
            if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("cannot start a nats-server and a redis-server of the test's own");
            }
            eprintln!("SKIPPED: cannot start nats-server and redis-server");
            None
        }
    }
}

/// A crawl of a web of 600 pages on six hosts ([`shape`]) at `first` by the four stages
/// (two fetchers) over `nodes` NATS servers, with `fault` mid-crawl.
async fn crawl(
    paths: &[std::path::PathBuf],
    fault: Fault,
    first: [u8; 4],
    nodes: usize,
) -> Option<Run> {
    let dir = tempfile::tempdir().unwrap();
    let (mut nats, mut redis) = backends(dir.path(), nodes).await?;
    let (pages, hosts) = shape();
    let web = Web::start(WebConfig {
        pages,
        hosts,
        first_addr: first.into(),
        slow_every: 0,
        error_every: 0,
        ..WebConfig::default()
    })
    .await
    .unwrap();
    let expected = web.config().expected().pages;
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.roots().join("\n")).unwrap();
    let nats_url: Vec<String> = nats
        .iter()
        .map(|n| format!("nats://127.0.0.1:{}", n.port))
        .collect();
    let (nats_url, redis_url) = (
        nats_url.join(","),
        format!("redis://127.0.0.1:{}", redis.port),
    );
    let replicas = nodes.to_string();
    let index = dir.path().join("index").display().to_string();
    let mut env = vec![
        ("TRAWL_NATS_URL", nats_url.as_str()),
        ("TRAWL_REDIS_URL", redis_url.as_str()),
        ("TRAWL_STREAM_REPLICAS", replicas.as_str()),
    ];
    // The text index, no vectors (`bench/faults`): the indexer's LanceDB writes in the
    // path of every page.
    if std::env::var("TRAWL_FAULTS_INDEX").is_ok_and(|v| v == "1") {
        env.extend([
            ("TRAWL_INDEX_URI", index.as_str()),
            ("TRAWL_EMBED", "false"),
        ]);
    }
    // Frontier, two fetchers, extractor, indexer.
    let mut stack = Stack::start_services(paths, &[1, 2, 2, 3, 4], &env);
    let started = Instant::now();
    let seeds = seeds.display().to_string();
    let waiter = stack.submit(&[
        "--urls",
        &seeds,
        "--allow-private",
        "--delay",
        "0",
        "--max-query-variants",
        "20",
    ]);
    let at = |share: f64| (expected as f64 * share) as u64;
    let flowing_after = match fault {
        Fault::None => None,
        Fault::NatsNode => {
            until_fetched(&web, at(0.4)).await;
            nats[0].kill9();
            Some(flowing_again(&web).await)
        }
        Fault::Nats | Fault::Redis => {
            until_fetched(&web, at(0.4)).await;
            let server = if fault == Fault::Nats {
                &mut nats[0]
            } else {
                &mut redis
            };
            server.kill9();
            tokio::time::sleep(Duration::from_secs(1)).await;
            server.restart();
            Some(flowing_again(&web).await)
        }
        Fault::Replicas | Fault::All => {
            // In start order: 0 frontier, 1 and 2 fetchers, 3 extractor, 4 indexer.
            until_fetched(&web, at(0.2)).await;
            stack.kill_and_restart(1);
            until_fetched(&web, at(0.35)).await;
            stack.kill_and_restart(4);
            until_fetched(&web, at(0.5)).await;
            stack.kill_and_restart(3);
            stack.kill_and_restart(0);
            if fault == Fault::All {
                for (share, server) in [(0.65, &mut nats[0]), (0.8, &mut redis)] {
                    until_fetched(&web, at(share)).await;
                    server.kill9();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    server.restart();
                }
            }
            Some(flowing_again(&web).await)
        }
    };
    let report = waiter.await.unwrap();
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(report["drained"], true, "{report}");
    let (lines, urls, paths, twice) = lines(stack.out.path());
    let run = Run {
        secs,
        flowing_after,
        web: web.stats(),
        lines,
        distinct: urls,
        paths,
        twice,
        lost: Vec::new(),
        repeated: report["counters"]["indexer.pages_repeated"]
            .as_i64()
            .unwrap_or(0),
    };
    assert_eq!(run.web.pages_fetched, expected, "{fault:?}: {run:?}");
    stack.stop().await;
    drop((nats, redis));
    Some(run)
}

/// Runs the crawl without faults and with `fault` on two webs of the same shape; prints
/// both.
async fn with_and_without(fault: Fault, first: [u8; 4]) -> Option<(Run, Run)> {
    let paths = service_bins()?;
    let nodes = if fault == Fault::NatsNode { 3 } else { 1 };
    let clean = crawl(&paths, Fault::None, first, nodes).await?;
    let mut other = first;
    other[2] = other[2].wrapping_add(1);
    let faulted = crawl(&paths, fault, other, nodes).await?;
    eprintln!(
        "{fault:?}: {:.1} s against {:.1} s without faults ({:+.1} s); pages flowing again \
         after {:.2} s; {} pages, fetched again {}, {} lines for {} URLs ({} without faults), \
         {} redeliveries not written twice",
        faulted.secs,
        clean.secs,
        faulted.secs - clean.secs,
        faulted.flowing_after.unwrap_or(f64::NAN),
        faulted.web.pages_fetched,
        faulted.web.pages_fetched_again,
        faulted.lines,
        faulted.distinct,
        clean.lines,
        faulted.repeated
    );
    assert_eq!(clean.lines, clean.distinct, "{clean:?}");
    let mut faulted = faulted;
    faulted.lost = clean.paths.difference(&faulted.paths).cloned().collect();
    eprintln!("{fault:?}: pages without a line: {:?}", faulted.lost);
    Some((clean, faulted))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_kill_mid_crawl_completes_and_pages_flow_again_within_seconds() {
    let Some((_, run)) = with_and_without(Fault::Nats, [127, 4, 1, 1]).await else {
        return;
    };
    let after = run.flowing_after.unwrap();
    assert!(after < 10.0, "pages flowed again only after {after:.1} s");
    // A single nats-server killed with SIGKILL may lose what it acknowledged last (one
    // page in about a dozen runs here): a three-node cluster loses none (below).
    assert!(run.lost.len() <= 6, "lines lost: {:?}", run.lost);
    assert!(run.lines - run.distinct <= 64, "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_kill_mid_crawl_loses_nothing_and_pages_flow_again_within_seconds() {
    let Some((_, run)) = with_and_without(Fault::Redis, [127, 4, 3, 1]).await else {
        return;
    };
    let after = run.flowing_after.unwrap();
    assert!(after < 10.0, "pages flowed again only after {after:.1} s");
    assert!(run.lost.is_empty(), "lines lost: {:?}", run.lost);
    // AOF every second: what the last second wrote (seen URLs, releases) may be gone and
    // its pages fetched again; never more than a few seconds' worth.
    assert!(
        run.web.pages_fetched_again < 100,
        "fetched again: {}",
        run.web.pages_fetched_again
    );
    assert_eq!(run.lines, run.distinct, "a page written twice: {run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_killed_mid_crawl_hand_their_work_over_within_the_lease() {
    let Some((clean, run)) = with_and_without(Fault::Replicas, [127, 4, 5, 1]).await else {
        return;
    };
    // A killed fetcher's hosts are free again within the claim lease (10 s), not the
    // claim's lifetime (600 s); its unacked jobs come back after the ack wait (30 s).
    assert!(
        run.secs - clean.secs < 75.0,
        "{:.1} s against {:.1} s",
        run.secs,
        clean.secs
    );
    assert!(run.lost.is_empty(), "lines lost: {:?}", run.lost);
    // A page's line is marked one round trip after its flush: only an indexer killed in
    // that round trip leaves a batch's lines (64 at most) to be written again; after it,
    // a redelivery redoes the rest, not the line.
    assert!(run.lines - run.distinct <= 64, "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_jetstream_cluster_loses_a_node_mid_crawl_and_nothing_else() {
    let Some((_, run)) = with_and_without(Fault::NatsNode, [127, 4, 7, 1]).await else {
        return;
    };
    let after = run.flowing_after.unwrap();
    assert!(after < 10.0, "pages flowed again only after {after:.1} s");
    assert!(run.lost.is_empty(), "lines lost: {:?}", run.lost);
    assert_eq!(run.lines, run.distinct, "a page written twice: {run:?}");
}

/// Each service's `/readyz`: its status and body.
async fn readiness(stack: &Stack) -> Vec<(String, u16, String)> {
    let http = reqwest::Client::new();
    let mut out = Vec::new();
    for ((name, _), port) in stack.services.0.iter().zip(&stack.ports) {
        let url = format!("http://127.0.0.1:{port}/readyz");
        let (status, body) = match http.get(&url).timeout(Duration::from_secs(2)).send().await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        };
        out.push((name.clone(), status, body));
    }
    out
}

/// Redis hangs mid-crawl (SIGSTOP: connections open, no answers): the stages' calls wait,
/// nothing is consumed while messages wait, and a stage in that state says so on
/// `/readyz` instead of claiming to be ready (its `/healthz` stays up: a liveness probe
/// restarting every stage for a backend's outage would only slow the recovery); once
/// Redis answers again (SIGCONT) they are ready again and the crawl completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_that_consumes_nothing_while_work_waits_is_not_ready() {
    let Some(paths) = service_bins() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some((nats, redis)) = backends(dir.path(), 1).await else {
        return;
    };
    let web = Web::start(WebConfig {
        pages: 600,
        hosts: 6,
        first_addr: [127, 4, 9, 1].into(),
        slow_every: 0,
        error_every: 0,
        ..WebConfig::default()
    })
    .await
    .unwrap();
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.roots().join("\n")).unwrap();
    let (nats_url, redis_url) = (
        format!("nats://127.0.0.1:{}", nats[0].port),
        format!("redis://127.0.0.1:{}", redis.port),
    );
    let stack = Stack::start_services(
        &paths,
        &[1, 2, 3, 4],
        &[
            ("TRAWL_NATS_URL", &nats_url),
            ("TRAWL_REDIS_URL", &redis_url),
            ("TRAWL_STALL_AFTER_S", "3"),
        ],
    );
    let seeds = seeds.display().to_string();
    let waiter = stack.submit(&["--urls", &seeds, "--allow-private", "--delay", "0"]);
    until_fetched(&web, 100).await;
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, &redis.child.id().to_string()])
            .status()
            .unwrap()
    };
    assert!(signal("-STOP").success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let stalled = loop {
        let r = readiness(&stack).await;
        if let Some(s) = r
            .iter()
            .find(|(_, code, body)| *code == 503 && body.contains("wait"))
        {
            break s.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no stage reported a stall: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!("stalled: {stalled:?}");
    let port = stack.ports[stack
        .services
        .0
        .iter()
        .position(|(n, _)| *n == stalled.0)
        .unwrap()];
    // Redis is what is away: starting the stage again would not help, so a liveness
    // probe leaves it be.
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .unwrap();
    assert_eq!(
        health.status().as_u16(),
        200,
        "restarted for a backend's outage"
    );
    assert!(signal("-CONT").success());
    let report = waiter.await.unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(web.stats().pages_fetched, web.config().expected().pages);
    // Consuming again: ready again (drained, nothing waits).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = readiness(&stack).await;
        if r.iter().all(|(_, code, _)| *code == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "not ready again: {r:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_nats_and_redis_killed_in_one_crawl_complete() {
    let Some((clean, run)) = with_and_without(Fault::All, [127, 4, 11, 1]).await else {
        return;
    };
    // Acks the killed nats-server took with it come back after the ack wait (30 s).
    assert!(
        run.secs - clean.secs < 90.0,
        "{:.1} s against {:.1} s",
        run.secs,
        clean.secs
    );
    // As for the replicas and the single nats-server alone.
    assert!(run.lost.len() <= 6, "lines lost: {:?}", run.lost);
    assert!(run.lines - run.distinct <= 64, "{run:?}");
}

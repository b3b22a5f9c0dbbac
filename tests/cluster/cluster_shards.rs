//! The service processes with a crawl's per-host state sharded across two redis-servers
//! (the shared one and one of the test's own) crawl a synthetic web of six hosts: judged
//! by the web server's counters, every page is fetched once and no host ever has two
//! requests in flight, and each server holds the seen-set of its share of the hosts.

use std::process::{Command, Stdio};

use support::services::{Stack, free_port, listening, service_bins};
use trawl_cluster::redis_shards::shard_of_host;
use trawl_testsite::web::{Web, WebConfig};

/// The keys under `pattern` on the server at `url`.
async fn count_keys(url: &str, pattern: &str) -> usize {
    let mut conn = trawl_cluster::redis_conn::connect(url).await.unwrap();
    trawl_cluster::redis_conn::keys_matching(&mut conn, pattern)
        .await
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_sharded_across_two_redis_servers_fetches_every_page_once_politely() {
    let Some(paths) = service_bins() else {
        return;
    };
    let port = free_port();
    let server = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (scripts/services.sh installs it)");
    let mut server = listening(server, port).expect("a redis-server of the test's own");
    let second = format!("redis://127.0.0.1:{port}");

    // A port at which the six hosts fall on both shards (all on one: 1 in 32).
    let split = |port: u16| {
        let shards: Vec<usize> = (1..=6)
            .map(|h| shard_of_host(&format!("127.2.3.{h}:{port}"), 2))
            .collect();
        shards.contains(&0) && shards.contains(&1)
    };
    let web_port = (0..100).map(|_| free_port()).find(|p| split(*p)).unwrap();
    let web = Web::start(WebConfig {
        pages: 1_200,
        hosts: 6,
        first_addr: [127, 2, 3, 1].into(),
        port: web_port,
        ..WebConfig::default()
    })
    .await
    .unwrap();
    let expected = web.config().expected();
    let seeds = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(seeds.path(), web.roots().join("\n")).unwrap();

    let stack = Stack::start_services(
        &paths,
        &[1, 2, 2, 3, 4],
        &[("TRAWL_REDIS_STATE_URLS", &second)],
    );
    let seeds_arg = seeds.path().display().to_string();
    let report = stack
        .submit(&[
            "--urls",
            &seeds_arg,
            "--allow-private",
            "--delay",
            "0",
            "--max-query-variants",
            "20",
        ])
        .await
        .unwrap();
    assert_eq!(report["drained"], true, "{report}");

    let seen = web.stats();
    assert_eq!(seen.pages_fetched, expected.pages, "{seen:?}");
    assert_eq!(seen.pages_fetched_again, 0, "{seen:?}");
    assert_eq!(seen.max_in_flight_per_host, 1, "{seen:?}");
    assert_eq!(seen.private_requests, 0, "{seen:?}");
    let crawl = stack.crawl.clone();
    let home = count_keys(
        "redis://127.0.0.1:6379",
        &format!("trawl:{{{crawl}}}:seen:*"),
    )
    .await;
    let other = count_keys(&second, &format!("trawl:{{{crawl}|s1}}:seen:*")).await;
    assert!(home > 0 && other > 0, "seen-sets: {home} and {other}");

    stack.stop().await;
    let _ = server.kill();
    let _ = server.wait();
}

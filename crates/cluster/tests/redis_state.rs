//! The Redis state against a real redis-server on loopback; `TRAWL_REQUIRE_SERVICES=1`
//! makes a missing server a failure.

use std::collections::HashSet;
use std::sync::Arc;

use trawl_cluster::redis_state::RedisState;
use trawl_core::FetchJob;
use trawl_core::state::{Admitted, Enqueued, RobotsAccess, RobotsEntry, State};

use crate::common;
use common::job;

const URL: &str = "redis://127.0.0.1:6379";

async fn state(max_queued: usize, per_host: u32, ttl_ms: u64) -> Option<RedisState> {
    let crawl = format!("test-{}", uuid::Uuid::new_v4().simple());
    match RedisState::connect(URL, &crawl, max_queued, per_host, ttl_ms).await {
        Ok(s) => Some(s),
        Err(e) => {
            if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("redis-server required at {URL} (TRAWL_REQUIRE_SERVICES=1): {e}");
            }
            eprintln!("SKIPPED: no redis-server at {URL}: {e}");
            None
        }
    }
}

#[tokio::test]
async fn seen_set_robots_and_counters() {
    let Some(s) = state(100, 1, 60_000).await else {
        return;
    };
    assert!(s.seen_add("http://a/1").await.unwrap());
    assert!(!s.seen_add("http://a/1").await.unwrap());
    assert!(s.seen_add("http://a/2").await.unwrap());
    let e = RobotsEntry {
        access: RobotsAccess::Body(b"User-agent: *\nDisallow: /x".to_vec()),
        fetched_at_ms: 1,
        tdmrep: None,
    };
    s.robots_put("a", e.clone(), 150).await.unwrap();
    assert_eq!(s.robots_get("a", 0).await.unwrap(), Some(e));
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    assert_eq!(s.robots_get("a", 0).await.unwrap(), None, "expired");
    assert_eq!(s.incr("pages", 2).await.unwrap(), 2);
    assert_eq!(s.incr("pages", 3).await.unwrap(), 5);
    assert_eq!(s.counters().await.unwrap()["pages"], 5);
    s.clear().await.unwrap();
}

#[tokio::test]
async fn hosts_are_claimed_by_priority_and_politeness() {
    let Some(s) = state(100, 1, 60_000).await else {
        return;
    };
    s.enqueue(job("a", "/low", 5)).await.unwrap();
    s.enqueue(job("a", "/high", 1)).await.unwrap();
    s.enqueue(job("b", "/only", 3)).await.unwrap();
    assert_eq!(s.queued().await.unwrap(), 3);
    let mut got = Vec::new();
    while let Some(c) = s.claim(1_000).await.unwrap() {
        got.push(c.job.url);
    }
    // One slot per host: a's best job and b's job; a's second waits for the release.
    got.sort();
    assert_eq!(got, vec!["http://a/high", "http://b/only"]);
    s.release("a", None, 5_000).await.unwrap();
    assert_eq!(s.next_ready_ms().await.unwrap(), Some(5_000));
    assert!(
        s.claim(4_999).await.unwrap().is_none(),
        "not before next_allowed"
    );
    assert_eq!(
        s.claim(5_000).await.unwrap().unwrap().job.url,
        "http://a/low"
    );
    assert_eq!(s.queued().await.unwrap(), 0);
    s.clear().await.unwrap();
}

#[tokio::test]
async fn a_full_frontier_evicts_the_lowest_priority() {
    let Some(s) = state(3, 1, 60_000).await else {
        return;
    };
    for (p, path) in [(5, "/a"), (6, "/b"), (7, "/c")] {
        assert_eq!(
            s.enqueue(job("h", path, p)).await.unwrap(),
            Enqueued::Accepted
        );
    }
    assert_eq!(
        s.enqueue(job("h", "/worse", 9)).await.unwrap(),
        Enqueued::Rejected
    );
    assert_eq!(
        s.enqueue(job("g", "/better", 1)).await.unwrap(),
        Enqueued::AcceptedEvicting(1)
    );
    assert_eq!(s.queued().await.unwrap(), 3);
    // Recorded, not only counted: the one turned away, then the one evicted.
    assert_eq!(
        s.dropped(0, 10).await.unwrap(),
        ["http://h/worse", "http://h/c"]
    );
    let mut got = HashSet::new();
    for t in [0, 10_000, 20_000, 30_000] {
        while let Some(c) = s.claim(t).await.unwrap() {
            got.insert(c.job.url.clone());
            s.release(&c.job.host, c.job.claim.as_deref(), t + 1)
                .await
                .unwrap();
        }
    }
    assert!(
        !got.contains("http://h/c"),
        "the worst job was evicted: {got:?}"
    );
    assert!(got.contains("http://g/better"));
    s.clear().await.unwrap();
}

#[tokio::test]
async fn a_claim_held_by_a_dead_fetcher_expires() {
    let Some(s) = state(100, 1, 500).await else {
        return;
    };
    s.enqueue(job("a", "/1", 1)).await.unwrap();
    s.enqueue(job("a", "/2", 2)).await.unwrap();
    assert!(s.claim(1_000).await.unwrap().is_some());
    // The fetcher dies: no release. Until the claim expires the host stays busy...
    assert!(s.claim(1_400).await.unwrap().is_none());
    // ...then its slot comes back, and the job it held goes back in the queue (it was
    // never fetched): nothing is lost.
    assert_eq!(s.claim(1_600).await.unwrap().unwrap().job.url, "http://a/1");
    s.release("a", None, 0).await.unwrap();
    assert_eq!(s.claim(1_700).await.unwrap().unwrap().job.url, "http://a/2");
    s.release("a", None, 0).await.unwrap();
    // Released claims do not come back.
    assert!(s.claim(10_000).await.unwrap().is_none());
    assert_eq!(s.queued().await.unwrap(), 0);
    s.clear().await.unwrap();
}

/// Two fetches in flight to one host (two slots): the one that ends first releases its own
/// claim, not the host's oldest, so the slow one's claim stays held and does not expire
/// into a second fetch of its job.
#[tokio::test]
async fn a_release_frees_the_callers_claim() {
    let Some(s) = state(100, 2, 500).await else {
        return;
    };
    s.enqueue(job("a", "/slow", 1)).await.unwrap();
    s.enqueue(job("a", "/fast", 2)).await.unwrap();
    let slow = s.claim(1_000).await.unwrap().unwrap().job;
    let fast = s.claim(1_000).await.unwrap().unwrap().job;
    assert_eq!(
        (slow.url.as_str(), fast.url.as_str()),
        ("http://a/slow", "http://a/fast")
    );
    assert_ne!(slow.claim, fast.claim);
    s.release("a", fast.claim.as_deref(), 0).await.unwrap();
    assert!(
        s.hold("a", slow.claim.as_deref().unwrap(), 1_200)
            .await
            .unwrap()
    );
    assert!(
        !s.hold("a", fast.claim.as_deref().unwrap(), 1_200)
            .await
            .unwrap(),
        "a released claim is not held"
    );
    // Past the first TTL, yet renewed at 1,200: nothing expires, nothing is queued again.
    assert!(s.claim(1_600).await.unwrap().is_none());
    assert_eq!(s.queued().await.unwrap(), 0);
    s.release("a", slow.claim.as_deref(), 0).await.unwrap();
    assert_eq!(s.claims().await.unwrap(), 0);
    s.clear().await.unwrap();
}

/// A job that waited in the fetch stream past its claim's TTL: the expiry queued it again,
/// and it is claimed anew under another id; the stale copy cannot be held, so it is not
/// fetched a second time, and its late release frees nobody else's slot.
#[tokio::test]
async fn an_expired_claim_cannot_be_held_or_released_twice() {
    let Some(s) = state(100, 1, 500).await else {
        return;
    };
    s.enqueue(job("a", "/1", 1)).await.unwrap();
    let stale = s.claim(1_000).await.unwrap().unwrap().job;
    let fresh = s.claim(1_600).await.unwrap().unwrap().job;
    assert_eq!(fresh.url, stale.url, "queued again and claimed again");
    assert_ne!(fresh.claim, stale.claim);
    assert!(
        !s.hold("a", stale.claim.as_deref().unwrap(), 1_700)
            .await
            .unwrap()
    );
    assert!(
        s.hold("a", fresh.claim.as_deref().unwrap(), 1_700)
            .await
            .unwrap()
    );
    s.release("a", stale.claim.as_deref(), 0).await.unwrap();
    assert_eq!(
        s.claims().await.unwrap(),
        1,
        "the fresh claim is still held"
    );
    s.enqueue(job("a", "/2", 2)).await.unwrap();
    assert!(
        s.claim(1_800).await.unwrap().is_none(),
        "one slot, still taken by the fresh claim"
    );
    s.release("a", fresh.claim.as_deref(), 0).await.unwrap();
    assert_eq!(s.claim(1_900).await.unwrap().unwrap().job.url, "http://a/2");
    s.clear().await.unwrap();
}

#[tokio::test]
async fn concurrent_claimers_never_exceed_the_per_host_slots() {
    let Some(s) = state(10_000, 2, 60_000).await else {
        return;
    };
    for h in 0..5 {
        for p in 0..20 {
            s.enqueue(job(&format!("h{h}"), &format!("/{p}"), p))
                .await
                .unwrap();
        }
    }
    let s = Arc::new(s);
    let in_flight = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        String,
        u32,
    >::new()));
    let max_seen = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let claimed = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (s, f, m, c) = (
            s.clone(),
            in_flight.clone(),
            max_seen.clone(),
            claimed.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                match s.claim(0).await.unwrap() {
                    Some(cl) => {
                        let n = {
                            let mut g = f.lock().unwrap();
                            let e = g.entry(cl.job.host.clone()).or_default();
                            *e += 1;
                            *e
                        };
                        m.fetch_max(n, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                        *f.lock().unwrap().get_mut(&cl.job.host).unwrap() -= 1;
                        c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        s.release(&cl.job.host, cl.job.claim.as_deref(), 0)
                            .await
                            .unwrap();
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
    assert_eq!(claimed.load(std::sync::atomic::Ordering::SeqCst), 100);
    assert!(max_seen.load(std::sync::atomic::Ordering::SeqCst) <= 2);
    s.clear().await.unwrap();
}

/// The batched steps the frontier admits a page's links with give what the same steps one
/// at a time give: the seen-set (a key repeated in a batch is new once), the cap's
/// evictions and rejections inside one script call, the counters' running values, and the
/// queues the claims then read.
#[tokio::test]
async fn batched_steps_match_one_at_a_time() {
    let (Some(many), Some(one)) = (state(6, 1, 60_000).await, state(6, 1, 60_000).await) else {
        return;
    };
    let items = vec![
        ("http://a/1".to_string(), Some(job("a", "/1", 1))),
        ("http://a/2".to_string(), None),
        ("http://a/1".to_string(), Some(job("a", "/1", 1))),
        ("http://b/1".to_string(), Some(job("b", "/1", 1))),
    ];
    assert_eq!(
        many.admit_many(items).await.unwrap(),
        vec![
            Admitted::Queued(Enqueued::Accepted),
            Admitted::Marked,
            Admitted::Seen,
            Admitted::Queued(Enqueued::Accepted),
        ]
    );
    let keys: Vec<String> = ["http://a/1", "http://a/2", "http://c/9"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        many.seen_contains_many(&keys).await.unwrap(),
        vec![true, true, false]
    );
    assert_eq!(many.queued().await.unwrap(), 2);
    many.clear().await.unwrap();

    // Ten jobs into a cap of six, in an order that evicts inside the batch and rejects
    // the ones that rank below a full frontier.
    let jobs: Vec<FetchJob> = (0..10)
        .map(|i| {
            job(
                ["a", "b", "c"][i % 3],
                &format!("/{i}"),
                [5, 9, 1, 7, 3, 8, 2, 6, 9, 0][i],
            )
        })
        .collect();
    let mut singly = Vec::new();
    for j in jobs.clone() {
        assert!(one.seen_add(&j.url).await.unwrap());
        singly.push(Admitted::Queued(one.enqueue(j).await.unwrap()));
    }
    let batched = many
        .admit_many(jobs.into_iter().map(|j| (j.url.clone(), Some(j))).collect())
        .await
        .unwrap();
    assert_eq!(batched, singly);
    assert!(
        batched.contains(&Admitted::Queued(Enqueued::Rejected)),
        "{batched:?}"
    );
    assert!(
        batched
            .iter()
            .any(|e| matches!(e, Admitted::Queued(Enqueued::AcceptedEvicting(_)))),
        "{batched:?}"
    );
    assert_eq!(many.queued().await.unwrap(), 6);
    let mut claimed = (Vec::new(), Vec::new());
    for (s, into) in [(&many, &mut claimed.0), (&one, &mut claimed.1)] {
        while let Some(c) = s.claim(1_000).await.unwrap() {
            s.release(&c.job.host, c.job.claim.as_deref(), 0)
                .await
                .unwrap();
            into.push(c.job.url);
        }
    }
    assert_eq!(claimed.0.len(), 6);
    assert_eq!(claimed.0, claimed.1);

    let adds = vec![
        ("x".to_string(), 2),
        ("y".to_string(), 1),
        ("x".to_string(), 3),
    ];
    assert_eq!(many.incr_many(&adds).await.unwrap(), vec![2, 1, 5]);
    assert_eq!(many.incr_many(&[]).await.unwrap(), Vec::<i64>::new());
    assert_eq!(many.admit_many(Vec::new()).await.unwrap(), Vec::new());
    many.clear().await.unwrap();
    one.clear().await.unwrap();
}

/// What a queued URL costs in Redis, from `MEMORY USAGE` of the crawl's own keys (other
/// tests share the server): one sorted-set member per URL, under 150 bytes for URLs of
/// the synthetic web's shape (31 bytes), where the whole job's JSON in a hash beside two
/// sorted sets of sequence numbers took 690.
#[tokio::test]
async fn a_queued_url_costs_one_compact_member() {
    let Some(s) = state(1_000_000, 1, 60_000).await else {
        return;
    };
    let n = 20_000;
    let jobs: Vec<_> = (0..n)
        .map(|i| {
            let host = format!("127.1.0.{}:18400", 1 + i % 20);
            let mut j = job(
                &host,
                &format!("/p/{}", 100_000 + i),
                3_000_000 + (i % 5) as i64,
            );
            j.depth = 3;
            (j.url.clone(), Some(j))
        })
        .collect();
    s.admit_many(jobs).await.unwrap();
    assert_eq!(s.queued().await.unwrap(), n);
    let client = redis::Client::open(URL).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    // The crawl-wide keys, then each host's queue, which must exist.
    let mut keys: Vec<(String, bool)> = ["worst", "queued", "ready"]
        .iter()
        .map(|k| (format!("{}{k}", s.prefix()), false))
        .collect();
    keys.extend((1..=20).map(|h| (format!("{}q:127.1.0.{h}:18400", s.prefix()), true)));
    let mut bytes = 0u64;
    for (key, required) in keys {
        let b: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(b.is_some() || !required, "each host has a queue: {key}");
        bytes += b.unwrap_or(0);
    }
    let per_url = bytes as f64 / n as f64;
    eprintln!("{per_url:.1} bytes per queued URL");
    assert!(per_url < 150.0, "{per_url:.1} bytes per queued URL");
    // The jobs come back whole from their compact members.
    let c = s.claim(u64::MAX / 2).await.unwrap().unwrap();
    assert!(c.job.url.starts_with("http://127.1.0.") && c.job.depth == 3);
    assert!((3_000_000..3_000_005).contains(&c.job.priority));
    let i: i64 = c.job.url.rsplit('/').next().unwrap().parse().unwrap();
    assert_eq!(
        (i - 100_000) % 5,
        c.job.priority - 3_000_000,
        "{}",
        c.job.url
    );
    s.clear().await.unwrap();
}

/// A claim lives for its short lease while its holder renews it, and for the whole claim
/// lifetime once its job is handed to the fetch stream: a frontier or fetcher killed
/// holding it frees the host within the lease, a job waiting in the stream keeps it.
#[tokio::test]
async fn a_claim_lives_for_its_lease_until_its_job_is_handed_over() {
    let Some(s) = state(100, 1, 60_000).await else {
        return;
    };
    let s = s.with_lease(500);
    assert_eq!(
        s.renew_every(),
        Some(std::time::Duration::from_millis(200)),
        "a third of the lease, at least 200 ms"
    );
    s.enqueue(job("a", "/1", 1)).await.unwrap();
    s.enqueue(job("b", "/1", 1)).await.unwrap();
    let dead = s.claim(1_000).await.unwrap().unwrap();
    let handed = s.claim(1_000).await.unwrap().unwrap();
    let (dh, hh) = (dead.job.host.clone(), handed.job.host.clone());
    assert!(
        s.handed(&hh, handed.job.claim.as_deref().unwrap(), 1_100)
            .await
            .unwrap()
    );
    // Past the lease: the dead holder's host is free again and its job back in the queue;
    // the handed job's claim still holds.
    let again = s.claim(1_600).await.unwrap().unwrap();
    assert_eq!(again.job.host, dh);
    assert_ne!(again.job.claim, dead.job.claim, "a new claim");
    assert!(
        !s.hold(&dh, dead.job.claim.as_deref().unwrap(), 1_600)
            .await
            .unwrap(),
        "the dead holder's claim is gone"
    );
    assert!(
        s.hold(&hh, handed.job.claim.as_deref().unwrap(), 30_000)
            .await
            .unwrap(),
        "a handed job's claim lives for the claim lifetime"
    );
    // Taken by a fetcher (held), the claim is on the lease again: a fetcher that dies
    // with it frees the host within the lease.
    assert!(
        !s.hold(&hh, handed.job.claim.as_deref().unwrap(), 30_600)
            .await
            .unwrap(),
        "held at 30 s under a lease of 0.5 s, gone at 30.6 s"
    );
    s.clear().await.unwrap();
}

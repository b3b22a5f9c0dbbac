//! A re-crawl on the cluster: the service binaries over the real nats-server and
//! redis-server crawl the changing site once, then again with `trawl submit --since`. The
//! second crawl asks with the validators its indexers kept in Redis, reports exactly the
//! real changes, archives revisits, changes only the changed pages' index rows, and its
//! notifier delivers each event from `trawl.changed` to a webhook, signed, acked after the
//! 2xx, retried with the same id after a 500; what cannot be delivered ends in the
//! dead-letter stream.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::changing::{
    SECRET, check_corpus, check_deliveries, check_revisits, check_rows, check_validators,
    events_by_name, first_version, index_rows, receiver, second_version, versioned_site,
};
use support::services::{NAMES, Services, free_port, service_bins, spawn, submit_wait};
use trawl_cluster::jetstream::QueueConfig;
use trawl_cluster::redis_history::RedisHistory;
use trawl_core::change::ChangeEvent;
use trawl_core::queue::Queue;
use trawl_core::settings::ClusterSettings;
use trawl_core::state::{MemoryState, State, WorkTracker};

/// Every line of the files in `dir` whose names start with `prefix` (one per replica).
fn lines(dir: &Path, prefix: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(prefix) && name.ends_with(".jsonl") {
            for l in std::fs::read_to_string(&p).unwrap().lines() {
                out.push(serde_json::from_str(l).unwrap());
            }
        }
    }
    out
}

fn stop(services: &mut Services) {
    for (_, c) in &mut services.0 {
        let _ = c.kill();
        let _ = c.wait();
    }
    services.0.clear();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recrawl_on_the_cluster_reports_what_changed_through_the_notifier() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = versioned_site().await;
    let seed = site.url("/changing/a");
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (one, two) = (format!("r{}", &tag[..10]), format!("s{}", &tag[..10]));
    let prefix = format!("p{}", &tag[..10]);
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let env = |crawl: &str, out: &Path| -> Vec<(&'static str, String)> {
        vec![
            ("TRAWL_CRAWL", crawl.to_string()),
            ("TRAWL_QUEUE_PREFIX", prefix.clone()),
            ("TRAWL_OUT", out.display().to_string()),
            ("TRAWL_INDEX_URI", index.display().to_string()),
            ("TRAWL_EMBED", "false".into()),
            ("TRAWL_WEBHOOK_SECRET", SECRET.into()),
        ]
    };
    let start = |crawl: &str, out: &Path, stages: &[usize]| {
        let env = env(crawl, out);
        Services(
            stages
                .iter()
                .map(|s| (NAMES[*s].to_string(), spawn(&paths[*s], &env, free_port())))
                .collect(),
        )
    };
    let submit = |crawl: &str, extra: &[&str]| {
        let mut args = vec![seed.as_str(), "--allow-private", "--delay", "0"];
        args.extend_from_slice(extra);
        submit_wait(
            &paths[0],
            &args,
            &[("TRAWL_CRAWL", crawl), ("TRAWL_QUEUE_PREFIX", &prefix)],
        )
    };

    // The baseline: silent, every page kept in Redis for the next crawl.
    first_version(&site);
    let out1 = tmp.path().join("one");
    let mut services = start(&one, &out1, &[1, 2, 3, 4]);
    let report = submit(&one, &[]).await.unwrap();
    assert_eq!(report["drained"], true);
    stop(&mut services);
    assert_eq!(lines(&out1, "pages-").len(), 7);
    assert!(lines(&out1, "changes-").is_empty(), "a silent baseline");
    let kept = RedisHistory::connect("redis://127.0.0.1:6379", &one)
        .await
        .unwrap();
    assert_eq!(kept.len().await.unwrap(), 7);
    let bytes = kept.memory_bytes().await.unwrap();
    eprintln!("Redis keeps {} bytes a page for re-crawls", bytes / 7);
    let rows_before = index_rows(&index.display().to_string()).await;
    let requests_before = site.log().len();

    // The re-crawl, with a notifier and a receiver that refuses its first delivery.
    second_version(&site);
    let (hook, received) = receiver().await;
    let out2 = tmp.path().join("two");
    let mut services = start(&two, &out2, &[1, 2, 3, 4, 5]);
    let report = submit(
        &two,
        &[
            "--since",
            &one,
            "--webhook",
            &hook,
            "--webhook-backoff-ms",
            "200",
        ],
    )
    .await
    .unwrap();
    assert_eq!(report["drained"], true);
    assert_eq!(report["dead_letters"], 0);

    let events = lines(&out2, "changes-");
    events_by_name(&events);
    check_corpus(&lines(&out2, "pages-"));
    check_validators(&site.log()[requests_before..]);
    check_revisits(&out1.join("warc"), &out2.join("warc"));
    check_rows(
        &rows_before,
        &index_rows(&index.display().to_string()).await,
    );

    // The notifier: every event delivered (the first one twice), each acked once the
    // receiver took it, so the changed hop ends empty.
    let deadline = Instant::now() + Duration::from_secs(30);
    while received.lock().unwrap().len() < events.len() + 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check_deliveries(&received.lock().unwrap(), events.len(), SECRET);
    let cluster = ClusterSettings {
        queue_prefix: prefix.clone(),
        ..Default::default()
    };
    let mut acked = false;
    for _ in 0..50 {
        let s = trawl::cluster::status(&cluster, &two).await.unwrap();
        if s.pending["changed"] == 0 {
            acked = true;
            assert_eq!(
                s.counters["notifier.delivered"],
                events.len() as i64,
                "{:?}",
                s.counters
            );
            assert_eq!(s.counters["notifier.attempts"], events.len() as i64 + 1);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(acked, "the delivered events are acked");
    stop(&mut services);
    support::cleanup(&prefix, &one, Some("redis://127.0.0.1:6379")).await;
    support::cleanup(&prefix, &two, Some("redis://127.0.0.1:6379")).await;
}

/// A receiver that answers `status` to every delivery; returns its URL and the
/// `webhook-id` of every request it got.
async fn answering(status: u16) -> (String, Arc<Mutex<Vec<String>>>) {
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let g = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let g = g.clone();
            async move {
                let id = headers.get("webhook-id").and_then(|v| v.to_str().ok());
                g.lock().unwrap().push(id.unwrap_or("").to_string());
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, got)
}

fn event(id: &str) -> ChangeEvent {
    serde_json::from_value(serde_json::json!({
        "v": 1, "id": id, "type": "page.changed", "crawl": "c", "since": "b",
        "at": "2026-12-01T00:00:00Z", "url": "http://a.test/x", "final_url": "http://a.test/x",
        "status": "changed", "http_status": 200, "linked": true
    }))
    .unwrap()
}

/// The notifier over a real `changed` stream: a receiver that keeps failing gets each
/// event `tries` times (the same id each time), then the event is in the dead-letter
/// stream; a 410 dead-letters the event and every later one without sending them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeliverable_events_end_in_the_dead_letters() {
    if !support::services_up() {
        return;
    }
    let client = async_nats::connect("nats://127.0.0.1:4222").await.unwrap();
    for (status, sent_per_event) in [(500u16, 2usize), (410, 0)] {
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let cluster = ClusterSettings {
            queue_prefix: format!("n{}", &tag[..10]),
            ..Default::default()
        };
        let q = trawl_cluster::service::queue::<ChangeEvent>(
            &client,
            &cluster,
            trawl_core::pipeline::Hop::Changed,
        )
        .await
        .unwrap();
        let ids = ["evt_1", "evt_2", "evt_3"];
        for id in ids {
            q.publish(event(id)).await.unwrap();
        }
        // An event of a crawl that ran without a notifier is not this crawl's to send.
        let mut other = event("evt_other");
        other.crawl = "another".into();
        q.publish(other).await.unwrap();
        let (url, got) = answering(status).await;
        let endpoint = trawl_notifier::Endpoint {
            url,
            secret: None,
            tries: 2,
            backoff: Duration::from_millis(50),
        };
        let state = Arc::new(MemoryState::new(10, 1, WorkTracker::default()));
        let (trigger, stop) = trawl_core::pipeline::shutdown();
        let run = tokio::spawn(trawl_notifier::run_deliveries(
            endpoint,
            "c",
            q.clone(),
            state.clone(),
            stop,
        ));
        let cfg = QueueConfig::from_settings(&cluster, trawl_core::pipeline::Hop::Changed);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut dead = Vec::new();
        while dead.len() < ids.len() + 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            dead = trawl_cluster::jetstream::dead_letters(&client, &cfg, 10)
                .await
                .unwrap();
        }
        trigger.trigger();
        run.await.unwrap().unwrap();
        let mut dead_ids: Vec<String> = dead
            .iter()
            .map(|d| serde_json::from_str::<ChangeEvent>(&d.payload).unwrap().id)
            .collect();
        dead_ids.sort();
        assert_eq!(
            dead_ids,
            ["evt_1", "evt_2", "evt_3", "evt_other"],
            "every event dead-lettered after {status}"
        );
        let got = got.lock().unwrap().clone();
        assert!(!got.iter().any(|g| g == "evt_other"), "{got:?}");
        if status == 410 {
            assert_eq!(got, ["evt_1"], "nothing is sent after a 410");
        } else {
            for id in ids {
                let n = got.iter().filter(|g| *g == id).count();
                assert_eq!(n, sent_per_event, "{id} tried {n} times: {got:?}");
            }
        }
        assert_eq!(q.len().await.unwrap(), 0, "nothing left on the stream");
        let counters = state.counters().await.unwrap();
        assert_eq!(counters["notifier.dead_lettered"], 3);
        assert_eq!(counters.get("notifier.delivered"), None);
        support::cleanup(&cluster.queue_prefix, "none", None).await;
    }
}

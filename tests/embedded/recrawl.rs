//! Re-crawls (`--since`): a site whose pages change between two crawls. The second crawl
//! asks with the first one's validators, reports exactly the real changes (a sentence in
//! the main text; not a footer timestamp, not a server without validators), archives
//! unchanged pages as WARC revisits, changes only the changed pages' index rows, and
//! delivers each change to a webhook, signed, retried with the same id after a 500.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::changing::{
    SECRET, check_corpus, check_deliveries, check_revisits, check_rows, check_validators,
    events_by_name, index_rows, receiver, second_version, versioned_site,
};
use support::{options, pages, report};

/// Crawl options with the full-text index (no model needed).
fn indexed(seeds: &[String], out: &Path) -> trawl_runtime::CrawlPlan {
    let mut o = options(seeds, out);
    o.index.no_index = false;
    o.index.settings.embed = false;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recrawl_reports_exactly_what_changed_and_touches_only_that() {
    let site = versioned_site().await;
    let tmp = tempfile::tempdir().unwrap();
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    let seeds = vec![site.url("/changing/a")];
    trawl::crawl(indexed(&seeds, &one)).await.unwrap();
    assert!(
        !one.join("changes.jsonl").exists(),
        "the first crawl is a silent baseline"
    );
    let first = pages(&one);
    assert_eq!(first.len(), 7);
    let index = one.join("index").to_string_lossy().to_string();
    let rows_before = index_rows(&index).await;
    let requests_before = site.log().len();

    second_version(&site);
    let (hook, received) = receiver().await;
    let mut o = indexed(&seeds, &two);
    o.since = Some(one.clone());
    o.crawl.webhook_url = Some(hook);
    o.crawl.webhook_backoff_ms = 100;
    o.crawl.webhook_wait_s = 20;
    o.webhook_secret = Some(SECRET.into());
    trawl::crawl(o).await.unwrap();

    // Exactly the real changes.
    let text = std::fs::read_to_string(two.join("changes.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    events_by_name(&events);

    // The corpus: every page, unchanged ones carried forward with how they compare.
    check_corpus(&pages(&two));
    let r = report(&two);
    assert_eq!(r["changes"]["same"], 5, "{r}");
    assert_eq!(
        (
            r["changes"]["changed"].as_i64(),
            r["changes"]["new"].as_i64(),
            r["changes"]["removed"].as_i64()
        ),
        (Some(1), Some(1), Some(1))
    );

    // The server saw the validators on every request for a known page, and sent 304s.
    check_validators(&site.log()[requests_before..]);

    // The WARC: revisits pointing at the first crawl's records, full responses for b and f.
    check_revisits(&one.join("warc"), &two.join("warc"));

    // The index: b's rows carry the new sentence, d's are gone, the others are untouched.
    check_rows(&rows_before, &index_rows(&index).await);
    assert_eq!(
        r["index"]["pages"], 2,
        "only the new and the changed page were indexed: {r}"
    );
    assert_eq!(r["index"]["pages_removed"], 1);

    // The webhook: each event signed, the first retried with its id after the 500.
    check_deliveries(&received.lock().unwrap(), events.len(), SECRET);
    assert_eq!(r["webhook"]["delivered"], events.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_rounds_request_only_what_is_due() {
    let site = versioned_site().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("watch");
    let mut crawl = indexed(&[site.url("/changing/a")], &dir);
    // A sitemap lists a; before round 3 it says e changed.
    crawl.targets.sitemaps = vec![site.url("/changing/sitemap")];
    let a = site.url("/changing/a");
    site.set_page("sitemap", Some(&sitemap(&[(&a, "2026-01-01")])), true);
    let args = trawl_runtime::watch::WatchPlan {
        crawl,
        every: std::time::Duration::ZERO,
        rounds: 1,
        keep: 2,
    };
    // Round 1: the baseline.
    trawl_runtime::watch::watch(args.clone()).await.unwrap();
    assert!(dir.join("gen-00001/pages.jsonl").exists());
    assert!(dir.join("index").exists(), "one index for every round");

    // Round 2: every page is due (the baseline set no schedule): asked with validators.
    second_version(&site);
    let before = site.log().len();
    trawl_runtime::watch::watch(args.clone()).await.unwrap();
    let round2 = &site.log()[before..];
    assert!(round2.iter().any(|e| e.status == 304), "{round2:?}");
    let events = std::fs::read_to_string(dir.join("gen-00002/changes.jsonl")).unwrap();
    assert_eq!(
        events.lines().count(),
        3,
        "b changed, d removed, f new: {events}"
    );
    let p2 = pages(&dir.join("gen-00002"));
    let next_due = support::page(&p2, "/changing/c")["change"]["next_due"]
        .as_str()
        .unwrap()
        .to_string();

    // Round 3, right after: no page is due by its interval, but the sitemap (always
    // fetched) says e changed since round 2 fetched it: only e is asked for.
    let now = chrono::Utc::now().to_rfc3339();
    let e_url = site.url("/changing/e");
    site.set_page(
        "sitemap",
        Some(&sitemap(&[(&a, "2026-01-01"), (&e_url, &now)])),
        true,
    );
    let before = site.log().len();
    trawl_runtime::watch::watch(args.clone()).await.unwrap();
    let round3: Vec<String> = site.log()[before..]
        .iter()
        .filter(|e| e.target.starts_with("/changing/"))
        .map(|e| e.target.clone())
        .collect();
    assert_eq!(
        round3,
        ["/changing/sitemap", "/changing/e"],
        "only the sitemap and the page it dates after round 2"
    );
    let p3 = pages(&dir.join("gen-00003"));
    assert_eq!(
        p3.len(),
        p2.len() - 1,
        "every page but the removed one carried forward"
    );
    for p in &p3 {
        let url = p["url"].as_str().unwrap();
        if url.ends_with("/changing/e") {
            assert_eq!(p["change"]["reason"], "not_modified", "{p}");
        } else if !url.ends_with("/changing/sitemap") {
            assert_eq!(p["change"]["reason"], "not_due", "{p}");
        }
    }
    let c = support::page(&p3, "/changing/c");
    assert_eq!(
        c["change"]["next_due"],
        next_due.as_str(),
        "the schedule stands"
    );
    let e = support::page(&p3, "/changing/e");
    assert!(e["text"].as_str().unwrap().contains("echo guide"));
    let events = std::fs::read_to_string(dir.join("gen-00003/changes.jsonl")).unwrap_or_default();
    assert_eq!(events, "", "nothing changed");
    assert!(
        !dir.join("gen-00001").exists(),
        "only the newest 2 rounds are kept"
    );
    assert!(
        !trawl_fetcher::warcout::list_warc_files(&dir.join("warc-gen-00001"))
            .unwrap()
            .is_empty(),
        "but the first round's WARC files, which later revisits refer to"
    );
}

/// A sitemap of `(url, lastmod)` entries.
fn sitemap(entries: &[(&str, &str)]) -> String {
    let urls: String = entries
        .iter()
        .map(|(u, m)| format!("<url><loc>{u}</loc><lastmod>{m}</lastmod></url>"))
        .collect();
    format!(
        r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>"#
    )
}

/// A receiver that takes each delivery and never answers (the client times out).
async fn hanging_receiver() -> (String, Arc<AtomicUsize>) {
    let got = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let g = g.clone();
            async move {
                g.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(3600)).await;
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, got)
}

/// A re-crawl killed (SIGKILL) while its deliveries wait on a receiver that does not
/// answer: resumed, it delivers every event of `changes.jsonl` to the webhook, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recrawl_killed_mid_delivery_delivers_every_event_once_resumed() {
    let Some(trawl) = support::bin("trawl") else {
        eprintln!("SKIPPED: the trawl binary is not built (cargo test --workspace builds it)");
        return;
    };
    let site = versioned_site().await;
    let tmp = tempfile::tempdir().unwrap();
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    let seed = site.url("/changing/a");
    trawl::crawl(options(std::slice::from_ref(&seed), &one))
        .await
        .unwrap();
    second_version(&site);
    let (stuck, taken) = hanging_receiver().await;
    let args = |hook: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "crawl",
            seed.as_str(),
            "--out",
            two.to_str().unwrap(),
            "--since",
            one.to_str().unwrap(),
            "--webhook",
            hook,
            "--allow-private",
            "--delay",
            "0",
            "--no-index",
            "--progress",
            "none",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let mut child = Command::new(&trawl)
        .args(args(&stuck, &[]))
        .env("TRAWL_WEBHOOK_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once every event is written (and committed: the store commits every 100 ms)
    // and the first delivery hangs: only the deliveries are left to do.
    let written = || {
        std::fs::read_to_string(two.join("changes.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while (taken.load(Ordering::SeqCst) == 0 || written() < 3) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(taken.load(Ordering::SeqCst) > 0, "a delivery was under way");
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.kill().unwrap();
    child.wait().unwrap();

    let (hook, received) = receiver().await;
    let done = Command::new(&trawl)
        .args(args(&hook, &["--resume", "--webhook-backoff-ms", "100"]))
        .env("TRAWL_WEBHOOK_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let events: Vec<serde_json::Value> = std::fs::read_to_string(two.join("changes.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    events_by_name(&events);
    // The receiver refuses its first delivery once: every event, signed, one retried.
    check_deliveries(&received.lock().unwrap(), events.len(), SECRET);
    assert_eq!(report(&two)["webhook"]["delivered"], events.len() as u64);
}

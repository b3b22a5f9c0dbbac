//! Re-crawls (`--since`): a site whose pages change between two crawls. The second crawl
//! asks with the first one's validators, reports exactly the real changes (a sentence in
//! the main text; not a footer timestamp, not a server without validators), archives
//! unchanged pages as WARC revisits, changes only the changed pages' index rows, and
//! delivers each change to a webhook, signed, retried with the same id after a 500.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use hmac::{Hmac, KeyInit, Mac};
use support::{options, pages, report};
use trawl_testsite::{Robots, SiteConfig, TestSite};

fn page(title: &str, main: &str, links: &[&str], footer: &str) -> String {
    let nav: String = links
        .iter()
        .map(|l| format!("<li><a href=\"/changing/{l}\">{l}</a></li>"))
        .collect();
    format!(
        "<!doctype html><html><head><title>{title}</title></head><body><nav><ul>{nav}</ul></nav>\
         <main><h1>{title}</h1><h2>Usage</h2><p>{main}</p></main><footer>{footer}</footer></body></html>"
    )
}

fn para(topic: &str) -> String {
    (0..12)
        .map(|i| format!("The {topic} guide explains step {i} of configuring {topic} in detail."))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first version of the site: a links to b, c, d, e, g, h.
fn first_version(site: &TestSite) {
    let links = ["b", "c", "d", "e", "g", "h"];
    site.set_page("a", Some(&page("A", &para("alpha"), &links, "x")), true);
    site.set_page("b", Some(&page("B", &para("bravo"), &[], "x")), true);
    site.set_page(
        "c",
        Some(&page(
            "C",
            &para("charlie"),
            &[],
            "Updated 2026-12-01 10:00",
        )),
        true,
    );
    site.set_page("d", Some(&page("D", &para("delta"), &[], "x")), true);
    site.set_page("e", Some(&page("E", &para("echo"), &[], "x")), true);
    site.set_page("g", Some(&page("G", &para("golf"), &[], "x")), true);
    site.set_page("h", Some(&page("H", &para("hotel"), &[], "x")), false);
}

/// The second: b has a new sentence, c only a new footer timestamp, d is gone, f is new
/// (linked from a), g is no longer linked, h (no validators) is unchanged.
fn second_version(site: &TestSite) {
    let links = ["b", "c", "d", "e", "f", "h"];
    site.set_page("a", Some(&page("A", &para("alpha"), &links, "x")), true);
    let b = format!("{} Version 2 adds the frobnicate option.", para("bravo"));
    site.set_page("b", Some(&page("B", &b, &[], "x")), true);
    site.set_page(
        "c",
        Some(&page(
            "C",
            &para("charlie"),
            &[],
            "Updated 2026-12-02 09:30",
        )),
        true,
    );
    site.set_page("d", None, true);
    site.set_page("f", Some(&page("F", &para("foxtrot"), &[], "x")), true);
}

/// Every request the webhook receiver got: headers and body.
type Received = Arc<Mutex<Vec<(BTreeMap<String, String>, Vec<u8>)>>>;

/// A receiver on loopback that answers 500 to its first request and 204 after.
async fn receiver() -> (String, Received) {
    use axum::http::StatusCode;
    let got: Received = Arc::default();
    let g = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let g = g.clone();
                async move {
                    let h = headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
                        .collect();
                    let mut g = g.lock().unwrap();
                    g.push((h, body.to_vec()));
                    if g.len() == 1 {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        StatusCode::NO_CONTENT
                    }
                }
            },
        ),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, got)
}

/// WARC records of the files in `dir`: (type, target URI, the headers a revisit needs).
fn warc_records(dir: &Path) -> Vec<(String, String, BTreeMap<String, String>)> {
    use warc::WarcHeader;
    let mut out = Vec::new();
    for f in trawl_fetcher::warcout::list_warc_files(dir).unwrap() {
        for rec in warc::WarcReader::from_path_gzip(&f).unwrap().iter_records() {
            let rec = rec.unwrap();
            let mut h = BTreeMap::new();
            h.insert("warc-record-id".to_string(), rec.warc_id().to_string());
            let wanted = [
                ("warc-date", WarcHeader::Date),
                ("warc-profile", WarcHeader::Profile),
                ("warc-refers-to", WarcHeader::RefersTo),
                ("warc-payload-digest", WarcHeader::PayloadDigest),
                (
                    "warc-refers-to-date",
                    WarcHeader::Unknown("warc-refers-to-date".into()),
                ),
            ];
            for (name, header) in wanted {
                if let Some(v) = rec.header(header) {
                    h.insert(name.to_string(), v.to_string());
                }
            }
            let uri = rec
                .header(WarcHeader::TargetURI)
                .map(|u| u.to_string())
                .unwrap_or_default();
            out.push((rec.warc_type().to_string(), uri, h));
        }
    }
    out
}

/// The test site, serving the first version of the changing pages.
async fn versioned_site() -> TestSite {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    first_version(&site);
    site
}

/// Crawl options with the full-text index (no model needed).
fn indexed(seeds: &[String], out: &Path) -> trawl::CrawlOptions {
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
    let store = trawl_index::store::Store::open_existing(&index)
        .await
        .unwrap();
    let rows_before = rows(&store).await;
    drop(store);
    let requests_before = site.log().len();

    second_version(&site);
    let (hook, received) = receiver().await;
    let mut o = indexed(&seeds, &two);
    o.since = Some(one.clone());
    o.crawl.webhook_url = Some(hook);
    o.crawl.webhook_backoff_ms = 100;
    o.crawl.webhook_wait_s = 20;
    // SAFETY: set before the crawl reads it; no other thread of this test reads it.
    unsafe { std::env::set_var("TRAWL_WEBHOOK_SECRET", "whsec_dGVzdC1zZWNyZXQtMTIzNA==") };
    trawl::crawl(o).await.unwrap();

    // Exactly the real changes.
    let text = std::fs::read_to_string(two.join("changes.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut by_url: BTreeMap<String, &serde_json::Value> = BTreeMap::new();
    for e in &events {
        let name = e["url"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        assert!(
            by_url.insert(name, e).is_none(),
            "one event per page: {text}"
        );
    }
    assert_eq!(
        by_url.keys().collect::<Vec<_>>(),
        ["b", "d", "f"],
        "changed, removed, new: {text}"
    );
    let b = by_url["b"];
    assert_eq!(b["type"], "page.changed");
    assert!(
        b["diff"]["text"].as_str().unwrap().contains("+")
            && b["diff"]["text"].as_str().unwrap().contains("frobnicate"),
        "{b}"
    );
    assert_eq!(
        b["diff"]["headings"][0], "Usage",
        "the changed section: {b}"
    );
    assert!(b["distance"].as_u64().unwrap() > 0);
    assert_ne!(b["previous"]["etag"], b["current"]["etag"]);
    assert_eq!(by_url["d"]["status"], "removed");
    assert_eq!(by_url["d"]["reason"], "not_found");
    assert_eq!(by_url["f"]["status"], "new");

    // The corpus: every page, unchanged ones carried forward with how they compare.
    let second = pages(&two);
    let change = |name: &str| {
        let p = support::page(&second, &format!("/changing/{name}"));
        (
            p["change"]["status"].as_str().unwrap_or("").to_string(),
            p["change"]["reason"].as_str().unwrap_or("").to_string(),
            p["change"]["linked"].as_bool(),
        )
    };
    assert_eq!(change("a").0, "same", "links moved, the text did not");
    assert_eq!(
        change("c"),
        ("same".into(), "same_text".into(), Some(true)),
        "a footer timestamp is not a change"
    );
    assert_eq!(
        change("e"),
        ("same".into(), "not_modified".into(), Some(true))
    );
    assert_eq!(
        change("g"),
        ("same".into(), "not_modified".into(), Some(false)),
        "checked at the end, no longer linked"
    );
    assert_eq!(
        change("h"),
        ("same".into(), "same_payload".into(), Some(true)),
        "no validators, same bytes"
    );
    assert_eq!(change("b").0, "changed");
    assert_eq!(change("f").0, "new");
    assert_eq!(change("d").0, "removed");
    let e = support::page(&second, "/changing/e");
    assert!(
        e["text"].as_str().unwrap().contains("echo guide"),
        "a 304 keeps the earlier text"
    );
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
    let log = site.log()[requests_before..].to_vec();
    for entry in log.iter().filter(|e| e.target.starts_with("/changing/")) {
        let name = entry.target.rsplit('/').next().unwrap();
        match name {
            "f" => assert!(
                entry.if_none_match.is_none(),
                "a new page has no validators"
            ),
            "h" => assert!(
                entry.if_none_match.is_none() && entry.if_modified_since.is_none(),
                "h never sent any"
            ),
            _ => assert!(
                entry.if_none_match.is_some() && entry.if_modified_since.is_some(),
                "validators on {entry:?}"
            ),
        }
        let expect_304 = matches!(name, "e" | "g");
        assert_eq!(entry.status == 304, expect_304, "{entry:?}");
    }

    // The WARC: revisits pointing at the first crawl's records, full responses for b and f.
    let old = warc_records(&one.join("warc"));
    let new = warc_records(&two.join("warc"));
    let of = |recs: &[(String, String, BTreeMap<String, String>)], name: &str, ty: &str| {
        recs.iter()
            .find(|(t, u, _)| t == ty && u.ends_with(&format!("/changing/{name}")))
            .map(|(_, _, h)| h.clone())
    };
    for name in ["e", "g"] {
        let rv = of(&new, name, "revisit").unwrap_or_else(|| panic!("a revisit for {name}"));
        let full = of(&old, name, "response").unwrap();
        assert_eq!(
            rv["warc-profile"],
            "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
        );
        assert_eq!(rv["warc-refers-to"], full["warc-record-id"]);
        assert_eq!(rv["warc-refers-to-date"], full["warc-date"]);
        assert_eq!(rv["warc-payload-digest"], full["warc-payload-digest"]);
    }
    let h = of(&new, "h", "revisit").expect("an identical-payload revisit for h");
    assert_eq!(
        h["warc-profile"],
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    );
    for name in ["b", "f"] {
        assert!(
            of(&new, name, "response").is_some(),
            "a full response for {name}"
        );
    }

    // The index: b's rows carry the new sentence, d's are gone, the others are untouched.
    let store = trawl_index::store::Store::open_existing(&index)
        .await
        .unwrap();
    let rows_after = rows(&store).await;
    for (url, before) in &rows_before {
        let name = url.rsplit('/').next().unwrap();
        match name {
            "b" => assert!(
                rows_after[url]
                    .iter()
                    .any(|(_, t)| t.contains("frobnicate"))
            ),
            "d" => assert!(
                !rows_after.contains_key(url),
                "a removed page leaves the index"
            ),
            _ => assert_eq!(&rows_after[url], before, "{name}'s rows are untouched"),
        }
    }
    assert!(rows_after.keys().any(|u| u.ends_with("/changing/f")));
    assert_eq!(
        r["index"]["pages"], 2,
        "only the new and the changed page were indexed: {r}"
    );
    assert_eq!(r["index"]["pages_removed"], 1);

    // The webhook: each event signed, the first retried with its id after the 500.
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), events.len() + 1, "one retry");
    let ids: Vec<&str> = got.iter().map(|(h, _)| h["webhook-id"].as_str()).collect();
    assert!(
        ids[1..].contains(&ids[0]),
        "the retry of the refused delivery keeps its id: {ids:?}"
    );
    let distinct: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(distinct.len(), events.len());
    let secret = data_encoding::BASE64
        .decode(b"dGVzdC1zZWNyZXQtMTIzNA==")
        .unwrap();
    for (h, body) in &got {
        let signed = format!("{}.{}.", h["webhook-id"], h["webhook-timestamp"]);
        let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&secret).unwrap();
        mac.update(signed.as_bytes());
        mac.update(body);
        let expect = format!(
            "v1,{}",
            data_encoding::BASE64.encode(&mac.finalize().into_bytes())
        );
        assert_eq!(h["webhook-signature"], expect);
        let e: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(e["id"].as_str(), Some(h["webhook-id"].as_str()));
    }
    assert_eq!(r["webhook"]["delivered"], events.len() as u64);
}

/// Chunk ids and texts by canonical URL.
async fn rows(store: &trawl_index::store::Store) -> BTreeMap<String, Vec<(String, String)>> {
    let ids = trawl_index::store::string_column(store.chunks(), "id")
        .await
        .unwrap();
    let urls = trawl_index::store::string_column(store.chunks(), "canonical_url")
        .await
        .unwrap();
    let texts = trawl_index::store::string_column(store.chunks(), "text")
        .await
        .unwrap();
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for ((id, url), text) in ids.into_iter().zip(urls).zip(texts) {
        out.entry(url).or_default().push((id, text));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_rounds_request_only_what_is_due() {
    let site = versioned_site().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("watch");
    let crawl = indexed(&[site.url("/changing/a")], &dir);
    let args = trawl::watch::WatchArgs {
        crawl,
        every: "0s".into(),
        rounds: 1,
        keep: 2,
    };
    // Round 1: the baseline.
    trawl::watch::watch(args.clone()).await.unwrap();
    assert!(dir.join("gen-00001/pages.jsonl").exists());
    assert!(dir.join("index").exists(), "one index for every round");

    // Round 2: every page is due (the baseline set no schedule): asked with validators.
    second_version(&site);
    let before = site.log().len();
    trawl::watch::watch(args.clone()).await.unwrap();
    let round2 = &site.log()[before..];
    assert!(round2.iter().any(|e| e.status == 304), "{round2:?}");
    let events = std::fs::read_to_string(dir.join("gen-00002/changes.jsonl")).unwrap();
    assert_eq!(
        events.lines().count(),
        3,
        "b changed, d removed, f new: {events}"
    );
    let p2 = pages(&dir.join("gen-00002"));
    let next_due = support::page(&p2, "/changing/e")["change"]["next_due"]
        .as_str()
        .unwrap()
        .to_string();

    // Round 3, right after: nothing is due, nothing is requested, every page is kept.
    let before = site.log().len();
    trawl::watch::watch(args.clone()).await.unwrap();
    let round3: Vec<_> = site.log()[before..]
        .iter()
        .filter(|e| e.target.starts_with("/changing/"))
        .cloned()
        .collect();
    assert!(round3.is_empty(), "no page is due yet: {round3:?}");
    let p3 = pages(&dir.join("gen-00003"));
    assert_eq!(
        p3.len(),
        p2.len() - 1,
        "every page but the removed one carried forward"
    );
    for p in &p3 {
        assert_eq!(p["change"]["reason"], "not_due", "{p}");
    }
    let e = support::page(&p3, "/changing/e");
    assert_eq!(
        e["change"]["next_due"],
        next_due.as_str(),
        "the schedule stands"
    );
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

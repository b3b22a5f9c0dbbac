//! The changing site of the re-crawl tests (both runtimes): two versions of a small
//! documentation site, a webhook receiver, and readers for what a re-crawl leaves behind.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use hmac::{Hmac, KeyInit, Mac};
use trawl_testsite::{Robots, SiteConfig, TestSite};

pub fn page(title: &str, main: &str, links: &[&str], footer: &str) -> String {
    let nav: String = links
        .iter()
        .map(|l| format!("<li><a href=\"/changing/{l}\">{l}</a></li>"))
        .collect();
    format!(
        "<!doctype html><html><head><title>{title}</title></head><body><nav><ul>{nav}</ul></nav>\
         <main><h1>{title}</h1><h2>Usage</h2><p>{main}</p></main><footer>{footer}</footer></body></html>"
    )
}

pub fn para(topic: &str) -> String {
    (0..12)
        .map(|i| format!("The {topic} guide explains step {i} of configuring {topic} in detail."))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first version of the site: a links to b, c, d, e, g, h.
pub fn first_version(site: &TestSite) {
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
pub fn second_version(site: &TestSite) {
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
pub type Received = Arc<Mutex<Vec<(BTreeMap<String, String>, Vec<u8>)>>>;

/// A receiver on loopback that answers 500 to its first request and 204 after.
pub async fn receiver() -> (String, Received) {
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
pub fn warc_records(dir: &Path) -> Vec<(String, String, BTreeMap<String, String>)> {
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
pub async fn versioned_site() -> TestSite {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    first_version(&site);
    site
}

/// Chunk ids and texts by canonical URL of the index at `uri`.
pub async fn index_rows(uri: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let store = trawl_index::store::Store::open_existing(uri).await.unwrap();
    rows(&store).await
}

/// Chunk ids and texts by canonical URL.
pub async fn rows(store: &trawl_index::store::Store) -> BTreeMap<String, Vec<(String, String)>> {
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

/// The webhook secret of the tests, as Standard Webhooks writes one.
pub const SECRET: &str = "whsec_dGVzdC1zZWNyZXQtMTIzNA==";

/// Change events by page name (the URL's last segment): exactly one each for b (changed),
/// d (removed) and f (new).
pub fn events_by_name(events: &[serde_json::Value]) -> BTreeMap<String, serde_json::Value> {
    let mut by_url = BTreeMap::new();
    for e in events {
        let name = e["url"].as_str().unwrap().rsplit('/').next().unwrap();
        assert!(
            by_url.insert(name.to_string(), e.clone()).is_none(),
            "one event per page: {events:?}"
        );
    }
    assert_eq!(
        by_url.keys().collect::<Vec<_>>(),
        ["b", "d", "f"],
        "changed, removed, new: {events:?}"
    );
    let b = &by_url["b"];
    assert_eq!(b["type"], "page.changed");
    let diff = b["diff"]["text"].as_str().unwrap();
    assert!(diff.contains('+') && diff.contains("frobnicate"), "{b}");
    assert_eq!(
        b["diff"]["headings"][0], "Usage",
        "the changed section: {b}"
    );
    assert!(b["distance"].as_u64().unwrap() > 0);
    assert_ne!(b["previous"]["etag"], b["current"]["etag"]);
    assert_eq!(by_url["d"]["status"], "removed");
    assert_eq!(by_url["d"]["reason"], "not_found");
    assert_eq!(by_url["f"]["status"], "new");
    by_url
}

/// The server's log of the second crawl: validators on every request for a page the first
/// crawl got them for, 304 for exactly the unchanged ones that have them (e, g).
pub fn check_validators(log: &[trawl_testsite::LogEntry]) {
    let mut asked = 0;
    for entry in log.iter().filter(|e| e.target.starts_with("/changing/")) {
        asked += 1;
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
    assert!(asked >= 8, "every page was asked for: {log:?}");
}

/// The second crawl's WARC files: server-not-modified revisits of e and g pointing at the
/// first crawl's records, an identical-payload revisit of h, full responses for b and f.
pub fn check_revisits(old_dir: &Path, new_dir: &Path) {
    let old = warc_records(old_dir);
    let new = warc_records(new_dir);
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
}

/// The index after the second crawl: b's rows carry the new sentence, d's are gone, f's
/// are there, every other row is as it was.
pub fn check_rows(
    before: &BTreeMap<String, Vec<(String, String)>>,
    after: &BTreeMap<String, Vec<(String, String)>>,
) {
    for (url, rows) in before {
        let name = url.rsplit('/').next().unwrap();
        match name {
            "b" => assert!(after[url].iter().any(|(_, t)| t.contains("frobnicate"))),
            "d" => assert!(!after.contains_key(url), "a removed page leaves the index"),
            _ => assert_eq!(&after[url], rows, "{name}'s rows are untouched"),
        }
    }
    assert!(after.keys().any(|u| u.ends_with("/changing/f")));
}

/// What the receiver got: each of the `events` signed with `secret`, its id the event's;
/// the first one refused with a 500 and sent again with the same id.
pub fn check_deliveries(got: &[(BTreeMap<String, String>, Vec<u8>)], events: usize, secret: &str) {
    assert_eq!(got.len(), events + 1, "one retry");
    let ids: Vec<&str> = got.iter().map(|(h, _)| h["webhook-id"].as_str()).collect();
    assert!(
        ids[1..].contains(&ids[0]),
        "the retry of the refused delivery keeps its id: {ids:?}"
    );
    let distinct: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(distinct.len(), events);
    let key = secret.strip_prefix("whsec_").unwrap();
    let key = data_encoding::BASE64.decode(key.as_bytes()).unwrap();
    for (h, body) in got {
        let signed = format!("{}.{}.", h["webhook-id"], h["webhook-timestamp"]);
        let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
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
}

/// The second crawl's records: every page, the unchanged ones carried forward with how
/// they compare (a 304, the same text under a new footer, the same bytes without
/// validators, no longer linked), the changed, new and removed ones marked.
pub fn check_corpus(second: &[serde_json::Value]) {
    let change = |name: &str| {
        let p = crate::page(second, &format!("/changing/{name}"));
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
    let e = crate::page(second, "/changing/e");
    assert!(
        e["text"].as_str().unwrap().contains("echo guide"),
        "a 304 keeps the earlier text"
    );
}

//! The `trawl` binary as a user runs it: a crawl from a URL file with its progress and
//! outputs, an interrupt, `extract`, `index` and `search`, `refine` on standard input.

use std::process::Command;

use trawl_testsite::{Robots, SiteConfig, TestSite};

fn trawl() -> Command {
    Command::new(support::bin("trawl").expect("the trawl binary is built with the tests"))
}

#[test]
fn crawls_from_a_url_file_and_reports_progress() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // No robots.txt: its Sitemap line would add sitemap records to the two pages.
    let site = rt
        .block_on(TestSite::start(SiteConfig {
            robots: Robots::Status(404),
            ..SiteConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("urls.txt");
    std::fs::write(
        &list,
        format!(
            "# seeds\n{}\n\n{}\n",
            site.url("/page/1"),
            site.url("/feeds/1")
        ),
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = trawl()
        .args([
            "crawl",
            "--allow-private",
            "--delay",
            "0",
            "--max-depth",
            "0",
            "--progress",
            "log",
            "--no-embed",
            "--urls",
        ])
        .arg(&list)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("crawled 2 pages"), "{err}");
    let pages = std::fs::read_to_string(out_dir.join("pages.jsonl")).unwrap();
    assert_eq!(pages.lines().count(), 2);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["pages"], 2);
    assert!(std::fs::read_dir(out_dir.join("warc")).unwrap().count() >= 1);
    // Indexed by default (here without vectors); `trawl search` reads it.
    assert!(report["index"]["chunks"].as_u64().unwrap() >= 2, "{report}");
    assert!(err.contains("index: 2 pages"), "{err}");
    let title =
        serde_json::from_str::<serde_json::Value>(pages.lines().next().unwrap()).unwrap()["title"]
            .as_str()
            .unwrap()
            .to_string();
    let found = trawl()
        .args(["search", &title, "--mode", "text", "--json", "--index"])
        .arg(out_dir.join("index"))
        .output()
        .unwrap();
    assert!(
        found.status.success(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    let first: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&found.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["title"], title.as_str());
    let missing = trawl()
        .args(["search", "x", "--index"])
        .arg(dir.path().join("nowhere"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no index at"));
    drop(site);
}

#[test]
fn interrupt_stops_cleanly_and_keeps_what_was_done() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let site = rt
        .block_on(TestSite::start(SiteConfig {
            pages: 100,
            robots: Robots::Status(404),
            ..SiteConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    // 100 pages 400 ms apart: far longer than the wait below, and the next page spends
    // most of the gap queued (what the report must show as left) rather than in flight.
    let child = trawl()
        .args([
            "crawl",
            "--allow-private",
            "--delay",
            "400",
            "--progress",
            "none",
            "--no-embed",
        ])
        .arg(site.url("/page/1"))
        .arg("--out")
        .arg(&out_dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for a few pages even with the other tests of this binary running beside.
    std::thread::sleep(std::time::Duration::from_millis(3000));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true);
    let lines = std::fs::read_to_string(out_dir.join("pages.jsonl")).unwrap();
    let n = lines.lines().count();
    assert!((2..100).contains(&n), "{n} pages");
    assert_eq!(report["pages"].as_u64().unwrap() as usize, n);
    for l in lines.lines() {
        serde_json::from_str::<serde_json::Value>(l).expect("every line is whole JSON");
    }
    assert!(report["frontier"]["left_queued"].as_u64().unwrap() >= 1);
    // Nothing lost: every page the server answered is in pages.jsonl.
    let served = site
        .log()
        .iter()
        .filter(|e| {
            !matches!(
                e.target.as_str(),
                "/robots.txt" | "/.well-known/tdmrep.json"
            )
        })
        .count();
    assert_eq!(served, n, "fetched pages missing from pages.jsonl");
    drop(site);
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/extract/tests/fixtures")
        .join(name)
}

#[test]
fn extract_one_page_as_text_markdown_and_json() {
    let out = trawl()
        .args(["extract", "--url", "https://gazette.example/news/seals"])
        .arg(fixture("article.html"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("Counts of harbour seals"), "{text}");
    assert!(!text.contains("Related stories"), "{text}");

    let out = trawl()
        .args(["extract", "--format", "markdown"])
        .arg(fixture("documentation.html"))
        .output()
        .unwrap();
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("```python\n"), "{md}");
    assert!(md.contains("## Parameters"), "{md}");

    // Standard input, JSON with the metadata.
    let html = std::fs::read(fixture("article.html")).unwrap();
    let mut child = trawl()
        .args(["extract", "-", "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&html).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["title"], "Harbour seals return to the estuary");
    assert_eq!(v["author"], "Mara Oyelaran");
    assert_eq!(v["published"], "2025-03-14T08:30:00Z");
    assert_eq!(v["page_type"], "article");
    assert!(v["markdown"].as_str().unwrap().contains("## Pups born"));
}

#[test]
fn extract_many_files_writes_json_lines_and_reports_unreadable_ones() {
    let dir = tempfile::tempdir().unwrap();
    // A windows-1252 page without a declared charset: decoded, not mangled.
    let latin = dir.path().join("latin.html");
    std::fs::write(
        &latin,
        b"<html><body><article><p>Caf\xe9 cr\xe8me, served all day in the old harbour station, \
          with pastries baked on the premises every morning.</p></article></body></html>",
    )
    .unwrap();
    let out = trawl()
        .arg("extract")
        .arg(fixture("forum.html"))
        .arg(dir.path().join("missing.html"))
        .arg(&latin)
        .output()
        .unwrap();
    // The unreadable file fails the run, after the others are written.
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0]["text"].as_str().unwrap().contains("ethyl acetate"));
    assert!(lines[0]["file"].as_str().unwrap().ends_with("forum.html"));
    assert!(lines[1]["error"].as_str().unwrap().contains("missing.html"));
    assert!(
        lines[2]["text"].as_str().unwrap().contains("Café crème"),
        "{}",
        lines[2]
    );
}

#[test]
fn index_command_search_and_a_missing_model() {
    let dir = tempfile::tempdir().unwrap();
    let page = |url: &str, title: &str, md: &str| {
        serde_json::json!({
            "url": url, "final_url": url, "status": 200, "redirects": [], "depth": 0,
            "kind": "page", "fetched_at": "2026-11-30T12:00:00Z", "title": title,
            "text": md, "markdown": md, "links_found": 0, "wire_bytes": 0
        })
        .to_string()
    };
    let pages = dir.path().join("pages.jsonl");
    std::fs::write(
        &pages,
        format!(
            "{}\n{}\n",
            page(
                "http://t/a",
                "Anchovies",
                "# Anchovies\n\nSmall oily fish, salted and packed in tins."
            ),
            page(
                "http://t/b",
                "Bicycles",
                "# Bicycles\n\nTwo wheels, pedals and a chain drive the rear wheel."
            )
        ),
    )
    .unwrap();
    let index = dir.path().join("index");
    let out = trawl()
        .args(["index", "--no-embed", "--index"])
        .arg(&index)
        .arg(&pages)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("index: 2 pages"), "{err}");
    let found = trawl()
        .args(["search", "pedals", "--index"])
        .arg(&index)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&found.stdout);
    assert!(
        found.status.success(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    assert!(
        text.starts_with("1. ") && text.contains("Bicycles") && text.contains("http://t/b"),
        "{text}"
    );
    assert!(!text.contains("Anchovies"), "{text}");

    // A malformed line names its file and line; nothing is half written.
    std::fs::write(&pages, "{\"url\": 3}\n").unwrap();
    let bad = trawl()
        .args(["index", "--no-embed", "--index"])
        .arg(&index)
        .arg(&pages)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("pages.jsonl:1"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    // Without the model, a crawl that would embed stops before its first request and says
    // how to get the model.
    let crawl = trawl()
        .args(["crawl", "http://127.0.0.1:9/", "--allow-private", "--out"])
        .arg(dir.path().join("crawl"))
        .env("TRAWL_MODEL_DIR", dir.path().join("no-model"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&crawl.stderr);
    assert!(!crawl.status.success());
    assert!(
        err.contains("scripts/fetch-model.sh") && err.contains("--no-embed"),
        "{err}"
    );
}

#[test]
fn refine_reads_a_page_on_stdin() {
    use std::io::Write;
    let page = "<html><head><title>T</title></head><body><nav><a href=/>Home</a> <a href=/b>Blog</a></nav>\
        <article><h1>Rust 1.90</h1><p>This release stabilizes a long list of library functions and \
        brings faster builds to everyone who compiles large workspaces every single day.</p></article>\
        <footer>Copyright 2026 Example Inc. All rights reserved.</footer></body></html>";
    let mut child = trawl()
        .args(["refine", "--engine", "extract", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("This release stabilizes"), "{text}");
    assert!(!text.contains("Copyright 2026"), "{text}");

    let out = trawl()
        .args(["refine", "x.warc.gz", "--engine", "candle"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--model PATH is needed"));
}

//! The `trawl` binary as a user runs it.

use std::process::Command;

use trawl_testsite::{Robots, SiteConfig, TestSite};

fn trawl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = trawl().args(["crawl"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to crawl"), "{err}");

    let out = trawl()
        .args(["crawl", "http://x/", "--scope", "galaxy"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown scope \"galaxy\""), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.txt");
    let out = trawl()
        .args(["crawl", "--urls"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("reading URL list") && err.contains("nope.txt"),
        "{err}"
    );
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
    // 100 pages 200 ms apart: far longer than the wait below.
    let child = trawl()
        .args([
            "crawl",
            "--allow-private",
            "--delay",
            "200",
            "--progress",
            "none",
        ])
        .arg(site.url("/page/1"))
        .arg("--out")
        .arg(&out_dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
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
        .filter(|e| e.target != "/robots.txt")
        .count();
    assert_eq!(served, n, "fetched pages missing from pages.jsonl");
    drop(site);
}

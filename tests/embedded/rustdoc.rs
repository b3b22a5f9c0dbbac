//! The toolchain's documentation, served as is: the book crawled whole (exactly the pages an
//! independent link scan reaches, each once), without ever touching the robots-disallowed
//! first and second editions that `README.html` links to. The full 48,000-page crawl is `bench/rustdoc/run.sh`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use support::{options, pages, report};
use trawl_core::scope::ScopeKind;
use trawl_testsite::{Robots, SiteConfig, TestSite};

fn docs_dir() -> Option<PathBuf> {
    let out = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim()).join("share/doc/rust/html");
    dir.join("book/index.html").exists().then_some(dir)
}

/// An independent oracle for "the whole site": breadth-first over the files on disk,
/// following every `href="..."` to an HTML file under `prefix` that robots.txt allows.
fn reachable(docs: &Path, start: &[&str], prefix: &str, rules: &[String]) -> HashSet<String> {
    let base = url::Url::parse("http://docs.invalid/").unwrap();
    let mut seen: HashSet<String> = start.iter().map(|s| s.to_string()).collect();
    let mut queue: Vec<String> = seen.iter().cloned().collect();
    while let Some(path) = queue.pop() {
        let file = if path.ends_with('/') {
            format!("{path}index.html")
        } else {
            path.clone()
        };
        let Ok(html) = std::fs::read_to_string(docs.join(file.trim_start_matches('/'))) else {
            continue;
        };
        let page = base.join(&path).unwrap();
        for chunk in html.split("href=\"").skip(1) {
            let href = chunk.split('"').next().unwrap_or("");
            let Ok(target) = page.join(&html_escape_min(href)) else {
                continue;
            };
            if target.host_str() != Some("docs.invalid") {
                continue;
            }
            let t = target.path().to_string();
            let is_page = t.ends_with(".html") || t.ends_with('/');
            if is_page
                && t.starts_with(prefix)
                && !rules.iter().any(|r| t.starts_with(r))
                && seen.insert(t.clone())
            {
                queue.push(t);
            }
        }
    }
    // Only what exists is a page; a dangling link is a 404 for any crawler.
    seen.into_iter()
        .filter(|p| {
            let f = if p.ends_with('/') {
                format!("{p}index.html")
            } else {
                p.clone()
            };
            docs.join(f.trim_start_matches('/')).is_file()
        })
        .collect()
}

fn html_escape_min(s: &str) -> String {
    s.replace("&amp;", "&")
}

fn disallow_rules(docs: &Path) -> Vec<String> {
    std::fs::read_to_string(docs.join("robots.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("Disallow:"))
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawls_the_book_whole_and_never_a_disallowed_path() {
    let Some(docs) = docs_dir() else {
        eprintln!(
            "SKIPPED: the toolchain has no HTML documentation (rustup component add rust-docs)"
        );
        return;
    };
    let site = TestSite::start(SiteConfig {
        robots: Robots::FromDir,
        dir: Some(docs.clone()),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    // README.html is the one page that links to the disallowed editions.
    let mut o = options(
        &[site.url("/book/"), site.url("/book/README.html")],
        out.path(),
    );
    o.crawl.scope = ScopeKind::Prefix;
    o.concurrency = 32;
    let (rep, outputs) = trawl::crawl(o).await.unwrap();

    let rules = disallow_rules(&docs);
    assert!(rules.iter().any(|r| r == "/book/first-edition/"));
    let log = site.log();
    let fetched: HashSet<String> = log
        .iter()
        .map(|e| e.target.split('?').next().unwrap().to_string())
        .collect();
    for path in &fetched {
        assert!(
            !rules.iter().any(|r| path.starts_with(r)),
            "fetched disallowed {path}"
        );
    }
    assert!(
        rep.robots_blocked > 0,
        "the book links to its disallowed old editions"
    );

    let expected = reachable(&docs, &["/book/", "/book/README.html"], "/book/", &rules);
    let missing: Vec<&String> = expected
        .iter()
        .filter(|p| !fetched.contains(p.as_str()))
        .collect();
    assert!(
        expected.len() > 100,
        "the oracle found only {} pages",
        expected.len()
    );
    assert!(
        missing.is_empty(),
        "{} reachable pages not fetched, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let extra: Vec<&String> = fetched
        .iter()
        .filter(|p| {
            !expected.contains(p.as_str())
                && !matches!(p.as_str(), "/robots.txt" | "/.well-known/tdmrep.json")
        })
        .collect();
    assert!(
        extra.is_empty(),
        "fetched pages the site does not link to: {extra:?}"
    );

    let pages = pages(out.path());
    let ok = pages
        .iter()
        .filter(|p| p["status"] == 200 && p["error"].is_null())
        .count();
    assert!(
        ok as f64 >= 0.98 * (pages.len() as f64 - rep.robots_blocked as f64),
        "{}",
        report(out.path())
    );
    let intro = pages
        .iter()
        .find(|p| {
            p["url"]
                .as_str()
                .unwrap()
                .ends_with("/book/ch01-01-installation.html")
        })
        .unwrap();
    let text = intro["text"].as_str().unwrap();
    assert!(text.contains("rustup"));
    // The book's chapter list in the sidebar is navigation, not the page.
    assert!(!text.contains("Foreword"), "{text}");
    assert!(intro["title"].as_str().unwrap().contains("Installation"));
    let md = intro["markdown"].as_str().unwrap();
    assert!(md.contains("```console\n$ curl"), "{md}");
    assert!(
        md.contains("\n### Troubleshooting\n") || md.contains("\n## Troubleshooting\n"),
        "{md}"
    );
    assert_eq!(intro["meta"]["language"], "en");
    // Every request is in the WARC files.
    assert!(!outputs.warc_files.is_empty());
}

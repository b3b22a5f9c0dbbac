//! Page-by-page parity of `render_lines` with ReScraper's renderer (mineru-webkit 0.1.6 and
//! `webkit_txt`'s clean-up, run by `scripts/refine-reference.py` in `.venv-mineru`) over the
//! shared extraction benchmark pages and the Common Crawl sample's HTML responses. The test
//! command starts the Python side in the background before building (it takes minutes);
//! the reference is kept under `target/refine-parity/`, keyed by the script and its pins.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TRAWL_MINERU_PYTHON") {
        return Some(p.into());
    }
    let p = root().join(".venv-mineru/bin/python3");
    p.exists().then_some(p)
}

/// Whether another process holds the flock on `lock` (flock -n fails while it does).
fn locked(lock: &Path) -> bool {
    lock.exists()
        && std::process::Command::new("flock")
            .args(["-n", "-E", "75"])
            .arg(lock)
            .arg("true")
            .status()
            .is_ok_and(|s| s.code() == Some(75))
}

fn reference() -> Option<PathBuf> {
    let path = match std::env::var("TRAWL_REFINE_REFERENCE") {
        Ok(p) => PathBuf::from(p),
        Err(_) => {
            let mut h = DefaultHasher::new();
            for f in [
                "scripts/refine-reference.py",
                "scripts/requirements-mineru.txt",
            ] {
                std::fs::read(root().join(f))
                    .unwrap_or_default()
                    .hash(&mut h);
            }
            root().join(format!(
                "target/refine-parity/reference-local-{:016x}.jsonl",
                h.finish()
            ))
        }
    };
    // The test command's background run may still be writing it: it holds `<path>.lock`
    // (flock) while it runs; the wait is bounded.
    let lock = PathBuf::from(format!("{}.lock", path.display()));
    let start = Instant::now();
    while !path.exists() && locked(&lock) && start.elapsed() < Duration::from_secs(1800) {
        std::thread::sleep(Duration::from_secs(2));
    }
    if path.exists() {
        return Some(path);
    }
    let py = python()?;
    std::fs::create_dir_all(path.parent()?).ok()?;
    // Under the same lock, so a background run started meanwhile does not race this one.
    let status = std::process::Command::new("flock")
        .arg(&lock)
        .arg(&py)
        .arg(root().join("scripts/refine-reference.py"))
        .arg(&path)
        .status();
    if let Ok(st) = status {
        assert!(st.success() || path.exists(), "refine-reference.py failed");
        if path.exists() {
            return Some(path);
        }
    }
    let status = std::process::Command::new(py)
        .arg(root().join("scripts/refine-reference.py"))
        .arg(&path)
        .status()
        .ok()?;
    assert!(status.success(), "refine-reference.py failed");
    Some(path)
}

#[derive(Default, Debug)]
struct Tally {
    pages: usize,
    identical: usize,
    ref_lines: usize,
    matched: usize,
    ours: usize,
}

impl Tally {
    fn add(&mut self, want: &[&str], got: &[&str]) {
        let ops = similar::capture_diff_slices(similar::Algorithm::Myers, want, got);
        let eq: usize = ops
            .iter()
            .map(|o| match o {
                similar::DiffOp::Equal { len, .. } => *len,
                _ => 0,
            })
            .sum();
        self.pages += 1;
        self.identical += usize::from(want == got);
        self.ref_lines += want.len();
        self.ours += got.len();
        self.matched += eq;
    }

    fn line(&self, name: &str) -> String {
        format!(
            "{name}: {} pages, {} identical ({:.3}); {} reference lines, {} matched ({:.4}); {} lines written (precision {:.4})",
            self.pages,
            self.identical,
            self.identical as f64 / self.pages.max(1) as f64,
            self.ref_lines,
            self.matched,
            self.matched as f64 / self.ref_lines.max(1) as f64,
            self.ours,
            self.matched as f64 / self.ours.max(1) as f64
        )
    }
}

#[test]
fn renders_the_shared_pages_as_rescraper_does() {
    let shared = root().join("../shared/bench/extraction");
    if !shared.exists() {
        eprintln!(
            "SKIPPED: {} is not here (the shared benchmark pages)",
            shared.display()
        );
        return;
    }
    let Some(path) = reference() else {
        assert!(
            std::env::var("TRAWL_REQUIRE_PY").is_err(),
            "mineru-webkit is not installed (.venv-mineru; the test command installs it)"
        );
        eprintln!(
            "skipped: no .venv-mineru with mineru-webkit 0.1.6 (./scripts/test.sh installs it)"
        );
        return;
    };
    let f = std::io::BufReader::new(std::fs::File::open(&path).expect("reference"));
    let (mut bench, mut cc, mut failed) = (Tally::default(), Tally::default(), 0usize);
    for line in f.lines() {
        let v: serde_json::Value = serde_json::from_str(&line.expect("read")).expect("json");
        let id = v["id"].as_str().unwrap_or_default();
        let html = v["html"].as_str().unwrap_or_default();
        let got = trawl_refine::lines::render_lines(html);
        let Some(text) = v["text"].as_str() else {
            // The converter raised on this page (ReScraper drops it); ours must still render.
            failed += 1;
            continue;
        };
        let want: Vec<&str> = text.split('\n').filter(|l| !l.is_empty()).collect();
        let got: Vec<&str> = got.iter().map(String::as_str).collect();
        if id.contains(".warc") {
            cc.add(&want, &got)
        } else {
            bench.add(&want, &got)
        }
    }
    let mut all = Tally::default();
    for t in [&bench, &cc] {
        all.pages += t.pages;
        all.identical += t.identical;
        all.ref_lines += t.ref_lines;
        all.matched += t.matched;
        all.ours += t.ours;
    }
    let report = format!(
        "{}\n{}\n{}\npages the Python converter raised on: {failed}\n",
        bench.line("extraction benchmark pages"),
        cc.line("Common Crawl sample"),
        all.line("all")
    );
    eprint!("{report}");
    let _ = std::fs::write(root().join("target/refine-parity/figures.txt"), &report);
    assert!(bench.pages >= 600 && cc.pages >= 40, "{report}");
    for t in [&bench, &cc] {
        assert!(t.matched as f64 >= 0.95 * t.ref_lines as f64, "{report}");
        assert!(t.identical as f64 >= 0.75 * t.pages as f64, "{report}");
    }
}

//! Whether a built binary is older than the sources it is built from. Cargo rebuilds only
//! what the command it was given needs: `cargo test -p trawl-tests` after an edit to a
//! stage rebuilds the stage library the tests link, but not the stage's service binary,
//! which a test would then run as it was.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

use serde_json::Value;

/// A source file of the workspace packages the binary `name` is built from (its own
/// package and those it depends on, all the way down) modified after `binary` was built.
/// `None` when every one is older, or when cargo cannot say which those are.
pub fn newer_source(binary: &Path, name: &str) -> Option<PathBuf> {
    static DIRS: std::sync::Mutex<Option<HashMap<String, Option<Vec<PathBuf>>>>> =
        std::sync::Mutex::new(None);
    let built = std::fs::metadata(binary).and_then(|m| m.modified()).ok()?;
    let dirs = DIRS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .entry(name.to_string())
        .or_insert_with(|| package_dirs(name))
        .clone()?;
    newer_than(&dirs, built)
}

pub fn newer_than(dirs: &[PathBuf], built: SystemTime) -> Option<PathBuf> {
    dirs.iter()
        .flat_map(|d| sources(d))
        .find(|(_, m)| *m > built)
        .map(|(p, _)| p)
}

/// What `cargo ARGS` prints, run in the workspace.
fn cargo(args: &[&str]) -> Option<String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The package of each binary target of the workspace, once per test process.
fn bin_packages() -> Option<&'static HashMap<String, String>> {
    static BINS: OnceLock<Option<HashMap<String, String>>> = OnceLock::new();
    BINS.get_or_init(|| {
        let meta = cargo(&[
            "metadata",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])?;
        let meta: Value = serde_json::from_str(&meta).ok()?;
        let mut bins = HashMap::new();
        for p in meta["packages"].as_array()? {
            for t in p["targets"].as_array()? {
                if t["kind"]
                    .as_array()
                    .is_some_and(|k| k.contains(&"bin".into()))
                    && let (Some(bin), Some(pkg)) = (t["name"].as_str(), p["name"].as_str())
                {
                    bins.insert(bin.to_string(), pkg.to_string());
                }
            }
        }
        Some(bins)
    })
    .as_ref()
}

/// The directories of the workspace packages binary `name` is built from: its package and
/// the path dependencies below it, normal and build (`cargo tree` prints their paths).
pub fn package_dirs(name: &str) -> Option<Vec<PathBuf>> {
    let package = bin_packages()?.get(name)?;
    let tree = cargo(&[
        "tree",
        "--offline",
        "-p",
        package,
        "-e",
        "normal,build",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ])?;
    let dirs: BTreeSet<PathBuf> = tree
        .lines()
        .filter_map(|l| {
            let (_, path) = l.split_once(" (/")?;
            Some(PathBuf::from(format!("/{}", path.split_once(')')?.0)))
        })
        .collect();
    Some(dirs.into_iter().collect())
}

/// The files a package's build reads, with their modification times: its manifest, build
/// script and everything under `src/`.
fn sources(dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    let mut out = Vec::new();
    for f in ["Cargo.toml", "build.rs"] {
        let p = dir.join(f);
        if let Some(m) = modified(&p) {
            out.push((p, m));
        }
    }
    let mut todo = vec![dir.join("src")];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if let Some(m) = modified(&p) {
                out.push((p, m));
            }
        }
    }
    out
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

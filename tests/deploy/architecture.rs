//! The dependency invariants ARCHITECTURE.md states ("*Invariant:* `crate` depends on none
//! of `a`, `b`"), each checked against the real dependency graph with `cargo tree`, so a
//! change that breaks one fails here and the map stays true.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct Invariant {
    line: String,
    package: String,
    no_default_features: bool,
    absent: Vec<String>,
}

/// Every "*Invariant:*" line of ARCHITECTURE.md that names dependencies.
fn invariants() -> Vec<Invariant> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    text.lines()
        .filter(|l| l.contains("*Invariant:*") && l.contains("depends on none of"))
        .map(|l| {
            let (subject, list) = l.split_once("depends on none of").unwrap();
            let ticks = |s: &str| -> Vec<String> {
                s.split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect()
            };
            Invariant {
                line: l.trim().to_string(),
                package: ticks(subject)
                    .into_iter()
                    .next()
                    .expect("a package in backticks"),
                no_default_features: subject.contains("without default features"),
                absent: ticks(list),
            }
        })
        .collect()
}

/// The packages `package` depends on (normal dependencies, all the way down).
fn dependencies(package: &str, no_default_features: bool) -> BTreeSet<String> {
    let mut c = Command::new(env!("CARGO"));
    c.current_dir(root()).args([
        "tree",
        "--offline",
        "-p",
        package,
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    if no_default_features {
        c.arg("--no-default-features");
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn architecture_invariants_hold() {
    let all = invariants();
    assert!(
        all.len() >= 12,
        "ARCHITECTURE.md states {} invariants",
        all.len()
    );
    let mut broken = Vec::new();
    for inv in &all {
        assert!(
            !inv.absent.is_empty(),
            "no dependencies named in: {}",
            inv.line
        );
        let deps = dependencies(&inv.package, inv.no_default_features);
        assert!(
            deps.contains(&inv.package),
            "{} is not a package of the workspace: {}",
            inv.package,
            inv.line
        );
        for a in &inv.absent {
            if deps.contains(a) {
                broken.push(format!("{} depends on {a}: {}", inv.package, inv.line));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken invariants:\n{}",
        broken.join("\n")
    );
}

/// The workspace's packages and their direct dependencies, from `cargo metadata`.
fn metadata() -> serde_json::Value {
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args([
            "metadata",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every package of the workspace has its line in the map.
#[test]
fn every_package_has_an_invariant() {
    let meta = metadata();
    let stated: BTreeSet<String> = invariants().into_iter().map(|i| i.package).collect();
    let missing: Vec<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        // The command links every stage, and the tests and test site are not shipped.
        .filter(|n| !["trawl", "trawl-tests", "trawl-testsite"].contains(n) && !stated.contains(*n))
        .map(str::to_string)
        .collect();
    assert!(
        missing.is_empty(),
        "no invariant in ARCHITECTURE.md for {missing:?}"
    );
}

/// Only `trawl-index` uses LanceDB directly and only `trawl-embed` gemm (so the embedder
/// builds without LanceDB); candle only `trawl-embed` and `trawl-refine` (the refining
/// models, whose backends are an optional feature); tokenizers those and `trawl-index`
/// (the chunker counts word pieces).
#[test]
fn only_the_index_and_refine_crates_have_the_heavy_dependencies() {
    let meta = metadata();
    let owner = [("lancedb", "trawl-index"), ("gemm", "trawl-embed")];
    let models = [
        "candle-core",
        "candle-nn",
        "candle-transformers",
        "tokenizers",
    ];
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if !d["kind"].is_null() {
                continue;
            }
            if let Some((_, only)) = owner.iter().find(|(d, _)| *d == dep) {
                assert_eq!(name, *only, "{name} depends on {dep} directly");
            }
            if models.contains(&dep) {
                let allowed = if dep == "tokenizers" {
                    &["trawl-embed", "trawl-refine", "trawl-index"][..]
                } else {
                    &["trawl-embed", "trawl-refine"][..]
                };
                assert!(allowed.contains(&name), "{name} depends on {dep} directly");
                if name == "trawl-refine" {
                    assert_eq!(
                        d["optional"], true,
                        "trawl-refine's {dep} is behind its `models` feature"
                    );
                }
            }
        }
    }
}

//! `support::bin`'s staleness check: which packages a binary is built from, and a source
//! newer than the binary found.

use std::time::SystemTime;

use support::stale::{newer_than, package_dirs};

/// The fetcher's binary is built from the fetcher's stage library and trawl-core, and
/// not from the index crate.
#[test]
fn a_binary_is_built_from_its_packages_and_their_dependencies() {
    let dirs = package_dirs("trawl-fetcher").expect("cargo metadata answers");
    let ends = |s: &str| dirs.iter().any(|d| d.ends_with(s));
    assert!(ends("services/bin/fetcher"), "{dirs:?}");
    assert!(ends("services/fetcher"), "{dirs:?}");
    assert!(ends("crates/core"), "{dirs:?}");
    assert!(!ends("crates/index"), "{dirs:?}");
}

/// A source touched after the binary was built is found; none, once the binary is
/// newer.
#[test]
fn a_source_touched_after_the_build_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/nested")).unwrap();
    let src = dir.path().join("src/nested/lib.rs");
    std::fs::write(&src, "").unwrap();
    let dirs = [dir.path().to_path_buf()];
    let minute = std::time::Duration::from_secs(60);
    assert_eq!(newer_than(&dirs, SystemTime::now() - minute), Some(src));
    assert_eq!(newer_than(&dirs, SystemTime::now() + minute), None);
}

//! The `trawl` binary's arguments, checked before it does anything. (The binary running
//! crawls, extraction, indexing and search is `tests/embedded/cli.rs`, which needs it
//! built: this test is why `cargo test --workspace` builds it.)

use std::process::Command;

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

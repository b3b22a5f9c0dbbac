//! Shared by the index tests: the model directory, or a clear skip.

use std::path::PathBuf;

/// The model directory when the model is there. Without it the test is skipped with a
/// message, unless `TRAWL_REQUIRE_MODEL=1` (set by `scripts/test.sh`, which fetches it).
pub fn model_dir() -> Option<PathBuf> {
    let dir = trawl_index::model::resolve_dir(None);
    match trawl_index::model::check_dir(&dir) {
        Ok(()) => Some(dir),
        Err(e) => {
            if std::env::var("TRAWL_REQUIRE_MODEL").is_ok_and(|v| v == "1") {
                panic!("the embedding model is required (TRAWL_REQUIRE_MODEL=1): {e}");
            }
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

#[allow(dead_code)]
pub fn shared(rel: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared")
        .join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: {} is not here (the shared reference data)",
            p.display()
        );
        None
    }
}

//! Where the embedding model's files are, and a clear error when they are not there.

use std::path::{Path, PathBuf};

use crate::EmbedError;

/// The files a sentence-transformers BERT model directory must hold.
pub const REQUIRED: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The model directory: `explicit` (a flag), else `TRAWL_MODEL_DIR`, else the cache
/// directory `scripts/fetch-model.sh` fills (`$XDG_CACHE_HOME` or `~/.cache`, then
/// `trawl/models/all-MiniLM-L6-v2`).
pub fn resolve_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("TRAWL_MODEL_DIR").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    default_dir()
}

pub fn default_dir() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("trawl/models/all-MiniLM-L6-v2")
}

/// Checks that `dir` holds a model; the error says which file is missing and how to fetch
/// the default model.
pub fn check_dir(dir: &Path) -> Result<(), EmbedError> {
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(EmbedError::ModelMissing {
        dir: dir.to_path_buf(),
        missing: missing.join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_says_how_to_fetch_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let e = check_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("tokenizer.json, model.safetensors"), "{e}");
        assert!(e.contains("scripts/fetch-model.sh"), "{e}");
        assert!(e.contains("--no-embed"), "{e}");
    }
}

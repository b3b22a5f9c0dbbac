//! The full-text preview of an index whose vectors are still being computed. Embedding runs
//! at tens of chunks a second per core and a crawl writes a thousand pages a second, so an
//! embedded crawl's index can trail its `pages.jsonl` by many minutes. Beside it the crawl
//! keeps a text-only index of the same pages (no model: chunked by words, full-text indexed
//! as it goes) in a directory next to the index; `trawl search` answers the full-text half
//! of a query from it while it is there, and the crawl removes it once the index is whole
//! and has its own full-text index.

use std::path::Path;

use crate::IndexError;
use crate::store::Store;

/// Where the preview of the index at `uri` lives: `<uri>-preview` for an index in a local
/// directory; an index elsewhere (an object store) has none.
pub fn preview_uri(uri: &str) -> Option<String> {
    if uri.contains("://") {
        return None;
    }
    let trimmed = uri.trim_end_matches('/');
    (!trimmed.is_empty()).then(|| format!("{trimmed}-preview"))
}

/// The preview of the index at `uri`, when a crawl keeps one now.
pub async fn open(uri: &str) -> Result<Option<Store>, IndexError> {
    match preview_uri(uri) {
        Some(p) if Path::new(&p).is_dir() => Ok(Some(Store::open_existing(&p).await?)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preview_sits_beside_a_local_index_only() {
        assert_eq!(
            preview_uri("out/index").as_deref(),
            Some("out/index-preview")
        );
        assert_eq!(preview_uri("/a/idx/").as_deref(), Some("/a/idx-preview"));
        assert_eq!(preview_uri("s3://bucket/index"), None);
        assert_eq!(preview_uri("/"), None);
    }
}

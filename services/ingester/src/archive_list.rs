//! The archives a list names, as `trawl submit --archives` hands them to the ingesters.
//! Common Crawl hands out `warc.paths.gz` / `wet.paths.gz`, gzip text with one path per
//! line relative to its bucket; a user may also name archives directly.

use std::io::Read;
use std::path::{Path, PathBuf};

use trawl_corpus::ingest::is_url;

/// Why a list could not be read, or an entry of it placed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveListError {
    #[error("fetching the archive list {list}: {source}")]
    Fetch {
        list: String,
        source: reqwest::Error,
    },
    #[error("reading the archive list {list}: {source}")]
    Read {
        list: String,
        source: std::io::Error,
    },
    #[error("{list}: not a gzip text list: {source}")]
    Gzip {
        list: String,
        source: std::io::Error,
    },
    #[error("{list}: not a text list")]
    NotText { list: String },
    #[error("{entry} against {base}: {source}")]
    Join {
        entry: String,
        base: String,
        source: url::ParseError,
    },
    #[error("{list}: the list names no archive")]
    Empty { list: String },
}

/// Whether `s` names an archive itself rather than a list of them.
pub fn is_archive_name(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    let l = l.strip_suffix(".gz").unwrap_or(&l);
    [".warc", ".wet", ".wat", ".arc"]
        .iter()
        .any(|ext| l.ends_with(ext))
}

/// The text of a list: a local file or an http(s) URL, gzip or plain.
async fn read_list(list: &str) -> Result<String, ArchiveListError> {
    let fetch = |source| ArchiveListError::Fetch {
        list: list.to_string(),
        source,
    };
    let bytes = if is_url(list) {
        reqwest::get(list)
            .await
            .and_then(|r| r.error_for_status())
            .map_err(fetch)?
            .bytes()
            .await
            .map_err(fetch)?
            .to_vec()
    } else {
        std::fs::read(list).map_err(|source| ArchiveListError::Read {
            list: list.to_string(),
            source,
        })?
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .map_err(|source| ArchiveListError::Gzip {
                list: list.to_string(),
                source,
            })?;
        Ok(text)
    } else {
        String::from_utf8(bytes).map_err(|_| ArchiveListError::NotText {
            list: list.to_string(),
        })
    }
}

/// `entry` as the ingesters will read it: a URL or an absolute path as written; a relative
/// one joined to `base` (a URL prefix or a directory).
fn resolve(entry: &str, base: &str) -> Result<String, ArchiveListError> {
    if is_url(entry) || Path::new(entry).is_absolute() {
        return Ok(entry.to_string());
    }
    if is_url(base) {
        let base = if base.ends_with('/') {
            base.to_string()
        } else {
            format!("{base}/")
        };
        let u = url::Url::parse(&base)
            .and_then(|b| b.join(entry))
            .map_err(|source| ArchiveListError::Join {
                entry: entry.to_string(),
                base: base.clone(),
                source,
            })?;
        return Ok(u.to_string());
    }
    Ok(Path::new(base).join(entry).display().to_string())
}

fn absolute(p: &str) -> Result<String, ArchiveListError> {
    if is_url(p) {
        return Ok(p.to_string());
    }
    std::path::absolute(PathBuf::from(p))
        .map(|a| a.display().to_string())
        .map_err(|source| ArchiveListError::Read {
            list: p.to_string(),
            source,
        })
}

/// Where a relative `entry` of `list` is, with no base given: beside the list, unless the
/// list is a URL whose path starts with the entry's first segment (Common Crawl's lists,
/// `https://data.commoncrawl.org/crawl-data/CC-MAIN-.../warc.paths.gz`, name archives from
/// the bucket's root, `crawl-data/...`): then the URL's origin.
fn beside(list: &str, entry: &str) -> String {
    let dir = match list.rfind('/') {
        Some(i) => list[..=i].to_string(),
        None => ".".to_string(),
    };
    if let Ok(u) = url::Url::parse(list)
        && is_url(list)
    {
        let first = entry.split('/').next().unwrap_or("");
        if !first.is_empty() && u.path().trim_start_matches('/').split('/').next() == Some(first) {
            return u.origin().ascii_serialization() + "/";
        }
    }
    dir
}

/// Every archive the values name, in order, each once. A relative entry of a list is
/// joined to `base` when given (Common Crawl's lists: `https://data.commoncrawl.org/`),
/// else to where the list is.
pub async fn archives(
    values: &[String],
    base: Option<&str>,
) -> Result<Vec<String>, ArchiveListError> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |s: String| {
        if seen.insert(s.clone()) {
            out.push(s);
        }
    };
    for v in values {
        if is_archive_name(v) {
            push(match base {
                Some(b) => resolve(v, b)?,
                None => absolute(v)?,
            });
            continue;
        }
        let list = absolute(v)?;
        let text = read_list(&list).await?;
        let mut n = 0;
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let here = base.map_or_else(|| beside(&list, line), str::to_string);
            push(resolve(line, &here)?);
            n += 1;
        }
        if n == 0 {
            return Err(ArchiveListError::Empty { list: v.clone() });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_crawl_lists_by_url_resolve_from_the_bucket_root() {
        let list = "https://data.commoncrawl.org/crawl-data/CC-MAIN-2024-10/wet.paths.gz";
        let entry = "crawl-data/CC-MAIN-2024-10/segments/1/wet/a.warc.wet.gz";
        assert_eq!(
            resolve(entry, &beside(list, entry)).unwrap(),
            format!("https://data.commoncrawl.org/{entry}")
        );
        let own = "https://mirror.test/lists/warc.paths";
        assert_eq!(
            resolve("a.warc.gz", &beside(own, "a.warc.gz")).unwrap(),
            "https://mirror.test/lists/a.warc.gz"
        );
    }

    #[test]
    fn archive_names_and_lists_are_told_apart() {
        assert!(is_archive_name("x/CC-MAIN-1.warc.gz"));
        assert!(is_archive_name("a.wet.gz"));
        assert!(is_archive_name("old.ARC"));
        assert!(!is_archive_name("warc.paths.gz"));
        assert!(!is_archive_name("archives.txt"));
    }

    #[tokio::test]
    async fn a_gzip_list_resolves_against_the_base_or_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("wet.paths.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(
            &mut gz,
            b"crawl-data/a.wet.gz\n\n# comment\n/abs/b.wet.gz\ncrawl-data/a.wet.gz\n",
        )
        .unwrap();
        std::fs::write(&list, gz.finish().unwrap()).unwrap();
        let v = vec![list.display().to_string()];
        let got = archives(&v, Some("https://data.commoncrawl.org"))
            .await
            .unwrap();
        assert_eq!(
            got,
            [
                "https://data.commoncrawl.org/crawl-data/a.wet.gz",
                "/abs/b.wet.gz"
            ]
        );
        let got = archives(&v, None).await.unwrap();
        assert_eq!(
            got[0],
            dir.path().join("crawl-data/a.wet.gz").display().to_string()
        );
        std::fs::write(dir.path().join("empty.txt"), "\n").unwrap();
        let empty = vec![dir.path().join("empty.txt").display().to_string()];
        assert!(archives(&empty, None).await.is_err());
    }
}

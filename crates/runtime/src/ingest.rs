//! `trawl ingest` as a value: web archives, local or downloaded, through the pipeline into
//! `pages.jsonl` and `report.json`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use trawl_corpus::ingest::{IngestOptions, IngestReport, is_url};

/// One run of `trawl ingest`, as a value.
#[derive(Debug, Clone)]
pub struct IngestPlan {
    /// WARC, WET or ARC files (gzip or plain), or http(s) URLs of such files (downloaded
    /// into `options.out`/downloads first).
    pub inputs: Vec<String>,
    pub options: IngestOptions,
}

/// Ingests every input into `plan.options.out`; a missing file stops the run before any
/// archive is read.
pub async fn ingest(plan: IngestPlan) -> anyhow::Result<IngestReport> {
    let IngestPlan { inputs, options } = plan;
    let mut paths = Vec::new();
    for input in &inputs {
        if is_url(input) {
            let p = download(input, &options.out.join("downloads")).await?;
            tracing::info!("downloaded {input} to {}", p.display());
            paths.push(p);
        } else {
            let p = PathBuf::from(input);
            anyhow::ensure!(p.exists(), "{input}: no such file");
            paths.push(p);
        }
    }
    let report = tokio::task::spawn_blocking(move || {
        trawl_corpus::ingest::ingest(&paths, &options, |p| {
            tracing::info!(
                "{} records read, {} documents, {} malformed",
                p.records,
                p.documents,
                p.malformed
            )
        })
    })
    .await??;
    Ok(report)
}

/// Downloads a remote archive into `dir`, streaming; returns the local path.
async fn download(url: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    use tokio::io::AsyncWriteExt;
    let name = url
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("archive.warc.gz");
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    let mut resp = reqwest::get(url)
        .await
        .with_context(|| format!("fetching {url}"))?
        .error_for_status()
        .with_context(|| format!("fetching {url}"))?;
    let mut f = tokio::fs::File::create(&path).await?;
    while let Some(chunk) = resp.chunk().await? {
        f.write_all(&chunk).await?;
    }
    f.flush().await?;
    Ok(path)
}

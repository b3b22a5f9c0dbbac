//! `trawl index` as a function: the pages of `pages.jsonl` files (or standard input) into an
//! index, outside a crawl.

use std::io::BufRead;
use std::time::{Duration, Instant};

use anyhow::Context;
use trawl_core::PageRecord;
use trawl_index::{IndexOptions, IndexStats, Indexer};

/// How often `index_files` shows its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Indexes every page of `inputs` (`pages.jsonl` files, `-` for standard input) into the
/// index `options` names; `progress` sees the counts and the time taken every 5 s, so the
/// caller decides how (and whether) to show them.
pub async fn index_files(
    options: IndexOptions,
    inputs: &[String],
    progress: &mut dyn FnMut(&IndexStats, Duration),
) -> anyhow::Result<IndexStats> {
    let mut ix = Indexer::open(options).await?;
    let started = Instant::now();
    let mut last = started;
    for input in inputs {
        let reader: Box<dyn BufRead> = if input == "-" {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            Box::new(std::io::BufReader::new(
                std::fs::File::open(input).with_context(|| format!("opening {input}"))?,
            ))
        };
        for (n, line) in reader.lines().enumerate() {
            let line = line.with_context(|| format!("reading {input}"))?;
            if line.trim().is_empty() {
                continue;
            }
            let page: PageRecord = serde_json::from_str(&line)
                .with_context(|| format!("{input}:{}: not a page record", n + 1))?;
            ix.add_page(&page).await?;
            if last.elapsed() >= PROGRESS_EVERY {
                progress(ix.stats(), started.elapsed());
                last = Instant::now();
            }
        }
    }
    Ok(ix.finish().await?)
}

//! `trawl watch`: documentation monitoring, one re-crawl after another in one directory.
//!
//! Each round is a crawl directory `gen-NNNNN` compared with the one before it (`--since`,
//! only the pages whose adaptive revisit time has come are requested, the others carried
//! forward), all of them updating one index (`DIR/index`) and sending their change events
//! to the same webhook. The first round is the silent baseline. A round stopped by Ctrl-C
//! or a kill is resumed by the next `trawl watch`; the oldest rounds beyond `--keep` go,
//! all but their WARC files (`DIR/warc-gen-NNNNN`), which later revisits refer to.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use trawl_store::dir::DirState;

use crate::plan::{CrawlPlan, StartMode};

/// Rounds of re-crawls in one directory.
#[derive(Debug, Clone)]
pub struct WatchPlan {
    /// The crawl's settings; its `out` is the directory of the rounds.
    pub crawl: CrawlPlan,
    /// Time from the end of one round to the start of the next.
    pub every: Duration,
    /// Rounds to run (0: until stopped).
    pub rounds: u64,
    /// Rounds kept on disk, the newest (at least 2: a round reads the one before it).
    pub keep: usize,
}

/// `30m` -> 30 minutes; a bare number is seconds.
pub fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .with_context(|| format!("{s:?} is not a duration (like 45s, 30m, 6h, 1d)"))?;
    let per = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => bail!("{s:?}: the unit is s, m, h or d"),
    };
    let secs = n
        .checked_mul(per)
        .with_context(|| format!("{s:?} is too long"))?;
    Ok(Duration::from_secs(secs))
}

/// The rounds (`gen-NNNNN`) of a watch directory, oldest first.
pub fn generations(dir: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(n) = name.strip_prefix("gen-").and_then(|n| n.parse().ok()) {
            v.push((n, e.path()));
        }
    }
    v.sort();
    Ok(v)
}

/// The next round's options: resume an unfinished round, else start one after the last.
fn next_round(args: &WatchPlan, dir: &Path) -> anyhow::Result<CrawlPlan> {
    let mut o = args.crawl.clone();
    o.start = StartMode::Fresh;
    if o.index.index_uri.is_none() {
        o.index.index_uri = Some(dir.join("index").to_string_lossy().into_owned());
    }
    let gens = generations(dir)?;
    let Some((n, last)) = gens.last() else {
        o.out = dir.join("gen-00001");
        return Ok(o);
    };
    match trawl_store::dir::inspect(last)? {
        DirState::Crawl(s) if !s.finished => {
            o.out = last.clone();
            o.start = StartMode::Resume;
            o.due_only = true;
            o.since = None;
        }
        DirState::Crawl(_) => {
            o.out = dir.join(format!("gen-{:05}", n + 1));
            o.since = Some(last.clone());
            o.due_only = true;
        }
        DirState::Empty => {
            o.out = last.clone();
            o.since = gens.iter().rev().nth(1).map(|(_, p)| p.clone());
            o.due_only = o.since.is_some();
        }
        _ => bail!(
            "{} is not a round trawl watch wrote; move it out of {}",
            last.display(),
            dir.display()
        ),
    }
    Ok(o)
}

/// Removes the older rounds' state and corpus; their WARC files stay, as later rounds'
/// revisit records refer to the full responses in them.
fn prune(dir: &Path, keep: usize) -> anyhow::Result<()> {
    let gens = generations(dir)?;
    let drop = gens.len().saturating_sub(keep.max(2));
    for (_, p) in gens.into_iter().take(drop) {
        let warc = p.join("warc");
        let archive = p.with_file_name(format!(
            "warc-{}",
            p.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        if warc.exists() {
            std::fs::rename(&warc, &archive)
                .with_context(|| format!("keeping {}", warc.display()))?;
        }
        trawl_store::dir::remove_outputs(&p)?;
        let _ = std::fs::remove_dir(&p);
    }
    Ok(())
}

/// One round in the plan's directory (the next one, or the unfinished one resumed), then
/// the rounds beyond `keep` pruned: what a monitor's check runs. With `every_page`, every
/// page is requested again (a monitor's check looks at all of them), not only those whose
/// revisit time has come. Answers the round's directory and report.
pub async fn round(
    args: &WatchPlan,
    every_page: bool,
) -> anyhow::Result<(PathBuf, crate::CrawlReport)> {
    let dir = args.crawl.out.clone();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut o = next_round(args, &dir)?;
    if every_page {
        o.due_only = false;
    }
    let out = o.out.clone();
    let (report, _) = crate::crawl(o).await?;
    if !report.interrupted {
        prune(&dir, args.keep)?;
    }
    Ok((out, report))
}

/// Runs the rounds until `rounds` are done or the crawl is interrupted (Ctrl-C, or the
/// plan's stop).
pub async fn watch(args: WatchPlan) -> anyhow::Result<()> {
    let dir = args.crawl.out.clone();
    if args.crawl.since.is_some() {
        bail!("trawl watch compares each round with the one before it: drop --since");
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut done = 0u64;
    loop {
        let o = next_round(&args, &dir)?;
        let round = o.out.clone();
        let (report, _) = crate::crawl(o).await?;
        tracing::info!(
            round = %round.display(),
            pages = report.pages,
            changes = ?report.changes,
            "round done"
        );
        if report.interrupted {
            return Ok(());
        }
        prune(&dir, args.keep)?;
        done += 1;
        if args.rounds > 0 && done >= args.rounds {
            return Ok(());
        }
        let stop = async {
            match args.crawl.control.stop.clone() {
                Some(mut s) => s.recv().await,
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(args.every) => {}
            _ = stop => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("6h").unwrap(), Duration::from_secs(21_600));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
        assert!(parse_duration("6 weeks").is_err());
        assert!(parse_duration("h").is_err());
    }
}

//! `trawl watch`'s flags, mapped onto the runtime's [`WatchPlan`].

use clap::Args;
use trawl_runtime::watch::{WatchPlan, parse_duration};

use crate::options::CrawlArgs;

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// The crawl's settings; `--out` is the directory of the rounds.
    #[command(flatten)]
    pub crawl: CrawlArgs,
    /// Time from the end of one round to the start of the next (`45s`, `30m`, `6h`, `1d`).
    #[arg(long, default_value = "6h")]
    pub every: String,
    /// Rounds to run (0: until stopped).
    #[arg(long, default_value_t = 0)]
    pub rounds: u64,
    /// Rounds kept on disk, the newest (at least 2: a round reads the one before it).
    #[arg(long, default_value_t = 3)]
    pub keep: usize,
}

impl WatchArgs {
    pub fn into_plan(self, settings: &trawl_core::settings::Settings) -> anyhow::Result<WatchPlan> {
        Ok(WatchPlan {
            every: parse_duration(&self.every)?,
            crawl: self.crawl.into_plan(settings),
            rounds: self.rounds,
            keep: self.keep,
        })
    }
}

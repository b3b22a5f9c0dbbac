//! Where each archive of a distributed ingest stands (`trawl submit --archives`): the
//! ingesters write it as they read, `trawl status` shows it, and an ingester that takes an
//! archive over after a crash resumes after the last record known to be through.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::CoreResult;

/// An archive's stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ArchiveStage {
    /// On the `archives` hop, not taken yet.
    #[default]
    Queued,
    /// An ingester is reading it.
    Reading,
    /// It failed and is on the hop again (`error` says why).
    Retrying,
    /// Every record is through: the archive's message was acked.
    Done,
    /// It failed on its last try and was dead-lettered with `error` as its reason.
    Failed,
}

impl ArchiveStage {
    /// The stage as `trawl status` and the ledger's JSON name it.
    pub fn name(self) -> &'static str {
        match self {
            ArchiveStage::Queued => "queued",
            ArchiveStage::Reading => "reading",
            ArchiveStage::Retrying => "retrying",
            ArchiveStage::Done => "done",
            ArchiveStage::Failed => "failed",
        }
    }
}

/// An archive's progress. Counts are of the whole archive, across tries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ArchiveProgress {
    pub source: String,
    pub stage: ArchiveStage,
    /// Deliveries so far (1 on the first), crashes and stops included.
    pub attempts: u32,
    /// Reads that failed (the archive missing, a download refused); dead-lettered at the
    /// ingester's tries.
    pub failures: u32,
    /// Records read, by WARC type.
    pub records: BTreeMap<String, u64>,
    /// Pages published to the `docs` hop.
    pub documents: u64,
    /// Page-bearing records that gave no page, by reason.
    pub skipped: BTreeMap<String, u64>,
    pub malformed: u64,
    pub duplicates: u64,
    /// Every record up to this number (1 for the first) is through: a try after a crash
    /// starts after it.
    pub through: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The replica that wrote this last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// When this was written, ms since the epoch.
    pub updated_ms: u64,
}

impl ArchiveProgress {
    pub fn queued(source: &str) -> Self {
        ArchiveProgress {
            source: source.to_string(),
            ..Self::default()
        }
    }

    pub fn records_read(&self) -> u64 {
        self.records.values().sum()
    }
}

/// The archives of one crawl, by source.
#[async_trait]
pub trait ArchiveLedger: Send + Sync {
    /// Writes an archive's progress (replacing what was there).
    async fn put(&self, p: &ArchiveProgress) -> CoreResult<()>;
    /// Writes `p` unless its source is known already; whether it wrote.
    async fn add(&self, p: &ArchiveProgress) -> CoreResult<bool>;
    async fn get(&self, source: &str) -> CoreResult<Option<ArchiveProgress>>;
    /// Every archive, in no particular order.
    async fn all(&self) -> CoreResult<Vec<ArchiveProgress>>;
}

/// The ledger in memory (tests, a single process).
#[derive(Default)]
pub struct MemoryLedger {
    map: Mutex<BTreeMap<String, ArchiveProgress>>,
}

impl MemoryLedger {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ArchiveProgress>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl ArchiveLedger for MemoryLedger {
    async fn put(&self, p: &ArchiveProgress) -> CoreResult<()> {
        self.lock().insert(p.source.clone(), p.clone());
        Ok(())
    }

    async fn add(&self, p: &ArchiveProgress) -> CoreResult<bool> {
        let mut map = self.lock();
        if map.contains_key(&p.source) {
            return Ok(false);
        }
        map.insert(p.source.clone(), p.clone());
        Ok(true)
    }

    async fn get(&self, source: &str) -> CoreResult<Option<ArchiveProgress>> {
        Ok(self.lock().get(source).cloned())
    }

    async fn all(&self) -> CoreResult<Vec<ArchiveProgress>> {
        Ok(self.lock().values().cloned().collect())
    }
}

/// The archives of a crawl summed up, for `trawl status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ArchivesSummary {
    pub total: usize,
    /// Archives by stage.
    pub stages: BTreeMap<String, usize>,
    pub records: u64,
    pub documents: u64,
    pub duplicates: u64,
    pub malformed: u64,
    /// The archives not done (all of them when there are few), by source.
    pub unfinished: Vec<ArchiveProgress>,
}

impl ArchivesSummary {
    /// At most `list` unfinished archives are listed: failed ones first, then the others.
    pub fn of(all: &[ArchiveProgress], list: usize) -> Self {
        let mut s = ArchivesSummary {
            total: all.len(),
            ..Self::default()
        };
        for p in all {
            *s.stages.entry(p.stage.name().to_string()).or_default() += 1;
            s.records += p.records_read();
            s.documents += p.documents;
            s.duplicates += p.duplicates;
            s.malformed += p.malformed;
        }
        let mut open: Vec<&ArchiveProgress> = all
            .iter()
            .filter(|p| p.stage != ArchiveStage::Done)
            .collect();
        open.sort_by_key(|p| (p.stage != ArchiveStage::Failed, p.source.clone()));
        s.unfinished = open.into_iter().take(list).cloned().collect();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_summary_counts_stages_and_lists_failures_first() {
        let l = MemoryLedger::default();
        let mut a = ArchiveProgress::queued("a.warc.gz");
        a.stage = ArchiveStage::Done;
        a.records.insert("response".into(), 10);
        a.documents = 9;
        let mut b = ArchiveProgress::queued("b.warc.gz");
        b.stage = ArchiveStage::Failed;
        b.error = Some("404".into());
        let c = ArchiveProgress::queued("c.warc.gz");
        for p in [&a, &b, &c] {
            l.put(p).await.unwrap();
        }
        let s = ArchivesSummary::of(&l.all().await.unwrap(), 10);
        assert_eq!(s.total, 3);
        assert_eq!(s.stages["done"], 1);
        assert_eq!(s.stages["failed"], 1);
        assert_eq!(s.stages["queued"], 1);
        // The names are the ledger's own.
        for stage in [ArchiveStage::Reading, ArchiveStage::Retrying] {
            assert_eq!(serde_json::to_value(stage).unwrap(), stage.name());
        }
        assert_eq!((s.records, s.documents), (10, 9));
        let listed: Vec<&str> = s.unfinished.iter().map(|p| p.source.as_str()).collect();
        assert_eq!(listed, ["b.warc.gz", "c.warc.gz"]);
        assert_eq!(
            ArchivesSummary::of(&l.all().await.unwrap(), 1)
                .unfinished
                .len(),
            1
        );
    }
}

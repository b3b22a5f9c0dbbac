//! The extraction loop shared by both runtimes. Parsing is CPU work: it runs on the blocking
//! pool so that it never stalls the async executor that drives fetches.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use trawl_core::queue::Queue;
use trawl_core::{CoreError, Discovered, Doc, Fetched};
use trawl_dedup::{Gate, HostLines, Verdict, fingerprint};

use crate::process;

/// What the extractor does about repetition: the near-duplicate gate, and the per-host
/// boilerplate lines dropped before fingerprinting. Either can be off.
#[derive(Clone, Default)]
pub struct DedupStage {
    pub gate: Option<Arc<dyn Gate>>,
    pub boilerplate: Option<Arc<HostLines>>,
}

pub async fn run_worker(
    fetched: Arc<dyn Queue<Fetched>>,
    docs: Arc<dyn Queue<Doc>>,
    discovered: Arc<dyn Queue<Discovered>>,
    dedup: DedupStage,
    mut stop: watch::Receiver<bool>,
) -> Result<(), CoreError> {
    let gate = dedup.gate;
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        let batch = tokio::select! {
            b = fetched.pull(8, Duration::from_millis(200)) => b?,
            _ = stop.changed() => continue,
        };
        for d in batch {
            let msg = d.msg;
            let boiler = dedup.boilerplate.clone();
            let mut processed = tokio::task::spawn_blocking(move || {
                let mut p = process(&msg);
                if let Some(b) = &boiler
                    && !p.doc.page.text.is_empty()
                {
                    let (text, dropped) = b.strip(&msg.job.host, &p.doc.page.text);
                    p.doc.page.text = text;
                    p.doc.page.boilerplate_lines = dropped as u32;
                }
                if !p.doc.page.text.is_empty() {
                    let fp = fingerprint(&p.doc.page.text);
                    p.doc.page.simhash = Some(format!("{:016x}", fp.simhash));
                    return (p, Some(fp));
                }
                (p, None)
            })
            .await
            .map_err(|e| CoreError::Backend(format!("extraction task failed: {e}")))?;
            // The gate after extraction, before indexing: the first copy is kept, later ones
            // are recorded as aliases of it (`duplicate_of`) and not indexed again.
            if let (Some(gate), (doc, Some(fp))) = (&gate, &mut processed) {
                let page = &mut doc.doc.page;
                match gate
                    .check_and_insert(*fp, &page.final_url)
                    .await
                    .map_err(|e| CoreError::Backend(format!("dedup gate: {e}")))?
                {
                    Verdict::Kept => {}
                    Verdict::Duplicate { of, distance } => {
                        page.duplicate_of = Some(of);
                        page.distance = Some(distance);
                    }
                }
            }
            let processed = processed.0;
            // Links first, then the record, then the ack: a crash repeats, never loses.
            if let Some(disc) = processed.discovered {
                discovered.publish(disc).await?;
            }
            docs.publish(processed.doc).await?;
            fetched.ack(d.id).await?;
        }
    }
}

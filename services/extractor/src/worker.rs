//! The extraction loop shared by both runtimes. Parsing is CPU work: it runs on the blocking
//! pool so that it never stalls the async executor that drives fetches.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use trawl_core::queue::Queue;
use trawl_core::{CoreError, Discovered, Doc, Fetched};

use crate::process;

pub async fn run_worker(
    fetched: Arc<dyn Queue<Fetched>>,
    docs: Arc<dyn Queue<Doc>>,
    discovered: Arc<dyn Queue<Discovered>>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), CoreError> {
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
            let processed = tokio::task::spawn_blocking(move || process(&msg))
                .await
                .map_err(|e| CoreError::Backend(format!("extraction task failed: {e}")))?;
            // Links first, then the record, then the ack: a crash repeats, never loses.
            if let Some(disc) = processed.discovered {
                discovered.publish(disc).await?;
            }
            docs.publish(processed.doc).await?;
            fetched.ack(d.id).await?;
        }
    }
}

//! Dead letters (`trawl dlq`): a stage's are listed, or put back on the hop they came from.

use trawl_core::CoreError;
use trawl_core::pipeline::{Hop, Stage};
use trawl_core::settings::ClusterSettings;

use crate::jetstream::{DeadLetter, QueueConfig, dead_letters};
use crate::service;

/// Why the dead letters could not be read or replayed.
#[derive(Debug, thiserror::Error)]
pub enum DlqError {
    #[error(
        "unknown stage {0:?}: ingester, frontier, fetcher, extractor, renderer, indexer, \
         refiner or notifier"
    )]
    UnknownStage(String),
    #[error("connecting to NATS: {0}")]
    Connect(String),
    #[error(transparent)]
    Read(#[from] CoreError),
    #[error("{what}: {message}")]
    Replay { what: &'static str, message: String },
}

/// The hop a stage consumes, by the stage's name or the hop's.
pub fn hop_of(stage: &str) -> Result<Hop, DlqError> {
    Stage::from_name(stage)
        .map(Stage::consumes)
        .or_else(|| Hop::from_name(stage))
        .ok_or_else(|| DlqError::UnknownStage(stage.to_string()))
}

/// Up to `limit` dead letters of `hop`, oldest first.
pub async fn list(
    c: &ClusterSettings,
    hop: Hop,
    limit: usize,
) -> Result<Vec<DeadLetter>, DlqError> {
    let client = service::nats(c).await.map_err(DlqError::Connect)?;
    Ok(dead_letters(&client, &QueueConfig::from_settings(c, hop), limit).await?)
}

/// Puts up to `limit` dead letters of `hop` back on it, oldest first; returns how many and
/// the subject they went to.
pub async fn replay(
    c: &ClusterSettings,
    hop: Hop,
    limit: usize,
) -> Result<(usize, String), DlqError> {
    let client = service::nats(c).await.map_err(DlqError::Connect)?;
    let q = QueueConfig::from_settings(c, hop);
    let letters = dead_letters(&client, &q, limit).await?;
    let js = async_nats::jetstream::new(client);
    let dl = js
        .get_stream(&q.dead_letter_stream)
        .await
        .map_err(|e| failed("dead-letter stream", e))?;
    for d in &letters {
        let payload = replayable(hop, &d.payload);
        // Back on the hop first, then out of the dead letters: never lost in between.
        js.publish(q.subject.clone(), payload.into())
            .await
            .map_err(|e| failed("republishing", e))?
            .await
            .map_err(|e| failed("republishing", e))?;
        dl.delete_message(d.seq)
            .await
            .map_err(|e| failed("removing the dead letter", e))?;
    }
    Ok((letters.len(), q.subject))
}

fn failed(what: &'static str, e: impl std::fmt::Display) -> DlqError {
    DlqError::Replay {
        what,
        message: e.to_string(),
    }
}

/// A dead letter as it goes back on its hop. A fetch job leaves its host claim behind
/// (released when it was dead-lettered): without one, the fetcher puts it in its host's
/// queue to be claimed anew.
fn replayable(hop: Hop, payload: &str) -> Vec<u8> {
    if hop == Hop::Fetch
        && let Ok(mut v) = serde_json::from_str::<serde_json::Value>(payload)
        && let Some(job) = v.as_object_mut()
    {
        job.remove("claim");
        return serde_json::to_vec(&v).unwrap_or_else(|_| payload.as_bytes().to_vec());
    }
    payload.as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_and_hops_name_the_hop_read() {
        assert_eq!(hop_of("fetcher").unwrap(), Stage::Fetcher.consumes());
        assert_eq!(hop_of("fetch").unwrap(), Hop::Fetch);
        assert!(matches!(hop_of("fetchr"), Err(DlqError::UnknownStage(_))));
    }

    #[test]
    fn a_replayed_fetch_job_loses_its_claim_and_nothing_else() {
        let job = r#"{"url":"http://a.test/","claim":{"token":7},"depth":2}"#;
        let out: serde_json::Value = serde_json::from_slice(&replayable(Hop::Fetch, job)).unwrap();
        assert_eq!(
            out,
            serde_json::json!({"url": "http://a.test/", "depth": 2})
        );
        // Other hops, and payloads that are not objects, go back as they were.
        assert_eq!(replayable(Hop::Fetched, job), job.as_bytes());
        assert_eq!(replayable(Hop::Fetch, "not json"), b"not json");
    }
}

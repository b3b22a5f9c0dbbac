//! The queue's recovery from what goes wrong on the server's side: messages that will never
//! succeed copied to the dead-letter stream (the max-deliveries advisory, for a consumer
//! that died holding one), and a consumer made again when its state ran ahead of its
//! stream's (a nats-server killed with `kill -9`).

use super::*;

/// The one field a dead letter's subject needs, read without the rest of the message.
#[derive(serde::Deserialize)]
struct CrawlOf {
    crawl: Option<String>,
}

pub(super) async fn publish_dead_letter(
    js: &jetstream::Context,
    cfg: &QueueConfig,
    payload: bytes::Bytes,
    reason: &str,
    seq: u64,
    attempt: u32,
) -> CoreResult<()> {
    let mut headers = HeaderMap::new();
    headers.insert("Trawl-Reason", reason);
    headers.insert("Trawl-Stream", cfg.stream.as_str());
    headers.insert("Trawl-Stream-Seq", seq.to_string().as_str());
    headers.insert("Trawl-Deliveries", attempt.to_string().as_str());
    // The consumer and the max-deliveries watcher can both copy one message (the advisory
    // read it before the consumer deleted it): JetStream's duplicate window keeps one.
    if seq > 0 {
        headers.insert("Nats-Msg-Id", format!("{}:{seq}", cfg.stream).as_str());
    }
    // The crawl the message belongs to, when its JSON says (every hop's message does).
    let crawl = serde_json::from_slice::<CrawlOf>(&payload)
        .ok()
        .and_then(|c| c.crawl);
    let subject = match crawl {
        Some(c) => dead_letter_subject_of(cfg, &c),
        None => cfg.dead_letter_subject.clone(),
    };
    js.publish_with_headers(subject, headers, payload)
        .await
        .map_err(|e| backend("dead-letter publish", e))?
        .await
        .map_err(|e| backend("dead-letter ack", e))?;
    Ok(())
}

/// The server's word that a message ran out of deliveries (its consumer died holding it,
/// or never acked it): copy it to the dead-letter stream and delete it from the queue.
pub(super) async fn watch_max_deliveries(
    client: async_nats::Client,
    js: jetstream::Context,
    cfg: QueueConfig,
) {
    let subject = format!(
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{}.{}",
        cfg.stream, cfg.consumer
    );
    let Ok(mut sub) = client.subscribe(subject).await else {
        tracing::warn!("cannot watch max-deliveries advisories for {}", cfg.stream);
        return;
    };
    while let Some(adv) = sub.next().await {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&adv.payload) else {
            continue;
        };
        let Some(seq) = v["stream_seq"].as_u64() else {
            continue;
        };
        let deliveries = v["deliveries"].as_u64().unwrap_or(0) as u32;
        let Ok(stream) = js.get_stream(&cfg.stream).await else {
            continue;
        };
        // Already gone: the consumer dead-lettered it itself.
        let Ok(raw) = stream.get_raw_message(seq).await else {
            continue;
        };
        if publish_dead_letter(&js, &cfg, raw.payload, "max_deliveries", seq, deliveries)
            .await
            .is_ok()
        {
            let _ = stream.delete_message(seq).await;
        }
    }
}

impl<M> JetStreamQueue<M>
where
    M: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// Makes the consumer again when the stream holds messages it will never deliver:
    /// more messages than it has waiting and unacknowledged together, on two looks
    /// [`STRAND_CHECK`] apart with the same first message. A nats-server killed with
    /// `kill -9` can come back with its consumer's state ahead of its stream's (each is
    /// flushed on its own); the messages below the consumer's position then wait forever
    /// while every stage looks healthy. The consumer made again starts at the stream's
    /// first message; a copy of one handled before is handled again, as after any
    /// redelivery. Asked at most every [`STRAND_CHECK`] by one of the replica's workers.
    pub(super) async fn unstrand(&self) {
        let Ok(mut strand) = self.strand.try_lock() else {
            return;
        };
        if strand.checked.is_some_and(|t| t.elapsed() < STRAND_CHECK) {
            return;
        }
        strand.checked = Some(std::time::Instant::now());
        let consumer = self
            .consumer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let stream = self.stream.lock().await.clone();
        // A consumer gone (made again by another replica whose create failed, removed by
        // hand): made again, or every pull fails.
        if let Err(e) = consumer.get_info().await {
            use jetstream::context::ConsumerInfoErrorKind as K;
            let missing = match e.kind() {
                K::NotFound => true,
                K::JetStream(j) => j.error_code() == jetstream::ErrorCode::CONSUMER_NOT_FOUND,
                _ => false,
            };
            if missing {
                tracing::warn!(stream = %self.cfg.stream, "consumer gone: making it again");
                self.make_consumer(&stream).await;
            }
            return;
        }
        // The consumer's counts between two readings of the stream that agree: nothing
        // was published or removed meanwhile, so they describe the same messages.
        let (Ok(before), Ok(info), Ok(after)) = (
            stream.get_info().await,
            consumer.get_info().await,
            stream.get_info().await,
        ) else {
            return;
        };
        let (b, a) = (&before.state, &after.state);
        if (b.messages, b.first_sequence, b.last_sequence)
            != (a.messages, a.first_sequence, a.last_sequence)
        {
            return;
        }
        let stranded = b.messages > info.num_pending + info.num_ack_pending as u64;
        if !stranded {
            strand.first = None;
            return;
        }
        if strand.first != Some(b.first_sequence) {
            strand.first = Some(b.first_sequence);
            return;
        }
        let sinfo = after;
        strand.first = None;
        tracing::warn!(
            stream = %self.cfg.stream,
            messages = sinfo.state.messages,
            consumer = %self.cfg.consumer,
            "messages stranded below the consumer's position (a server restart kept its \
             consumer state ahead of its stream): making the consumer again"
        );
        // Another replica may be doing the same: whichever consumer is made last is the
        // one every replica pulls from, by name.
        let _ = stream.delete_consumer(&self.cfg.consumer).await;
        self.make_consumer(&stream).await;
    }

    /// The durable consumer, made (or taken) anew; a failure is logged and tried again at
    /// the next look.
    async fn make_consumer(&self, stream: &stream::Stream) {
        let made: Result<PullConsumer, _> = stream
            .get_or_create_consumer(&self.cfg.consumer, consumer_config(&self.cfg))
            .await;
        match made {
            Ok(c) => *self.consumer.lock().unwrap_or_else(|e| e.into_inner()) = c,
            Err(e) => tracing::warn!(stream = %self.cfg.stream, "consumer not made again: {e}"),
        }
    }
}

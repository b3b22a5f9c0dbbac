//! The JetStream queue against a real nats-server on loopback (started by
//! `scripts/services.sh`); `TRAWL_REQUIRE_SERVICES=1` makes a missing server a failure.

use std::time::Duration;

use trawl_cluster::jetstream::{JetStreamQueue, QueueConfig, dead_letters};
use trawl_core::pipeline::Hop;
use trawl_core::queue::Queue;

const URL: &str = "nats://127.0.0.1:4222";

async fn client() -> Option<async_nats::Client> {
    match async_nats::connect(URL).await {
        Ok(c) => Some(c),
        Err(e) => {
            if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("nats-server required at {URL} (TRAWL_REQUIRE_SERVICES=1): {e}");
            }
            eprintln!("SKIPPED: no nats-server at {URL}: {e}");
            None
        }
    }
}

/// A hop of its own per test, so tests never share messages.
fn cfg(max_deliver: i64, ack_wait: Duration) -> QueueConfig {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let mut c = QueueConfig::for_hop(&format!("t{}", &tag[..12]), Hop::Fetched);
    c.max_deliver = max_deliver;
    c.ack_wait = ack_wait;
    c
}

async fn cleanup(client: &async_nats::Client, c: &QueueConfig) {
    let js = async_nats::jetstream::new(client.clone());
    let _ = js.delete_stream(&c.stream).await;
    let _ = js.delete_stream(&c.dead_letter_stream).await;
}

/// Two processes starting a hop at once under other limits (a service, `trawl submit`
/// with another ack wait): whichever creates the stream and consumer first, both connect.
#[tokio::test]
async fn replicas_starting_at_once_under_other_limits_both_connect() {
    let Some(client) = client().await else { return };
    for _ in 0..10 {
        let a = cfg(5, Duration::from_secs(1));
        let mut b = a.clone();
        b.ack_wait = Duration::from_secs(120);
        b.max_deliver = 50;
        let (qa, qb) = tokio::join!(
            JetStreamQueue::<u32>::connect(&client, a.clone()),
            JetStreamQueue::<u32>::connect(&client, b)
        );
        let (qa, qb) = (qa.unwrap(), qb.unwrap());
        qa.publish(7).await.unwrap();
        assert_eq!(qb.len().await.unwrap(), 1);
        cleanup(&client, &a).await;
    }
}

#[tokio::test]
async fn published_messages_are_pulled_once_and_acked_away() {
    let Some(client) = client().await else { return };
    let c = cfg(5, Duration::from_secs(30));
    let q: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    // A second replica's start-up finds the same stream and consumer.
    let q2: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    for i in 0..100 {
        q.publish(i).await.unwrap();
    }
    assert_eq!(q.len().await.unwrap(), 100);
    let mut seen = Vec::new();
    while seen.len() < 100 {
        let (a, b) = tokio::join!(
            q.pull(16, Duration::from_millis(500)),
            q2.pull(16, Duration::from_millis(500))
        );
        for d in a.unwrap() {
            assert_eq!(d.attempt, 1);
            seen.push(d.msg);
            q.ack(d.id).await.unwrap();
        }
        for d in b.unwrap() {
            seen.push(d.msg);
            q2.ack(d.id).await.unwrap();
        }
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..100).collect::<Vec<_>>(),
        "each message exactly once"
    );
    // Acked messages leave a work queue.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(q.len().await.unwrap(), 0);
    assert!(
        q.pull(8, Duration::from_millis(200))
            .await
            .unwrap()
            .is_empty()
    );
    cleanup(&client, &c).await;
}

#[tokio::test]
async fn nak_redelivers_after_the_delay_and_the_last_failure_is_dead_lettered() {
    let Some(client) = client().await else { return };
    let c = cfg(3, Duration::from_secs(30));
    let q: JetStreamQueue<String> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    q.publish("poison".to_string()).await.unwrap();
    q.publish("fine".to_string()).await.unwrap();
    let mut attempts = Vec::new();
    let mut fine_done = false;
    let start = std::time::Instant::now();
    while (attempts.len() < 3 || !fine_done) && start.elapsed() < Duration::from_secs(10) {
        for d in q.pull(4, Duration::from_millis(300)).await.unwrap() {
            if d.msg == "poison" {
                attempts.push((d.attempt, start.elapsed()));
                q.nak(d.id, Duration::from_millis(200)).await.unwrap();
            } else {
                fine_done = true;
                q.ack(d.id).await.unwrap();
            }
        }
    }
    // The poison message never blocked the other one, was tried max_deliver times with
    // the delay between tries, then moved to the dead-letter stream with its reason.
    assert!(fine_done);
    assert_eq!(
        attempts.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(attempts[1].1 - attempts[0].1 >= Duration::from_millis(190));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(q.len().await.unwrap(), 0);
    let dl = dead_letters(&client, &c, 10).await.unwrap();
    assert_eq!(dl.len(), 1);
    assert_eq!(dl[0].reason, "max_deliveries");
    assert_eq!(dl[0].deliveries, 3);
    assert_eq!(dl[0].payload, "\"poison\"");
    cleanup(&client, &c).await;
}

#[tokio::test]
async fn terminated_and_undecodable_messages_go_to_the_dead_letter_stream() {
    let Some(client) = client().await else { return };
    let c = cfg(5, Duration::from_secs(30));
    let q: JetStreamQueue<u64> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    q.publish(7).await.unwrap();
    // Bytes that are not a message of this queue, published by someone else.
    let js = async_nats::jetstream::new(client.clone());
    js.publish(c.subject.clone(), "not json".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..5 {
        got.extend(q.pull(4, Duration::from_millis(300)).await.unwrap());
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got.len(), 1, "the undecodable message is not handed out");
    q.term(got[0].id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(q.len().await.unwrap(), 0);
    let dl = dead_letters(&client, &c, 10).await.unwrap();
    let mut reasons: Vec<&str> = dl.iter().map(|d| d.reason.as_str()).collect();
    reasons.sort_unstable();
    assert_eq!(reasons.len(), 2, "{dl:?}");
    assert!(reasons[0].starts_with("terminated"), "{reasons:?}");
    assert!(reasons[1].starts_with("undecodable"), "{reasons:?}");
    cleanup(&client, &c).await;
}

#[tokio::test]
async fn a_consumer_that_dies_holding_a_message_does_not_lose_it() {
    let Some(client) = client().await else { return };
    let c = cfg(2, Duration::from_secs(1));
    {
        let q: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
        q.publish(42).await.unwrap();
        let d = q.pull(1, Duration::from_millis(500)).await.unwrap();
        assert_eq!(d.len(), 1);
        // Dropped without an ack: a replica killed mid-work.
    }
    let q: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    let d = q.pull(1, Duration::from_secs(3)).await.unwrap();
    assert_eq!(d.len(), 1, "redelivered after ack_wait");
    assert_eq!(d[0].msg, 42);
    assert_eq!(d[0].attempt, 2);
    // And dies again on its last delivery (a delivery dropped by a live queue is kept
    // alive: the process, queue and all, must go): when the server next looks for work
    // for this consumer, its max-deliveries advisory moves the message to the dead-letter
    // stream.
    drop(d);
    drop(q);
    let q: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    let start = std::time::Instant::now();
    let mut dl = Vec::new();
    while dl.is_empty() && start.elapsed() < Duration::from_secs(8) {
        assert!(
            q.pull(1, Duration::from_millis(300))
                .await
                .unwrap()
                .is_empty()
        );
        dl = dead_letters(&client, &c, 10).await.unwrap();
    }
    assert_eq!(dl.len(), 1, "dead-lettered by the advisory");
    assert_eq!(dl[0].reason, "max_deliveries");
    assert_eq!(q.len().await.unwrap(), 0);
    cleanup(&client, &c).await;
}

#[tokio::test]
async fn a_keyed_message_published_again_is_stored_once_and_a_term_keeps_its_reason() {
    let Some(client) = client().await else { return };
    let c = cfg(5, Duration::from_secs(100));
    let q: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    // A producer taken over after the ack wait repeats its last steps inside the window.
    let js = async_nats::jetstream::new(client.clone());
    let mut stream = js.get_stream(&c.stream).await.unwrap();
    let window = stream.info().await.unwrap().config.duplicate_window;
    assert_eq!(window, Duration::from_secs(260));
    q.publish_keyed(1, "k1").await.unwrap();
    q.publish_keyed(1, "k1").await.unwrap();
    q.publish_keyed(2, "k2").await.unwrap();
    assert_eq!(q.len().await.unwrap(), 2);
    // Consumed and acked, then published again under its key: still not delivered again.
    let got = q.pull(10, Duration::from_millis(500)).await.unwrap();
    assert_eq!(got.len(), 2);
    for d in &got {
        q.ack(d.id).await.unwrap();
    }
    q.publish_keyed(1, "k1").await.unwrap();
    assert!(
        q.pull(10, Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty()
    );
    // Unkeyed messages are not deduplicated.
    q.publish(3).await.unwrap();
    q.publish(3).await.unwrap();
    let got = q.pull(10, Duration::from_millis(500)).await.unwrap();
    assert_eq!(got.len(), 2);
    q.term_with(got[0].id, "archive: HTTP 404").await.unwrap();
    q.ack(got[1].id).await.unwrap();
    let dead = dead_letters(&client, &c, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "archive: HTTP 404");
    cleanup(&client, &c).await;
}

/// A delivery a live replica holds past the ack wait (a slow page, a long render) is kept
/// alive: no other replica is handed it meanwhile, and its ack then removes it.
#[tokio::test]
async fn a_delivery_held_past_the_ack_wait_is_not_handed_to_another_replica() {
    let Some(client) = client().await else { return };
    let c = cfg(5, Duration::from_secs(1));
    let holder: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    let other: JetStreamQueue<u32> = JetStreamQueue::connect(&client, c.clone()).await.unwrap();
    holder.publish(7).await.unwrap();
    let d = holder.pull(1, Duration::from_secs(1)).await.unwrap();
    assert_eq!(d.len(), 1);
    // Three ack waits, asking all along.
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        let got = other.pull(1, Duration::from_millis(300)).await.unwrap();
        assert!(
            got.is_empty(),
            "handed out again while held: {:?}",
            got[0].msg
        );
    }
    holder.ack(d[0].id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(holder.len().await.unwrap(), 0);
    cleanup(&client, &c).await;
}

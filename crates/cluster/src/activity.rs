//! When each hop's consumer in this process last got something done: a pull that brought
//! messages, an ack, a nak, a progress report. `/readyz` holds it against the messages
//! waiting for the consumer, so a stage that is alive and connected but consumes nothing
//! is not ready, and Kubernetes starts it again.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

fn table() -> &'static Mutex<HashMap<String, Instant>> {
    static T: OnceLock<Mutex<HashMap<String, Instant>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The consumer of `stream` got something done now.
pub fn mark(stream: &str) {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    match t.get_mut(stream) {
        Some(at) => *at = Instant::now(),
        None => {
            t.insert(stream.to_string(), Instant::now());
        }
    }
}

/// How long since the consumer of `stream` last got something done; `None` when it never
/// did in this process.
pub fn idle_for(stream: &str) -> Option<Duration> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.get(stream).map(|at| at.elapsed())
}

/// Whether a consumer is stalled: messages wait for it and it got nothing done for
/// `after` (counted from `since`, the process's start, when it never did).
pub fn stalled(waiting: u64, idle: Option<Duration>, since: Duration, after: Duration) -> bool {
    waiting > 0 && idle.unwrap_or(since) >= after
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consumer_with_work_waiting_and_nothing_done_is_stalled() {
        let s = Duration::from_secs;
        assert!(!stalled(0, None, s(600), s(60)), "nothing waits");
        assert!(!stalled(5, Some(s(10)), s(600), s(60)), "busy");
        assert!(stalled(5, Some(s(61)), s(600), s(60)));
        assert!(!stalled(5, None, s(30), s(60)), "just started");
        assert!(stalled(5, None, s(90), s(60)), "never consumed since start");
        mark("TEST_ACTIVITY");
        assert!(idle_for("TEST_ACTIVITY").unwrap() < s(5));
        assert!(idle_for("TEST_NEVER").is_none());
    }
}

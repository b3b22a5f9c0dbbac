//! Wall-clock milliseconds: the unit of every time stored in shared state, because the
//! cluster's state (Redis) is shared across machines and cannot hold `Instant`s.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

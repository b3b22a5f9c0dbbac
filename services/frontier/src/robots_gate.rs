//! robots.txt at admission: a URL its host's rules disallow is counted
//! (`frontier.robots_blocked`) and never admitted, so it uses none of `--max-pages`.
//!
//! The rules are the ones the fetchers keep in the shared robots cache: a host's file is
//! fetched with its first job, before any of its pages, and links are only found on fetched
//! pages, so every link of a host is checked here. What is admitted before its host's file
//! is known (seeds, the first links to a new host) or while the file is unreachable (the
//! fetcher makes those wait) is checked by the fetcher as before.

use std::sync::Arc;

use trawl_core::CoreResult;
use trawl_core::state::{RobotsAccess, State};
use trawl_robots::{HostRules, LocalRobots};
use url::Url;

/// How long parsed rules are used before the shared cache is asked again: a file the
/// fetchers fetched anew (after its TTL) reaches admission within this.
const RULES_MS: u64 = 60_000;

pub(crate) struct RobotsGate {
    agent: String,
    /// Parsed rules by host (the fetcher's bounded cache), until the time they are asked
    /// for again. "Not known yet" is never kept: the file usually arrives a moment later
    /// (with the host's first page), and the shared cache is asked per URL until it does
    /// (the seen-set is asked per URL anyway).
    hosts: LocalRobots,
}

impl RobotsGate {
    pub(crate) fn new(agent: String) -> Self {
        Self {
            agent,
            hosts: LocalRobots::default(),
        }
    }

    /// False when the host's known rules disallow `url`; true when they allow it or are
    /// not known.
    pub(crate) async fn allows(
        &self,
        state: &dyn State,
        host: &str,
        url: &Url,
        now_ms: u64,
    ) -> CoreResult<bool> {
        if let Some(rules) = self.hosts.get(host, now_ms) {
            return Ok(rules.allows(url));
        }
        let rules = match state.robots_get(host, now_ms).await? {
            // Unreachable means "wait", which the fetcher does: not a verdict on the URL.
            Some(e) if e.access != RobotsAccess::Unreachable => {
                Arc::new(HostRules::from_entry(&e, &self.agent))
            }
            _ => return Ok(true),
        };
        let allowed = rules.allows(url);
        self.hosts.put(host, rules, now_ms + RULES_MS);
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_core::state::{MemoryState, RobotsEntry, WorkTracker};

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[tokio::test]
    async fn known_rules_decide_and_unknown_or_unreachable_hosts_pass() {
        let state = MemoryState::new(100, 1, WorkTracker::default());
        let gate = RobotsGate::new("trawl".into());
        let body = b"User-agent: *\nDisallow: /private/\n".to_vec();
        state
            .robots_put(
                "a.test",
                RobotsEntry {
                    access: RobotsAccess::Body(body),
                    fetched_at_ms: 0,
                    tdmrep: None,
                },
                u64::MAX / 2,
            )
            .await
            .unwrap();
        state
            .robots_put(
                "down.test",
                RobotsEntry {
                    access: RobotsAccess::Unreachable,
                    fetched_at_ms: 0,
                    tdmrep: None,
                },
                u64::MAX / 2,
            )
            .await
            .unwrap();
        let ok = |u: &'static str, host: &'static str, at: u64| {
            let (gate, state) = (&gate, &state);
            async move { gate.allows(state, host, &url(u), at).await.unwrap() }
        };
        assert!(!ok("http://a.test/private/x", "a.test", 1).await);
        assert!(ok("http://a.test/public", "a.test", 1).await);
        assert!(ok("http://new.test/private/x", "new.test", 1).await);
        assert!(ok("http://down.test/private/x", "down.test", 1).await);

        // A host's file that arrives later is used at once.
        let body = b"User-agent: *\nDisallow: /\n".to_vec();
        state
            .robots_put(
                "new.test",
                RobotsEntry {
                    access: RobotsAccess::Body(body),
                    fetched_at_ms: 2,
                    tdmrep: None,
                },
                u64::MAX / 2,
            )
            .await
            .unwrap();
        assert!(!ok("http://new.test/x", "new.test", 2).await);
    }
}

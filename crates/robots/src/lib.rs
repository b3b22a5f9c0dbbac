//! robots.txt per RFC 9309, read the way Google reads it (longest match, `*` and `$`, merged
//! user-agent groups, 500 KiB cap), through `robotxt`. Raw results live in shared state with a
//! TTL so every replica shares one fetch; each process keeps the parsed form. The fetcher
//! checks every hop with these rules; the frontier checks each URL before it is admitted,
//! once its host's file is known.

pub mod google;
pub mod signals;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use robotxt::Agent;
pub use robotxt::{BYTE_LIMIT, Robots};
use trawl_core::state::{RobotsAccess, RobotsEntry};
use url::Url;

/// What the fetcher needs from one host's robots.txt.
#[derive(Debug)]
pub struct HostRules {
    pub robots: Robots,
    pub access: Access,
    /// Content Signals (from robots.txt) and tdmrep.json.
    pub signals: signals::HostSignals,
}

/// Where a host's rules came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The host's robots.txt.
    Rules,
    /// robots.txt answered 4xx: everything is allowed.
    Unavailable,
    /// robots.txt answered 5xx or nothing: everything is disallowed.
    Unreachable,
}

impl Access {
    /// Why a URL of the host was not fetched, for its record.
    pub fn blocked_reason(self) -> &'static str {
        match self {
            Access::Rules => "disallowed by robots.txt",
            Access::Unavailable => "robots.txt unavailable (4xx): everything allowed",
            Access::Unreachable => {
                "robots.txt unreachable (5xx or no answer): everything disallowed"
            }
        }
    }
}

impl HostRules {
    pub fn from_entry(entry: &RobotsEntry, agent: &str) -> Self {
        let body = match &entry.access {
            RobotsAccess::Body(b) => Some(b.as_slice()),
            _ => None,
        };
        let signals = signals::HostSignals::parse(body, entry.tdmrep.as_deref(), agent);
        let (robots, access) = match &entry.access {
            RobotsAccess::Body(body) => (
                Robots::parse(&crate::google::prepare(body), Agent::Prefix(agent)),
                Access::Rules,
            ),
            RobotsAccess::Unavailable => (Robots::allow_all(), Access::Unavailable),
            RobotsAccess::Unreachable => (Robots::disallow_all(), Access::Unreachable),
        };
        Self {
            robots,
            access,
            signals,
        }
    }

    /// The host's AI-usage signals for `url`'s path.
    pub fn usage(&self, url: &Url) -> trawl_core::policy::Usage {
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        self.signals.usage(&path)
    }

    pub fn allows(&self, url: &Url) -> bool {
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        self.robots.is_allowed(&crate::google::path(&path))
    }
}

/// Hosts whose parsed rules a process keeps, at most.
const LOCAL_HOSTS: usize = 4_096;

/// Parsed rules by host, valid until the shared entry's TTL runs out.
#[derive(Default)]
pub struct LocalRobots {
    map: Mutex<HashMap<String, (Arc<HostRules>, u64)>>,
}

impl LocalRobots {
    pub fn get(&self, host: &str, now_ms: u64) -> Option<Arc<HostRules>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(host)
            .filter(|(_, exp)| *exp > now_ms)
            .map(|(r, _)| r.clone())
    }

    pub fn put(&self, host: &str, rules: Arc<HostRules>, expires_ms: u64) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= LOCAL_HOSTS {
            // A crawl of many hosts: the parsed rules are a cache of the shared entries,
            // so dropping them costs a parse, never a fetch.
            let now = trawl_core::clock::now_ms();
            map.retain(|_, (_, exp)| *exp > now);
            if map.len() >= LOCAL_HOSTS {
                map.clear();
            }
        }
        map.insert(host.to_string(), (rules, expires_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(txt: &str) -> HostRules {
        HostRules::from_entry(
            &RobotsEntry {
                access: RobotsAccess::Body(txt.as_bytes().to_vec()),
                fetched_at_ms: 0,
                tdmrep: None,
            },
            "trawl",
        )
    }

    fn ok(r: &HostRules, path: &str) -> bool {
        r.allows(&Url::parse(&format!("http://h{path}")).unwrap())
    }

    #[test]
    fn longest_match_wins_and_allow_wins_ties() {
        let r = rules(
            "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\nAllow: /x\nDisallow: /x\n",
        );
        assert!(!ok(&r, "/a"));
        assert!(ok(&r, "/a/b"));
        assert!(!ok(&r, "/a/b/c/d"));
        assert!(ok(&r, "/x"), "equal length: allow wins");
        assert!(ok(&r, "/z"));
    }

    #[test]
    fn wildcards_and_end_anchor() {
        let r = rules("User-agent: *\nDisallow: /*.pdf$\nDisallow: /private*/\nDisallow: /q?*s=\n");
        assert!(!ok(&r, "/doc/file.pdf"));
        assert!(ok(&r, "/doc/file.pdf?x=1"));
        assert!(!ok(&r, "/private-stuff/x"));
        assert!(!ok(&r, "/q?a=1&s=2"));
        assert!(ok(&r, "/q?a=1"));
    }

    #[test]
    fn specific_group_beats_star_and_groups_merge() {
        let r = rules(
            "User-agent: *\nDisallow: /\n\nUser-agent: trawl\nDisallow: /no\n\nUser-agent: other\nUser-agent: TRAWL\nDisallow: /also-no\nCrawl-delay: 2\n",
        );
        assert!(ok(&r, "/yes"));
        assert!(!ok(&r, "/no"));
        assert!(!ok(&r, "/also-no"));
        assert_eq!(
            r.robots.crawl_delay(),
            Some(std::time::Duration::from_secs(2))
        );
    }

    #[test]
    fn status_rules() {
        let unavailable = HostRules::from_entry(
            &RobotsEntry {
                access: RobotsAccess::Unavailable,
                fetched_at_ms: 0,
                tdmrep: None,
            },
            "trawl",
        );
        assert!(ok(&unavailable, "/anything"));
        let unreachable = HostRules::from_entry(
            &RobotsEntry {
                access: RobotsAccess::Unreachable,
                fetched_at_ms: 0,
                tdmrep: None,
            },
            "trawl",
        );
        assert!(!ok(&unreachable, "/anything"));
    }

    #[test]
    fn rules_past_500_kib_are_ignored() {
        let mut txt = String::from("User-agent: *\n");
        while txt.len() < 600 * 1024 {
            txt.push_str("# padding padding padding padding padding padding\n");
        }
        txt.push_str("Disallow: /late\n");
        assert!(ok(&rules(&txt), "/late"));
    }

    /// Google's readings (its robots.txt documentation and `robots_test.cc`).
    #[test]
    fn a_user_agent_value_is_matched_up_to_its_first_space() {
        let r = rules("User-agent: trawl crawler 2.0\nDisallow: /\n");
        assert!(!ok(&r, "/x"), "the group of trawl");
        let r = rules("User-agent: trawl/2.1\nDisallow: /\n");
        assert!(!ok(&r, "/x"));
    }

    #[test]
    fn an_allowed_index_html_allows_its_directory() {
        let r = rules("User-agent: *\nDisallow: /\nAllow: /allowed-slash/index.html\n");
        assert!(ok(&r, "/allowed-slash/"));
        assert!(ok(&r, "/allowed-slash/index.html"));
        assert!(!ok(&r, "/allowed-slash/other.html"));
        assert!(!ok(&r, "/anyother-url"));
    }

    #[test]
    fn an_over_long_line_is_cut_at_googles_limit() {
        let prefix = "Disallow: /";
        let long = format!("User-agent: *\n{prefix}{}qux\n", "a".repeat(20_000));
        let kept = crate::google::MAX_LINE_BYTES - prefix.len();
        let r = rules(&long);
        assert!(
            !ok(&r, &format!("/{}b", "a".repeat(kept))),
            "the rule is the line's first 16,664 bytes"
        );
        assert!(ok(&r, &format!("/{}", "a".repeat(kept - 1))));
    }

    #[test]
    fn percent_encoded_characters_are_matched_as_written() {
        let r = rules("User-agent: *\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n");
        assert!(!ok(&r, "/foo/bar/baz"), "%62%61%7A is not baz");
        assert!(ok(&r, "/foo/bar/%62%61%7A"));
        let r = rules("User-agent: *\nDisallow: /\nAllow: /foo/bar/baz\n");
        assert!(!ok(&r, "/foo/bar/%62%61%7A"));
        assert!(ok(&r, "/foo/bar/baz"));
    }

    #[test]
    fn hostile_input_does_not_panic() {
        for txt in [
            "\0\0\0",
            "User-agent:\nDisallow:",
            "Disallow: /*$*$*$",
            &"é".repeat(100_000),
        ] {
            let r = rules(txt);
            let _ = ok(&r, "/é/x");
        }
    }
}

//! Per-host boilerplate lines, found while the crawl streams: a line (paragraph) that has
//! appeared on `min_pages` earlier pages of the same host ("Was this page helpful?", a
//! newsletter pitch, a license footer that escaped extraction) is dropped from later pages
//! before they are fingerprinted and indexed. The first pages of a host keep their lines:
//! nothing is known about the host yet.
//!
//! Memory is bounded: only lines up to [`MAX_LINE_CHARS`] are tracked (boilerplate is short),
//! each host keeps at most `max_lines_per_host` line hashes, and there are at most
//! `max_hosts` hosts (the least recently seen is forgotten).

use std::collections::HashMap;
use std::sync::Mutex;

use xxhash_rust::xxh3::xxh3_64;

/// Longer lines are never boilerplate here.
pub const MAX_LINE_CHARS: usize = 300;

#[derive(Debug, Clone, Copy)]
pub struct BoilerplateConfig {
    /// A line seen on this many earlier pages of a host is boilerplate.
    pub min_pages: u32,
    pub max_lines_per_host: usize,
    pub max_hosts: usize,
}

impl Default for BoilerplateConfig {
    fn default() -> Self {
        BoilerplateConfig {
            min_pages: 5,
            max_lines_per_host: 200_000,
            max_hosts: 10_000,
        }
    }
}

#[derive(Default)]
struct Host {
    lines: HashMap<u64, u32>,
    last_used: u64,
}

pub struct HostLines {
    cfg: BoilerplateConfig,
    inner: Mutex<(HashMap<String, Host>, u64)>,
}

/// Case and spacing do not make a line different. Digits do: "Chapter 3" is not "Chapter 4".
fn key(line: &str) -> Option<u64> {
    let t = line.trim();
    if t.is_empty() || t.chars().count() > MAX_LINE_CHARS {
        return None;
    }
    let norm: String = t
        .split_whitespace()
        .flat_map(|w| w.chars().chain(std::iter::once(' ')))
        .flat_map(char::to_lowercase)
        .collect();
    Some(xxh3_64(norm.as_bytes()))
}

impl HostLines {
    pub fn new(cfg: BoilerplateConfig) -> Self {
        HostLines {
            cfg,
            inner: Mutex::new((HashMap::new(), 0)),
        }
    }

    /// Drops the host's boilerplate lines from `text`, then counts this page's lines.
    /// Returns the text without them and how many lines went.
    pub fn strip(&self, host: &str, text: &str) -> (String, usize) {
        let keys: Vec<Option<u64>> = text.lines().map(key).collect();
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (hosts, clock) = &mut *guard;
        *clock += 1;
        let now = *clock;
        if !hosts.contains_key(host) && hosts.len() >= self.cfg.max_hosts {
            // Forget the host seen longest ago.
            if let Some(old) = hosts
                .iter()
                .min_by_key(|(_, h)| h.last_used)
                .map(|(k, _)| k.clone())
            {
                hosts.remove(&old);
            }
        }
        let h = hosts.entry(host.to_string()).or_default();
        h.last_used = now;
        let boiler: Vec<bool> = keys
            .iter()
            .map(|k| k.is_some_and(|k| h.lines.get(&k).is_some_and(|n| *n >= self.cfg.min_pages)))
            .collect();
        // Count each distinct line once per page.
        let mut seen = std::collections::HashSet::new();
        for k in keys.iter().flatten() {
            if !seen.insert(*k) {
                continue;
            }
            if let Some(n) = h.lines.get_mut(k) {
                *n = n.saturating_add(1);
            } else if h.lines.len() < self.cfg.max_lines_per_host {
                h.lines.insert(*k, 1);
            }
        }
        drop(guard);
        let dropped = boiler.iter().filter(|b| **b).count();
        if dropped == 0 {
            return (text.to_string(), 0);
        }
        let mut out = String::with_capacity(text.len());
        for (line, b) in text.lines().zip(&boiler) {
            if !b {
                out.push_str(line);
                out.push('\n');
            }
        }
        // Blank lines left in runs by the removal collapse to one.
        let mut tidy = String::with_capacity(out.len());
        let mut blank = 0;
        for line in out.lines() {
            if line.trim().is_empty() {
                blank += 1;
                continue;
            }
            if !tidy.is_empty() {
                tidy.push_str(if blank > 0 { "\n\n" } else { "\n" });
            }
            blank = 0;
            tidy.push_str(line);
        }
        (tidy, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_lines_go_after_min_pages_per_host() {
        let hl = HostLines::new(BoilerplateConfig {
            min_pages: 3,
            ..BoilerplateConfig::default()
        });
        let page = |n: u32| {
            format!(
                "Article {n} has its own text, different each time.\n\nWas this  page HELPFUL?\n\n© 2025 Example Corp"
            )
        };
        for n in 0..3 {
            let (t, d) = hl.strip("a.example", &page(n));
            assert_eq!(d, 0, "page {n}: nothing known yet");
            assert!(t.contains("HELPFUL"));
        }
        let (t, d) = hl.strip("a.example", &page(3));
        assert_eq!(d, 2, "{t}");
        assert_eq!(t, "Article 3 has its own text, different each time.");
        // Another host has its own counts.
        let (_, d) = hl.strip("b.example", &page(4));
        assert_eq!(d, 0);
        // Long lines are never boilerplate.
        let long = "word ".repeat(100);
        for _ in 0..5 {
            assert_eq!(hl.strip("a.example", &long).1, 0);
        }
    }

    #[test]
    fn memory_is_bounded() {
        let hl = HostLines::new(BoilerplateConfig {
            min_pages: 2,
            max_lines_per_host: 10,
            max_hosts: 3,
        });
        for h in 0..10 {
            for p in 0..5 {
                let text: String = (0..20).map(|l| format!("line {h} {p} {l} x\n")).collect();
                hl.strip(&format!("h{h}"), &text);
            }
        }
        let g = hl.inner.lock().unwrap();
        assert!(g.0.len() <= 3);
        assert!(g.0.values().all(|h| h.lines.len() <= 10));
    }
}

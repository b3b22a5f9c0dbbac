//! A host's AI-usage signals: the `Content-Signal` lines of robots.txt (in the group for
//! this crawler, else in `*`'s, as a robots.txt group is chosen) and the W3C TDM
//! Reservation Protocol's `/.well-known/tdmrep.json` (its first rule whose `location`
//! matches the path, `*` and `$` as in robots.txt).

use serde::Deserialize;
use trawl_core::policy::{Source, Usage};

/// tdmrep.json past this many bytes is not read (a rule list, not a document).
pub const TDMREP_LIMIT: usize = 64 * 1024;

/// What robots.txt and tdmrep.json say for a host.
#[derive(Debug, Default, Clone)]
pub struct HostSignals {
    /// What the `Content-Signal` lines of the group for this crawler say, read once.
    content_signal: Usage,
    tdmrep: Vec<TdmRule>,
}

/// One tdmrep.json rule, as the file writes it.
#[derive(Debug, Clone, Deserialize)]
struct RawRule {
    location: String,
    #[serde(rename = "tdm-reservation", default)]
    reservation: Option<serde_json::Value>,
    #[serde(rename = "tdm-policy", default)]
    policy: Option<String>,
}

/// One rule, its reservation as text (`1`, `0`, or what the file wrote instead).
#[derive(Debug, Clone)]
struct TdmRule {
    location: String,
    reservation: String,
    policy: Option<String>,
}

impl HostSignals {
    /// Reads robots.txt's body (when there was one) and tdmrep.json's (when there was
    /// one); anything unreadable says nothing.
    pub fn parse(robots: Option<&[u8]>, tdmrep: Option<&[u8]>, agent: &str) -> Self {
        let mut content_signal = Usage::default();
        for v in robots
            .map(|b| content_signals(b, agent))
            .unwrap_or_default()
        {
            content_signal.read_content_signal(&v);
        }
        Self {
            content_signal,
            tdmrep: tdmrep.map(parse_tdmrep).unwrap_or_default(),
        }
    }

    /// The signals for one path (with its query) of the host.
    pub fn usage(&self, path: &str) -> Usage {
        let mut u = self.content_signal.clone();
        if let Some(rule) = self
            .tdmrep
            .iter()
            .find(|r| pattern_matches(&r.location, path))
        {
            u.read_tdm(
                &rule.reservation,
                rule.policy.as_deref(),
                Source::TdmrepJson,
            );
        }
        u
    }
}

fn parse_tdmrep(body: &[u8]) -> Vec<TdmRule> {
    if body.len() > TDMREP_LIMIT {
        return Vec::new();
    }
    // A file that is not a list of rules is no file; a rule that does not parse is skipped.
    let Ok(items) = serde_json::from_slice::<Vec<serde_json::Value>>(body) else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter_map(|v| serde_json::from_value::<RawRule>(v).ok())
        .map(|r| TdmRule {
            location: r.location,
            reservation: match r.reservation {
                Some(serde_json::Value::Number(n)) => n.to_string(),
                Some(serde_json::Value::String(s)) => s,
                _ => String::new(),
            },
            policy: r.policy,
        })
        .collect()
}

/// robots.txt-style path matching: a prefix, `*` any run of characters, `$` at the end
/// anchors it.
fn pattern_matches(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut at = 0usize;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            if !path.starts_with(part) {
                return false;
            }
            at = part.len();
            continue;
        }
        if i == parts.len() - 1 && anchored {
            return path.len() >= at + part.len() && path.ends_with(part);
        }
        match path[at..].find(part) {
            Some(p) => at += p + part.len(),
            None => return false,
        }
    }
    !anchored || at == path.len()
}

/// The `Content-Signal` values that apply to `agent`: those of the groups naming it (its
/// first token, case-insensitively), else those of `*` groups and of lines before any
/// group. Groups are read as RFC 9309 reads them: consecutive `User-agent` lines open one.
fn content_signals(body: &[u8], agent: &str) -> Vec<String> {
    let body = &body[..body.len().min(crate::BYTE_LIMIT)];
    let text = String::from_utf8_lossy(body);
    let mut ours: Vec<String> = Vec::new();
    let mut star: Vec<String> = Vec::new();
    let mut group: Vec<String> = Vec::new();
    let mut in_agents = false;
    let agent = agent.to_ascii_lowercase();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        if key == "user-agent" {
            if !in_agents {
                group.clear();
            }
            in_agents = true;
            let token = value
                .split(|c: char| c.is_whitespace() || c == '/')
                .next()
                .unwrap_or("");
            group.push(token.to_ascii_lowercase());
            continue;
        }
        in_agents = false;
        if key != "content-signal" {
            continue;
        }
        if group.is_empty() || group.iter().any(|g| g == "*") {
            star.push(value.to_string());
        }
        if group.contains(&agent) {
            ours.push(value.to_string());
        }
    }
    if ours.is_empty() { star } else { ours }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_core::policy::Signal;

    #[test]
    fn content_signal_of_our_group_else_star() {
        let txt = b"User-Agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n\nUser-agent: trawl\nUser-agent: other\nContent-Signal: ai-input=no\n";
        let s = HostSignals::parse(Some(txt), None, "trawl");
        let u = s.usage("/x");
        assert_eq!(u.ai_input.signal, Signal::Reserved);
        assert_eq!(
            u.search.signal,
            Signal::Unknown,
            "our own group replaces *'s"
        );
        let s = HostSignals::parse(Some(txt), None, "MyBot");
        let u = s.usage("/x");
        assert_eq!(u.search.signal, Signal::Allowed);
        assert_eq!(u.ai_train.signal, Signal::Reserved);
        assert_eq!(u.ai_train.source, Some(Source::ContentSignal));
    }

    #[test]
    fn a_signal_before_any_group_is_for_everyone() {
        let txt = b"# policy\nContent-Signal: ai-train=no\nUser-agent: *\nDisallow:\n";
        let u = HostSignals::parse(Some(txt), None, "trawl").usage("/");
        assert_eq!(u.ai_train.signal, Signal::Reserved);
    }

    #[test]
    fn tdmrep_first_matching_rule() {
        let json = br#"[
            {"location": "/open/*", "tdm-reservation": 0},
            {"location": "/*.pdf$", "tdm-reservation": 1},
            {"location": "/", "tdm-reservation": 1, "tdm-policy": "https://h/policy.json"},
            {"broken": true}
        ]"#;
        let s = HostSignals::parse(None, Some(json), "trawl");
        assert_eq!(s.usage("/open/a.pdf").ai_train.signal, Signal::Allowed);
        let u = s.usage("/docs/a.pdf");
        assert_eq!(u.ai_train.signal, Signal::Reserved);
        assert_eq!(u.ai_train.policy, None);
        let u = s.usage("/docs/a.pdf?x=1");
        assert_eq!(u.ai_train.policy.as_deref(), Some("https://h/policy.json"));
        assert_eq!(u.ai_train.source, Some(Source::TdmrepJson));
        assert_eq!(u.ai_input.signal, Signal::Unknown);
    }

    #[test]
    fn patterns() {
        assert!(pattern_matches("/", "/a"));
        assert!(pattern_matches("/a*c", "/abbbc/d"));
        assert!(!pattern_matches("/a*c$", "/abbbc/d"));
        assert!(pattern_matches("/a*c$", "/abbbc"));
        assert!(pattern_matches("*", ""));
        assert!(!pattern_matches("/x", "/"));
        assert!(pattern_matches("/x$", "/x"));
        assert!(!pattern_matches("/x$", "/xy"));
    }

    #[test]
    fn hostile_files_say_nothing_and_do_not_panic() {
        for body in [
            &b"\xff\xfe{"[..],
            b"{\"location\":\"/\"}",
            b"[1,2,3]",
            b"[{\"location\":\"/**$$*\",\"tdm-reservation\":\"1\"}]",
        ] {
            let s = HostSignals::parse(Some(body), Some(body), "trawl");
            let _ = s.usage("/**$$*");
        }
        let big = vec![b' '; TDMREP_LIMIT + 1];
        assert!(HostSignals::parse(None, Some(&big), "t").tdmrep.is_empty());
    }
}

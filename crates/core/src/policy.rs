//! What a page says about its own use, read from where sites say it:
//!
//! - **robots directives** (`noindex`, `nofollow`, `none`, `noarchive`, `noai`,
//!   `noimageai`) from the `X-Robots-Tag` header and `<meta name="robots">`, and the same
//!   addressed to the crawler by name (`X-Robots-Tag: trawl: noindex`,
//!   `<meta name="trawl">`); directives for other crawlers are not ours;
//! - **AI-usage signals**: Content Signals in robots.txt (`Content-Signal: search=yes,
//!   ai-train=no`), the W3C TDM Reservation Protocol (`/.well-known/tdmrep.json`, the
//!   `tdm-reservation` header and meta), and `noai`.
//!
//! Each purpose a page can be used for (search, AI input, AI training) is `allowed`,
//! `reserved` or `unknown`, with the source that said so. A reservation from any source
//! stands against an allowance from another (the conservative reading: the site said no
//! somewhere); nothing is guessed from silence.

use serde::{Deserialize, Serialize};

/// Where a directive or signal was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The response's `X-Robots-Tag` header.
    XRobotsTag,
    /// `<meta name="robots">`, or the meta named for this crawler.
    MetaRobots,
    /// A `Content-Signal` line of the host's robots.txt group for this crawler.
    ContentSignal,
    /// The host's `/.well-known/tdmrep.json`.
    TdmrepJson,
    /// The response's `tdm-reservation` header.
    TdmHeader,
    /// `<meta name="tdm-reservation">`.
    TdmMeta,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::XRobotsTag => "x-robots-tag",
            Source::MetaRobots => "meta-robots",
            Source::ContentSignal => "content-signal",
            Source::TdmrepJson => "tdmrep-json",
            Source::TdmHeader => "tdm-header",
            Source::TdmMeta => "tdm-meta",
        }
    }
}

/// The robots directives that apply to this crawler, each with where it was read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Directives {
    /// Recorded, never indexed nor exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noindex: Option<Source>,
    /// Its links are not followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nofollow: Option<Source>,
    /// No copy of the markup kept beyond the fetch's WARC (`keep_html`, the refiner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noarchive: Option<Source>,
    /// Not for AI datasets (DeviantArt's convention): AI training reserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noai: Option<Source>,
    /// The page's images are not for AI datasets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noimageai: Option<Source>,
}

impl Directives {
    pub fn is_empty(&self) -> bool {
        *self == Directives::default()
    }

    /// Reads one directive list (`noindex, nofollow`), all of it addressed to us.
    fn read_list(&mut self, list: &str, source: Source) {
        for word in list.split(',') {
            self.read_word(word, source);
        }
    }

    fn read_word(&mut self, word: &str, source: Source) {
        let w = word.trim().to_ascii_lowercase();
        let slot = match w.as_str() {
            "noindex" => &mut self.noindex,
            "nofollow" => &mut self.nofollow,
            "noarchive" | "nocache" => &mut self.noarchive,
            "noai" => &mut self.noai,
            "noimageai" => &mut self.noimageai,
            "none" => {
                self.noindex.get_or_insert(source);
                &mut self.nofollow
            }
            _ => return,
        };
        slot.get_or_insert(source);
    }

    /// One `X-Robots-Tag` header value: directives for every crawler, or after a
    /// `name:` prefix for that crawler only (`googlebot: noindex, trawl: nofollow`). A
    /// prefix runs until the next one; directives with a value of their own
    /// (`unavailable_after: ...`, `max-snippet: 20`) are not prefixes.
    pub fn read_header(&mut self, value: &str, agent: &str) {
        let mut ours = true;
        for part in value.split(',') {
            let mut word = part.trim();
            if let Some((head, rest)) = word.split_once(':') {
                let head = head.trim();
                if !VALUED.iter().any(|v| head.eq_ignore_ascii_case(v)) {
                    ours = head.eq_ignore_ascii_case(agent);
                    word = rest.trim();
                }
            }
            if ours {
                self.read_word(word, Source::XRobotsTag);
            }
        }
    }

    /// One `<meta name content>`: the generic `robots`, or the one named for this crawler.
    pub fn read_meta(&mut self, name: &str, content: &str, agent: &str) {
        let name = name.trim();
        if name.eq_ignore_ascii_case("robots") || name.eq_ignore_ascii_case(agent) {
            self.read_list(content, Source::MetaRobots);
        }
    }
}

/// Robots directives that carry a value after a colon, so are not a crawler's name.
const VALUED: &[&str] = &[
    "unavailable_after",
    "max-snippet",
    "max-image-preview",
    "max-video-preview",
];

/// Whether a meta name is one [`Directives::read_meta`] or [`Usage::read_meta`] reads
/// for some crawler: the extractor keeps these (and only these) for the stage.
pub fn is_policy_meta(name: &str, content: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    if matches!(n.as_str(), "robots" | "tdm-reservation" | "tdm-policy") {
        return true;
    }
    // `<meta name="googlebot" content="noindex">`: a crawler's own name, kept when the
    // content is made of directives (a word, never a sentence).
    let crawler_like = !NOT_CRAWLERS.contains(&n.as_str())
        && !n.is_empty()
        && n.len() <= 40
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    crawler_like
        && content.split(',').all(|w| {
            let w = w.trim().to_ascii_lowercase();
            DIRECTIVE_WORDS.contains(&w.as_str()) || w.split_once(':').is_some()
        })
        && content
            .split(',')
            .any(|w| DIRECTIVE_WORDS.contains(&w.trim().to_ascii_lowercase().as_str()))
}

/// Standard meta names, never a crawler's.
const NOT_CRAWLERS: &[&str] = &[
    "description",
    "keywords",
    "author",
    "viewport",
    "generator",
    "referrer",
    "theme-color",
    "color-scheme",
    "application-name",
    "title",
    "subject",
    "copyright",
    "rating",
];

const DIRECTIVE_WORDS: &[&str] = &[
    "all",
    "index",
    "follow",
    "noindex",
    "nofollow",
    "none",
    "noarchive",
    "nocache",
    "nosnippet",
    "noai",
    "noimageai",
    "notranslate",
    "noimageindex",
];

/// What a site says of one use of a page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Signal {
    /// Nothing was said.
    #[default]
    Unknown,
    Allowed,
    Reserved,
}

/// One purpose's signal and where it was read (none when unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UseSignal {
    pub signal: Signal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// The licence offered with a TDM reservation (`tdm-policy`), when one is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl UseSignal {
    /// Takes `signal` unless what is held already says as much or more: reserved beats
    /// allowed beats unknown; the first source of the strongest signal is kept.
    fn note(&mut self, signal: Signal, source: Source, policy: Option<&str>) {
        let rank = |s: Signal| match s {
            Signal::Unknown => 0,
            Signal::Allowed => 1,
            Signal::Reserved => 2,
        };
        if rank(signal) > rank(self.signal) {
            *self = UseSignal {
                signal,
                source: Some(source),
                policy: policy.map(str::to_string),
            };
        }
    }

    pub fn is_reserved(&self) -> bool {
        self.signal == Signal::Reserved
    }
}

/// A use a crawl can be for, as Content Signals name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// Building a search index and showing links and excerpts.
    Search,
    /// Input to a model answering now: retrieval, grounding, agents.
    AiInput,
    /// Training or fine-tuning a model.
    AiTrain,
}

impl Purpose {
    pub const ALL: [Purpose; 3] = [Purpose::Search, Purpose::AiInput, Purpose::AiTrain];

    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Search => "search",
            Purpose::AiInput => "ai-input",
            Purpose::AiTrain => "ai-train",
        }
    }
}

impl std::str::FromStr for Purpose {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Purpose::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown purpose {s:?}: expected search, ai-input or ai-train"))
    }
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a page's site says of each use of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub search: UseSignal,
    #[serde(default)]
    pub ai_input: UseSignal,
    #[serde(default)]
    pub ai_train: UseSignal,
}

impl Usage {
    pub fn is_unknown(&self) -> bool {
        *self == Usage::default()
    }

    pub fn get(&self, p: Purpose) -> &UseSignal {
        match p {
            Purpose::Search => &self.search,
            Purpose::AiInput => &self.ai_input,
            Purpose::AiTrain => &self.ai_train,
        }
    }

    pub fn note(&mut self, p: Purpose, signal: Signal, source: Source, policy: Option<&str>) {
        let slot = match p {
            Purpose::Search => &mut self.search,
            Purpose::AiInput => &mut self.ai_input,
            Purpose::AiTrain => &mut self.ai_train,
        };
        slot.note(signal, source, policy);
    }

    /// A TDM reservation (`1` reserved, `0` not) from `source`. Text and data mining is
    /// what training does; answering from a page now is not mining it, so only AI
    /// training is concerned.
    pub fn read_tdm(&mut self, reservation: &str, policy: Option<&str>, source: Source) {
        let signal = match reservation.trim() {
            "1" => Signal::Reserved,
            "0" => Signal::Allowed,
            _ => return,
        };
        self.note(Purpose::AiTrain, signal, source, policy);
    }

    /// A `Content-Signal` value: `search=yes, ai-input=yes, ai-train=no`.
    pub fn read_content_signal(&mut self, value: &str) {
        for pair in value.split(',') {
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            let Ok(p) = k.parse::<Purpose>() else {
                continue;
            };
            let signal = match v.trim().to_ascii_lowercase().as_str() {
                "yes" => Signal::Allowed,
                "no" => Signal::Reserved,
                _ => continue,
            };
            self.note(p, signal, Source::ContentSignal, None);
        }
    }

    /// What the robots directives say of AI use (`noai`).
    pub fn read_directives(&mut self, d: &Directives) {
        if let Some(src) = d.noai {
            self.note(Purpose::AiTrain, Signal::Reserved, src, None);
        }
    }
}

/// A response's policy as the fetcher reads it (headers and the host's files), to which
/// the extractor adds the page's meta tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagePolicy {
    #[serde(default, skip_serializing_if = "Directives::is_empty")]
    pub robots: Directives,
    #[serde(default, skip_serializing_if = "Usage::is_unknown")]
    pub usage: Usage,
}

impl PagePolicy {
    pub fn is_empty(&self) -> bool {
        *self == PagePolicy::default()
    }

    /// The response headers' part: every `X-Robots-Tag` value and the TDM headers.
    pub fn read_headers<'a>(
        &mut self,
        x_robots_tag: impl IntoIterator<Item = &'a str>,
        tdm_reservation: Option<&str>,
        tdm_policy: Option<&str>,
        agent: &str,
    ) {
        for v in x_robots_tag {
            self.robots.read_header(v, agent);
        }
        self.usage.read_directives(&self.robots);
        if let Some(r) = tdm_reservation {
            self.usage.read_tdm(r, tdm_policy, Source::TdmHeader);
        }
    }

    /// The page's own meta tags, as [`is_policy_meta`] kept them.
    pub fn read_metas<'a>(
        &mut self,
        metas: impl IntoIterator<Item = &'a (String, String)>,
        agent: &str,
    ) {
        let mut tdm: Option<&str> = None;
        let mut tdm_policy: Option<&str> = None;
        for (name, content) in metas {
            match name.trim().to_ascii_lowercase().as_str() {
                "tdm-reservation" => tdm = tdm.or(Some(content)),
                "tdm-policy" => tdm_policy = tdm_policy.or(Some(content)),
                _ => self.robots.read_meta(name, content, agent),
            }
        }
        self.usage.read_directives(&self.robots);
        if let Some(r) = tdm {
            self.usage
                .read_tdm(r, tdm_policy.map(str::trim), Source::TdmMeta);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(v: &str) -> Directives {
        let mut d = Directives::default();
        d.read_header(v, "trawl");
        d
    }

    #[test]
    fn header_directives_for_all_and_for_us() {
        let d = header("noindex, nofollow");
        assert_eq!(d.noindex, Some(Source::XRobotsTag));
        assert_eq!(d.nofollow, Some(Source::XRobotsTag));
        let d = header("googlebot: noindex");
        assert!(d.is_empty(), "another crawler's directive: {d:?}");
        let d = header("TRAWL: noindex");
        assert!(d.noindex.is_some());
        let d = header("googlebot: noindex, trawl: nofollow, noarchive");
        assert_eq!(d.noindex, None);
        assert!(d.nofollow.is_some() && d.noarchive.is_some());
        let d = header("unavailable_after: 25 Jun 2010 15:00:00 PST, noindex");
        assert!(
            d.noindex.is_some(),
            "a valued directive is not a crawler name"
        );
        let d = header("none");
        assert!(d.noindex.is_some() && d.nofollow.is_some());
    }

    #[test]
    fn words_are_whole_words() {
        let mut d = Directives::default();
        d.read_meta("robots", "index, follow, nonexistent, noindexing", "trawl");
        assert!(d.is_empty(), "{d:?}");
        d.read_meta("googlebot", "noindex", "trawl");
        assert!(d.is_empty(), "another crawler's meta");
        d.read_meta("Trawl", "NOINDEX", "trawl");
        assert_eq!(d.noindex, Some(Source::MetaRobots));
    }

    #[test]
    fn policy_metas_are_told_from_other_metas() {
        assert!(is_policy_meta("robots", "anything"));
        assert!(is_policy_meta("googlebot", "noindex, max-snippet:20"));
        assert!(is_policy_meta("tdm-reservation", "1"));
        assert!(!is_policy_meta("description", "An index of all things"));
        assert!(!is_policy_meta("keywords", "index, follow, news"));
        assert!(!is_policy_meta("description", "noindex"));
        assert!(!is_policy_meta("viewport", "width=device-width"));
    }

    #[test]
    fn reservation_beats_allowance_and_first_source_stays() {
        let mut u = Usage::default();
        u.read_content_signal("search=yes, ai-input=yes, ai-train=yes");
        assert_eq!(u.ai_train.signal, Signal::Allowed);
        u.read_tdm("1", Some("https://h/policy.json"), Source::TdmHeader);
        assert_eq!(u.ai_train.signal, Signal::Reserved);
        assert_eq!(u.ai_train.source, Some(Source::TdmHeader));
        assert_eq!(u.ai_train.policy.as_deref(), Some("https://h/policy.json"));
        u.read_tdm("0", None, Source::TdmMeta);
        assert_eq!(
            u.ai_train.signal,
            Signal::Reserved,
            "an allowance does not undo it"
        );
        assert_eq!(u.search.signal, Signal::Allowed);
        assert_eq!(u.search.source, Some(Source::ContentSignal));
    }

    #[test]
    fn content_signal_values_outside_yes_no_say_nothing() {
        let mut u = Usage::default();
        u.read_content_signal("search=maybe, ai_train=no, ai-train, =no, AI-Input=NO");
        assert!(u.search.signal == Signal::Unknown && u.ai_train.signal == Signal::Unknown);
        assert_eq!(u.ai_input.signal, Signal::Reserved);
    }

    #[test]
    fn noai_reserves_training_and_metas_add_to_headers() {
        let mut p = PagePolicy::default();
        p.read_headers(["otherbot: noai"], None, None, "trawl");
        assert!(p.usage.is_unknown());
        let metas = vec![
            ("robots".to_string(), "noai, noimageai".to_string()),
            ("tdm-reservation".to_string(), "1".to_string()),
        ];
        p.read_metas(&metas, "trawl");
        assert_eq!(p.usage.ai_train.signal, Signal::Reserved);
        assert_eq!(p.usage.ai_train.source, Some(Source::MetaRobots));
        assert_eq!(p.robots.noimageai, Some(Source::MetaRobots));
        let json = serde_json::to_string(&p).unwrap();
        assert!(
            json.contains(r#""ai_train":{"signal":"reserved","source":"meta-robots"}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<PagePolicy>(&json).unwrap(), p);
    }

    #[test]
    fn hostile_values_do_not_panic() {
        let mut p = PagePolicy::default();
        for v in ["", ":", ",,,", "::noindex", "é:é", &"a:".repeat(10_000)] {
            p.read_headers([v], Some(v), Some(v), "trawl");
            p.usage.read_content_signal(v);
            let _ = is_policy_meta(v, v);
        }
    }
}

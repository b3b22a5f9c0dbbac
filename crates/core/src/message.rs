//! Versioned messages exchanged between stages. Every message carries the crawl id so that
//! cluster state can be keyed per crawl; `v` lets a newer service reject or adapt old ones.

use serde::{Deserialize, Serialize};

/// Current message schema version.
pub const MESSAGE_VERSION: u16 = 1;

/// What a URL is expected to hold; decides how the extractor treats the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UrlKind {
    #[default]
    Page,
    Sitemap,
    Feed,
}

/// A URL found somewhere (seed, link, sitemap, feed), before normalization and scope checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscoveredUrl {
    pub url: String,
    pub depth: u32,
    #[serde(default)]
    pub kind: UrlKind,
    /// When the page last changed by its sitemap's `<lastmod>` (RFC 3339): a re-crawl
    /// fetching only what is due fetches it if it changed after the earlier fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lastmod: Option<String>,
}

/// `trawl.discovered`: a batch of URLs from one source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Discovered {
    pub v: u16,
    pub crawl: String,
    /// The page the URLs were found on, if any (seeds have none).
    pub source: Option<String>,
    pub urls: Vec<DiscoveredUrl>,
}

/// `trawl.fetch`: one URL the frontier has scheduled; its host is claimed until released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FetchJob {
    pub v: u16,
    pub crawl: String,
    /// Normalized URL.
    pub url: String,
    /// `host[:port]` the politeness claim is held on.
    pub host: String,
    pub depth: u32,
    pub kind: UrlKind,
    /// Lower is fetched sooner.
    pub priority: i64,
    /// How many times this URL was retried after a 429/503 or a transient error.
    #[serde(default)]
    pub retries: u32,
    /// The sitemap's `<lastmod>` for the URL, if it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lastmod: Option<String>,
    /// Since when (ms) the job has waited for its host's robots.txt to be reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robots_wait_since_ms: Option<u64>,
    /// The host slot this job holds, when the state names its claims (the cluster's):
    /// the fetcher renews it when it takes the job and releases exactly this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
}

/// One hop of a redirect chain (the final response is a hop too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    pub url: String,
    pub status: u16,
}

/// Why a fetch produced no usable body. `kind` is a stable, countable identifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchFailure {
    pub kind: String,
    pub message: String,
}

/// `trawl.fetched`: the outcome of one fetch job, failed or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Fetched {
    pub v: u16,
    pub crawl: String,
    pub job: FetchJob,
    /// The URL of the last hop followed.
    pub final_url: String,
    /// Status of the last response (0 when no response came).
    pub status: u16,
    /// Every hop, the first request included.
    pub redirects: Vec<Hop>,
    pub content_type: Option<String>,
    /// RFC 3339 time the last response ended.
    pub fetched_at: String,
    /// Body after content decoding; for HTML already converted to UTF-8.
    #[serde(with = "body_b64")]
    pub body: Vec<u8>,
    /// Charset the HTML body was decoded from.
    pub charset: Option<String>,
    /// Bytes received on the wire for all hops (compressed sizes).
    pub wire_bytes: u64,
    pub error: Option<FetchFailure>,
    /// What a later crawl needs to ask for and compare this response: its validators and
    /// payload digest, and its WARC record.
    #[serde(default, skip_serializing_if = "ResponseFacts::is_empty")]
    pub facts: ResponseFacts,
    /// Sent to the browser (the render hop) or back from it: the extractor does not apply
    /// the render rule again to a page that carries this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<crate::render::RenderInfo>,
    /// What the response's headers and its host's robots.txt and tdmrep.json say of the
    /// page's use; the extractor adds the page's meta tags.
    #[serde(default, skip_serializing_if = "crate::policy::PagePolicy::is_empty")]
    pub policy: crate::policy::PagePolicy,
}

/// The last response's validators (verbatim, for conditional requests), its payload digest
/// and where it was archived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ResponseFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// `sha1:` + base32 of the payload as received (the WARC-Payload-Digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_digest: Option<String>,
    /// The last full WARC response record of the URL, when WARC output is on (for a
    /// revisit, the earlier crawl's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warc: Option<WarcRef>,
    /// This fetch's WARC revisit record (a 304, or the same payload as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisit: Option<WarcRef>,
}

impl ResponseFacts {
    pub fn is_empty(&self) -> bool {
        *self == ResponseFacts::default()
    }
}

/// A WARC record, as a revisit record refers to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct WarcRef {
    /// `<urn:uuid:...>`.
    pub record_id: String,
    /// `WARC-Date`, RFC 3339.
    pub date: String,
}

/// `trawl.docs`: one line of the corpus, a fetched URL with what was extracted from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PageRecord {
    pub url: String,
    pub final_url: String,
    pub status: u16,
    pub redirects: Vec<Hop>,
    pub depth: u32,
    pub kind: UrlKind,
    pub content_type: Option<String>,
    pub fetched_at: String,
    pub title: Option<String>,
    pub text: String,
    /// The main content as Markdown (headings, lists, code, tables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markdown: Option<String>,
    /// What the page says about itself: author, dates, language, canonical URL.
    #[serde(default, skip_serializing_if = "PageMeta::is_empty")]
    pub meta: PageMeta,
    /// Where an ingested page came from (a WARC, WET or ARC record); absent for crawled ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ArchiveSource>,
    pub links_found: usize,
    /// Links past the per-page cap (`MAX_LINKS_PER_PAGE`), found but not followed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub links_dropped: u32,
    /// Lines dropped from `text` as the host's boilerplate (seen on many of its pages).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub boilerplate_lines: u32,
    /// Bytes received for this URL, all hops, as transferred.
    pub wire_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
    /// 64-bit SimHash of the text, as 16 hex digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simhash: Option<String>,
    /// The URL of the page this one copies; its text is not indexed again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// Hamming distance to `duplicate_of` (0: an exact copy), from the SimHash gate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distance: Option<u32>,
    /// Estimated word 5-gram Jaccard similarity with `duplicate_of`, from the MinHash gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<FetchFailure>,
    /// 128-bit exact hash of the text after boilerplate, as 32 hex digits: equal for pages
    /// whose text is the same whatever their markup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_hash: Option<String>,
    /// The response's validators, payload digest and WARC record.
    #[serde(
        default,
        rename = "response",
        skip_serializing_if = "ResponseFacts::is_empty"
    )]
    pub facts: ResponseFacts,
    /// On a re-crawl (`--since`): how the page compares with the earlier crawl.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<crate::change::PageChange>,
    /// The page's markup as fetched (decoded to UTF-8), when the crawl keeps it
    /// (`keep_html`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_html: Option<String>,
    /// The page went to a browser: whether its DOM is what was extracted, how long it
    /// took, its subrequests and the WARC record of the DOM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<crate::render::RenderInfo>,
    /// The robots directives addressed to this crawler (header or meta): a `noindex` page
    /// is recorded but neither indexed nor exported.
    #[serde(default, skip_serializing_if = "crate::policy::Directives::is_empty")]
    pub robots: crate::policy::Directives,
    /// What the site says of each use of the page (search, AI input, AI training):
    /// allowed, reserved or unknown, with where it was said.
    #[serde(default)]
    pub usage: crate::policy::Usage,
    /// The page was a document (PDF, DOCX, plain text, Markdown) read to text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<DocumentInfo>,
}

/// What was read of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DocumentInfo {
    /// `pdf`, `docx`, `text` or `markdown`.
    pub kind: String,
    /// PDF pages read, and those among them with no text layer (scans): their text is
    /// not in the record.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pages: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scanned_pages: u32,
    /// Not read to its end (past the text, page or time limit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `trawl.archives`: one web archive (WARC, WET or ARC, plain or gzip) for an ingester,
/// published by `trawl submit --archives`. The ingester reads it whole and acks it once
/// every record is through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ArchiveJob {
    pub v: u16,
    pub crawl: String,
    /// A path the ingesters can read (absolute: a shared volume) or an http(s) URL.
    pub source: String,
}

/// The archive record a page was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ArchiveSource {
    pub file: String,
    /// `WARC-Record-ID` (absent in ARC files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
    /// `WARC-Date` (or the ARC archive date), as written in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// `WARC-Identified-Content-Language` as the archive gives it (Common Crawl: ISO 639-3
    /// codes, most likely first, comma-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The record type: `response`, `resource` or `conversion`.
    pub record_type: String,
}

/// Page metadata from `<head>`, Open Graph, microdata and JSON-LD. The title is on the
/// record itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PageMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site_name: Option<String>,
    /// The first schema.org `@type` of the page's JSON-LD (`NewsArticle`, `Product`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jsonld_type: Option<String>,
}

impl PageMeta {
    pub fn is_empty(&self) -> bool {
        *self == PageMeta::default()
    }
}

/// `trawl.docs` envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Doc {
    pub v: u16,
    pub crawl: String,
    pub page: PageRecord,
}

/// `trawl.refine`: one page kept by the crawl (HTML, fetched or rendered, not a copy of a
/// page kept before), for the refiner, when the crawl refines (`refine`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RefineJob {
    pub v: u16,
    pub crawl: String,
    /// The page's URL after redirects (its record's `final_url`).
    pub url: String,
    pub fetched_at: String,
    /// The WARC response record the markup came from, when the crawl writes WARC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warc_record: Option<String>,
    /// The markup is a browser's DOM (the page was rendered).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rendered: bool,
    /// The page's markup, decoded to UTF-8.
    pub html: String,
    /// `html` was cut to fit the hop's message limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub html_cut: bool,
}

/// Bodies travel as base64 in JSON so that a message stays valid UTF-8 whatever it holds.
mod body_b64 {
    use data_encoding::BASE64;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        BASE64
            .decode(s.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("body is not base64: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetched_round_trips_binary_bodies() {
        for body in [
            vec![],
            vec![0u8],
            vec![0, 255],
            vec![1, 2, 3],
            (0..=255).collect(),
        ] {
            let f = Fetched {
                v: MESSAGE_VERSION,
                crawl: "c".into(),
                job: FetchJob {
                    v: MESSAGE_VERSION,
                    crawl: "c".into(),
                    url: "http://a/".into(),
                    host: "a".into(),
                    depth: 0,
                    kind: UrlKind::Page,
                    priority: 0,
                    retries: 0,
                    lastmod: None,
                    robots_wait_since_ms: None,
                    claim: None,
                },
                final_url: "http://a/".into(),
                status: 200,
                redirects: vec![],
                content_type: None,
                fetched_at: String::new(),
                body: body.clone(),
                charset: None,
                wire_bytes: 0,
                error: None,
                facts: ResponseFacts::default(),
                render: None,
                policy: Default::default(),
            };
            let json = serde_json::to_string(&f).unwrap();
            let back: Fetched = serde_json::from_str(&json).unwrap();
            assert_eq!(back.body, body);
        }
    }
}

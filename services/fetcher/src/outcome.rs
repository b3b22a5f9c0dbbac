//! What a fetch ends as: the page record with its response facts, or a failure record;
//! how long a host asked to be left alone (`Retry-After`).

use std::time::Duration;

use chrono::Utc;
use reqwest::header::HeaderMap;
use trawl_core::{FetchFailure, FetchJob, Fetched, Hop, MESSAGE_VERSION, UrlKind};
use url::Url;

use crate::{FetchError, Fetcher, Outcome, PAGE_TEXT_MAX, Response, failure};
use trawl_body as body;

impl Fetcher {
    pub(crate) fn retry_after(&self, headers: &HeaderMap) -> Duration {
        let parsed = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let v = v.trim();
                if let Ok(secs) = v.parse::<u64>() {
                    return Some(Duration::from_secs(secs));
                }
                let at = httpdate::parse_http_date(v).ok()?;
                Some(
                    at.duration_since(std::time::SystemTime::now())
                        .unwrap_or_default(),
                )
            });
        parsed
            .unwrap_or(self.cfg.default_backoff)
            .min(self.cfg.max_backoff)
    }

    pub(crate) fn finish_response(
        &self,
        job: &FetchJob,
        url: &Url,
        hops: Vec<Hop>,
        wire_bytes: u64,
        resp: Response,
        rules: &crate::robots::HostRules,
    ) -> Fetched {
        let content_type = header_str(&resp.headers, "content-type").map(str::to_string);
        let mut fetched = fetched_record(
            job,
            url.as_str(),
            hops,
            wire_bytes,
            resp.status,
            content_type.clone(),
        );
        fetched.facts = response_facts(&resp);
        fetched.policy = self.page_policy(url, &resp.headers, rules);
        if resp.truncated {
            fetched.error = Some(failure(
                "body_too_large",
                format!(
                    "body larger than the {}-byte cap; kept the first part",
                    self.cfg.max_body_bytes
                ),
            ));
        }
        if !(200..300).contains(&resp.status) {
            return fetched;
        }
        // A page keeps only what extraction reads; listings are read whole (to 50 MiB).
        let keep = match job.kind {
            UrlKind::Page => PAGE_TEXT_MAX,
            UrlKind::Sitemap | UrlKind::Feed => usize::MAX,
        };
        let (decoded, total) = match body::decode_prefix(
            &resp.payload,
            header_str(&resp.headers, "content-encoding"),
            keep,
            self.cfg.max_decoded_bytes,
        ) {
            Ok(d) => d,
            Err(e) => {
                let kind = match e {
                    body::BodyError::DecompressionLimit { .. } => "decompression_limit",
                    body::BodyError::UnsupportedEncoding(_) => "unsupported_encoding",
                    body::BodyError::Corrupt { .. } => "corrupt_body",
                };
                fetched.error = Some(failure(kind, e.to_string()));
                return fetched;
            }
        };
        match job.kind {
            UrlKind::Sitemap | UrlKind::Feed => fetched.body = decoded,
            UrlKind::Page => {
                self.keep_page_body(&mut fetched, decoded, total, &resp, content_type.as_deref())
            }
        }
        fetched
    }
}

impl Fetcher {
    /// What a page's record carries of its body (`decoded`: its first part, of `total`
    /// bytes decoded): HTML, plain text and Markdown decoded to UTF-8 and cut at what
    /// extraction reads; a PDF or DOCX whole, to the body cap, for the extractor's
    /// document reader; anything else nothing (`unsupported_content_type`), but for a
    /// single request, which answers whatever the page is.
    fn keep_page_body(
        &self,
        fetched: &mut Fetched,
        decoded: Vec<u8>,
        total: usize,
        resp: &Response,
        content_type: Option<&str>,
    ) {
        use body::doc_kind::DocKind;
        let kind = body::doc_kind::kind_of(content_type, &fetched.final_url, &decoded);
        if body::is_html(content_type, &decoded)
            || matches!(kind, Some(DocKind::Text | DocKind::Markdown))
        {
            if total > decoded.len() {
                fetched.error.get_or_insert_with(|| cut_page(total));
            }
            let (mut text, charset) = body::decode_html(&decoded, content_type);
            if text.len() > PAGE_TEXT_MAX {
                // A charset that takes more bytes in UTF-8 than in its own.
                let mut cut = PAGE_TEXT_MAX;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                let total = text.len();
                text.truncate(cut);
                text.shrink_to_fit();
                fetched.error.get_or_insert_with(|| cut_page(total));
            }
            fetched.body = text.into_bytes();
            fetched.charset = Some(charset.to_string());
        } else if kind.is_some() {
            // A document is read whole: its first part alone is no document.
            fetched.body = if total > decoded.len() {
                body::decode_prefix(
                    &resp.payload,
                    header_str(&resp.headers, "content-encoding"),
                    usize::MAX,
                    self.cfg.max_decoded_bytes,
                )
                .map(|(b, _)| b)
                .unwrap_or(decoded)
            } else {
                decoded
            };
        } else if self.one_shot {
            // A single request answers whatever the page is (text, JSON, ...),
            // as received and cut to what extraction would read.
            fetched.body = decoded;
        } else {
            let mime = content_type.map(body::mime_type);
            fetched.error = Some(failure(
                "unsupported_content_type",
                format!(
                    "{} is not HTML nor a document read here: recorded, not extracted",
                    mime.as_deref().unwrap_or("unknown type")
                ),
            ));
        }
    }

    /// What the response's headers and the host's files say of the page's use.
    fn page_policy(
        &self,
        url: &Url,
        headers: &HeaderMap,
        rules: &crate::robots::HostRules,
    ) -> trawl_core::policy::PagePolicy {
        let mut p = trawl_core::policy::PagePolicy {
            usage: rules.usage(url),
            ..Default::default()
        };
        let tags = headers
            .get_all("x-robots-tag")
            .iter()
            .filter_map(|v| v.to_str().ok());
        p.read_headers(
            tags,
            header_str(headers, "tdm-reservation"),
            header_str(headers, "tdm-policy"),
            &self.cfg.robots_agent,
        );
        p
    }
}

/// The error of a page kept cut at what extraction reads.
fn cut_page(total: usize) -> FetchFailure {
    failure(
        "body_too_large",
        format!(
            "page of {total} bytes decoded, larger than the {PAGE_TEXT_MAX} bytes extraction reads; kept the first part"
        ),
    )
}

/// What a later crawl needs of this response. A 304 keeps the earlier payload's digest and
/// validators where it sends none (RFC 9110 15.4.5: it may omit them); a revisit record
/// points at the earlier full response, which stays the page's record.
fn response_facts(resp: &Response) -> trawl_core::ResponseFacts {
    let prior = resp.prior.as_ref().map(|p| &p.facts);
    let header = |name: &str| header_str(&resp.headers, name).map(str::to_string);
    let not_modified = resp.status == 304;
    let keep = |now: Option<String>, then: Option<&Option<String>>| {
        now.or_else(|| then.filter(|_| not_modified).cloned().flatten())
    };
    trawl_core::ResponseFacts {
        etag: keep(header("etag"), prior.map(|p| &p.etag)),
        last_modified: keep(header("last-modified"), prior.map(|p| &p.last_modified)),
        payload_digest: if not_modified {
            prior.and_then(|p| p.payload_digest.clone())
        } else {
            Some(resp.payload_digest.clone())
        },
        warc: match &resp.revisit_of {
            Some(full) => Some(full.clone()),
            None => resp.archived.clone(),
        },
        revisit: resp.revisit_of.as_ref().and(resp.archived.clone()),
    }
}

pub(crate) fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Ends a fetch with a failure record.
pub(crate) fn failed_outcome(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    f: FetchFailure,
) -> Result<Outcome, FetchError> {
    Ok(Outcome::Done(Box::new(failed_record(
        job, final_url, hops, wire_bytes, f,
    ))))
}

/// The record of a job the frontier could not take back for a retry (it is full): the
/// page is recorded failed rather than dropped unseen.
pub(crate) fn rejected_retry(job: &FetchJob, status: u16) -> Fetched {
    let hop = Hop {
        url: job.url.clone(),
        status,
    };
    let why = match status {
        0 => "waiting for robots.txt".to_string(),
        s => format!("retrying after {s}"),
    };
    failed_record(
        job,
        &job.url,
        if status == 0 { Vec::new() } else { vec![hop] },
        0,
        failure(
            "retry_rejected",
            format!("{why}: the frontier is full and could not take the URL back"),
        ),
    )
}

/// The record of a fetch that failed: the hops so far, the last status, the failure.
fn failed_record(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    f: FetchFailure,
) -> Fetched {
    let status = hops.last().map_or(0, |h| h.status);
    let mut out = fetched_record(job, final_url, hops, wire_bytes, status, None);
    out.error = Some(f);
    out
}

/// The record of a fetch, without its body (the caller adds it).
pub(crate) fn fetched_record(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    status: u16,
    content_type: Option<String>,
) -> Fetched {
    Fetched {
        v: MESSAGE_VERSION,
        crawl: job.crawl.clone(),
        job: job.clone(),
        final_url: final_url.to_string(),
        status,
        redirects: hops,
        content_type,
        fetched_at: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        body: Vec::new(),
        charset: None,
        wire_bytes,
        error: None,
        facts: Default::default(),
        render: None,
        policy: Default::default(),
    }
}

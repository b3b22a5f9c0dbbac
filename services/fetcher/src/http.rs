//! One HTTP exchange: the request as sent, the response read up to the body cap, the WARC
//! records of both, and what a failed request is called.

use std::time::Duration;

use chrono::Utc;
use reqwest::header::{HeaderMap, HeaderValue};
use trawl_core::FetchFailure;
use trawl_core::clock::now_ms;
use trawl_core::counters::Counter;
use trawl_core::urlnorm::host_key;
use url::Url;

use crate::warcout::Exchange;
use crate::{Fetcher, JobClock, Response, failure, net};

impl Fetcher {
    /// One HTTP request, spaced from the previous request to the same host in this job.
    pub(crate) async fn request(
        &self,
        url: &Url,
        host: &str,
        crawl_delay: Option<Duration>,
        clock: &mut JobClock,
    ) -> Result<Response, FetchFailure> {
        // Every request passes here, robots.txt and its redirects included: an IP-literal
        // host never reaches the guarded resolver, so it is checked now.
        if let Some(f) = self.address_policy(url) {
            return Err(f);
        }
        if let Some(h) = clock.hosts.get(host) {
            let at = h.next_allowed_ms();
            let now = now_ms();
            if at > now {
                tokio::time::sleep(Duration::from_millis(at - now)).await;
            }
        }
        let gap = crate::politeness_gap(crawl_delay, self.cfg.delay);
        let result = self.request_once(url).await;
        clock.hosts.insert(
            host.to_string(),
            crate::HostClock {
                ended_ms: now_ms(),
                gap,
            },
        );
        let _ = self.state.count(&Counter::Requests, 1).await;
        result
    }

    async fn request_once(&self, url: &Url) -> Result<Response, FetchFailure> {
        const ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        const ACCEPT_ENCODING: &str = "gzip, deflate";
        let started = Utc::now();
        let prior = self.prior(url).await;
        let conditions = prior.as_ref().map(conditions).unwrap_or_default();
        let mut req = self
            .client
            .get(url.clone())
            .header("User-Agent", &self.cfg.user_agent)
            .header("Accept", ACCEPT)
            .header("Accept-Encoding", ACCEPT_ENCODING);
        for (name, value) in &conditions {
            req = req.header(*name, value.clone());
        }
        let mut resp = req.send().await.map_err(classify)?;
        let status = resp.status();
        let version = resp.version();
        let ip = resp.remote_addr().map(|a| a.ip());
        let headers = resp.headers().clone();
        let mut payload = Vec::new();
        let mut truncated = false;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    let room = self.cfg.max_body_bytes.saturating_sub(payload.len());
                    if chunk.len() > room {
                        payload.extend_from_slice(&chunk[..room]);
                        truncated = true;
                        break;
                    }
                    payload.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(classify(e)),
            }
        }
        let payload_digest = crate::warcout::payload_digest(&payload);
        let revisit = prior
            .as_ref()
            .and_then(|p| revisit_of(p, status.as_u16(), &payload_digest));
        let mut archived = None;
        if let Some(warc) = &self.warc {
            let record_id = warc::Record::<warc::BufferedBody>::generate_record_id();
            let head = RequestHead {
                ua: &self.cfg.user_agent,
                accept: ACCEPT,
                accept_encoding: ACCEPT_ENCODING,
                conditions: &conditions,
            };
            let ex = Exchange {
                record_id: record_id.clone(),
                target_uri: url.to_string(),
                date: started,
                ip,
                request_head: request_head(url, &head),
                response_head: response_head(version, status, &headers),
                payload: if revisit.is_some() {
                    Vec::new()
                } else {
                    payload.clone()
                },
                payload_digest: payload_digest.clone(),
                truncated,
                revisit: revisit.clone(),
            };
            match warc.write(ex).await {
                Ok(()) => {
                    archived = Some(trawl_core::WarcRef {
                        record_id,
                        // As the record's WARC-Date is written.
                        date: started.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    })
                }
                Err(e) => tracing::error!(error = %e, "WARC write failed"),
            }
        }
        Ok(Response {
            status: status.as_u16(),
            headers,
            payload,
            truncated,
            archived,
            payload_digest,
            prior,
            revisit_of: revisit.map(|r| r.refers_to),
        })
    }

    /// What the earlier crawl knew of `url`, when it had the page.
    async fn prior(&self, url: &Url) -> Option<trawl_core::history::Prior> {
        let h = self.history.as_ref()?;
        match h.prior(url.as_str()).await {
            Ok(p) => p.filter(|p| p.was_ok()),
            Err(e) => {
                tracing::warn!(error = %e, url = %url, "the earlier crawl cannot be read");
                None
            }
        }
    }
}

/// `If-None-Match` / `If-Modified-Since` from the earlier response's validators, verbatim;
/// a validator that is not a valid header value is left out.
fn conditions(p: &trawl_core::history::Prior) -> Vec<(&'static str, HeaderValue)> {
    let mut out = Vec::new();
    let pairs = [
        ("If-None-Match", &p.facts.etag),
        ("If-Modified-Since", &p.facts.last_modified),
    ];
    for (name, v) in pairs {
        if let Some(v) = v.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
            out.push((name, v));
        }
    }
    out
}

/// The WARC revisit a response makes of the earlier full one: a 304 (server-not-modified)
/// or a 200 with the same payload digest (identical-payload-digest).
fn revisit_of(
    p: &trawl_core::history::Prior,
    status: u16,
    digest: &str,
) -> Option<crate::warcout::Revisit> {
    let full = p.facts.warc.clone()?;
    let profile = if status == 304 {
        crate::warcout::RevisitProfile::ServerNotModified
    } else if (200..300).contains(&status) && p.facts.payload_digest.as_deref() == Some(digest) {
        crate::warcout::RevisitProfile::IdenticalPayloadDigest
    } else {
        return None;
    };
    Some(crate::warcout::Revisit {
        profile,
        refers_to: full,
        payload_digest: p.facts.payload_digest.clone(),
    })
}

fn classify(e: reqwest::Error) -> FetchFailure {
    let mut chain = e.to_string();
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(&e);
    while let Some(s) = src {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        src = s.source();
    }
    if chain.contains(net::BLOCKED_MARKER) {
        return failure(
            "private_address",
            format!("{chain} (use --allow-private to crawl it)"),
        );
    }
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        if chain.contains("dns error") || chain.contains("failed to lookup") {
            "dns"
        } else {
            "connect"
        }
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "request"
    };
    failure(kind, chain)
}

/// The headers a request was sent with, for its WARC record.
struct RequestHead<'a> {
    ua: &'a str,
    accept: &'a str,
    accept_encoding: &'a str,
    conditions: &'a [(&'static str, HeaderValue)],
}

fn request_head(url: &Url, h: &RequestHead<'_>) -> Vec<u8> {
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let mut out = format!(
        "GET {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {}\r\nAccept: {}\r\nAccept-Encoding: {}\r\n",
        host_key(url),
        h.ua,
        h.accept,
        h.accept_encoding
    )
    .into_bytes();
    for (name, value) in h.conditions {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn response_head(
    version: reqwest::Version,
    status: reqwest::StatusCode,
    headers: &HeaderMap,
) -> Vec<u8> {
    let v = match version {
        reqwest::Version::HTTP_09 => "HTTP/0.9",
        reqwest::Version::HTTP_10 => "HTTP/1.0",
        reqwest::Version::HTTP_2 => "HTTP/2",
        reqwest::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    };
    let mut out = format!(
        "{v} {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    for (name, value) in headers {
        // The body is stored de-chunked: a reader must not try to de-chunk it again.
        if name.as_str() == "transfer-encoding" {
            out.extend_from_slice(b"X-Crawler-Transfer-Encoding");
        } else {
            out.extend_from_slice(name.as_str().as_bytes());
        }
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

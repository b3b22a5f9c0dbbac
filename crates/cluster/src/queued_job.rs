//! A fetch job as a host's queue in Redis keeps it: only what the crawl (the key prefix),
//! the host (the queue's key) and the priority (the score) do not already say. A queued
//! URL is one sorted-set member, so these bytes are much of what a queued URL costs. The
//! common job, a page on its host's origin with nothing else to say, is its depth, `h` or
//! `s` for http or https, and the rest of the URL: `3s/docs/a` for
//! `https://example.org/docs/a` at depth 3, against the 230 bytes of the whole job's JSON.
//! Any other job is JSON with short keys and the defaults left out (it starts with `{`).

use serde::{Deserialize, Serialize};
use trawl_core::{FetchJob, MESSAGE_VERSION, UrlKind};

#[derive(Debug, Serialize, Deserialize)]
struct Queued {
    u: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    d: u32,
    #[serde(default, skip_serializing_if = "is_page")]
    k: UrlKind,
    #[serde(default, skip_serializing_if = "is_zero")]
    r: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    l: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    w: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_page(k: &UrlKind) -> bool {
    *k == UrlKind::Page
}

/// The queue member of `job`.
pub fn encode(job: &FetchJob) -> Result<String, serde_json::Error> {
    let plain = job.kind == UrlKind::Page
        && job.retries == 0
        && job.lastmod.is_none()
        && job.robots_wait_since_ms.is_none();
    if plain {
        for (scheme, tag) in [("http://", 'h'), ("https://", 's')] {
            if let Some(rest) = job
                .url
                .strip_prefix(scheme)
                .and_then(|r| r.strip_prefix(job.host.as_str()))
                .filter(|r| r.starts_with('/'))
            {
                return Ok(format!("{}{tag}{rest}", job.depth));
            }
        }
    }
    serde_json::to_string(&Queued {
        u: job.url.clone(),
        d: job.depth,
        k: job.kind,
        r: job.retries,
        l: job.lastmod.clone(),
        w: job.robots_wait_since_ms,
    })
}

/// The job a queue member of `crawl`'s queue for `host` at `priority` stands for.
pub fn decode(
    member: &str,
    crawl: &str,
    host: &str,
    priority: i64,
) -> Result<FetchJob, serde_json::Error> {
    let q: Queued = match compact(member, host) {
        Some(q) => q,
        None => serde_json::from_str(member)?,
    };
    Ok(FetchJob {
        v: MESSAGE_VERSION,
        crawl: crawl.to_string(),
        url: q.u,
        host: host.to_string(),
        depth: q.d,
        kind: q.k,
        priority,
        retries: q.r,
        lastmod: q.l,
        robots_wait_since_ms: q.w,
        claim: None,
    })
}

/// The compact form's job: depth digits, the scheme's tag, the path and the rest.
fn compact(member: &str, host: &str) -> Option<Queued> {
    let digits = member.find(|c: char| !c.is_ascii_digit())?;
    let depth = member[..digits].parse().ok()?;
    let scheme = match member[digits..].chars().next()? {
        'h' => "http://",
        's' => "https://",
        _ => return None,
    };
    let rest = &member[digits + 1..];
    rest.starts_with('/').then(|| Queued {
        u: format!("{scheme}{host}{rest}"),
        d: depth,
        k: UrlKind::Page,
        r: 0,
        l: None,
        w: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_comes_back_whole_from_its_member() {
        let mut job = FetchJob {
            v: MESSAGE_VERSION,
            crawl: "c".into(),
            url: "http://127.1.0.4:18400/p/123456".into(),
            host: "127.1.0.4:18400".into(),
            depth: 4,
            kind: UrlKind::Page,
            priority: 4_000_000,
            retries: 0,
            lastmod: None,
            robots_wait_since_ms: None,
            claim: None,
        };
        let m = encode(&job).unwrap();
        assert_eq!(m, "4h/p/123456");
        assert_eq!(decode(&m, "c", &job.host, job.priority).unwrap(), job);
        job.url = "https://127.1.0.4:18400/?q=a b".into();
        let m = encode(&job).unwrap();
        assert_eq!(m, "4s/?q=a b");
        assert_eq!(decode(&m, "c", &job.host, job.priority).unwrap(), job);
        // A URL off its host's origin as written (a userinfo, say) keeps the long form.
        job.url = "http://u@127.1.0.4:18400/x".into();
        let m = encode(&job).unwrap();
        assert!(m.starts_with('{'), "{m}");
        assert_eq!(decode(&m, "c", &job.host, job.priority).unwrap(), job);
        job.kind = UrlKind::Sitemap;
        job.retries = 2;
        job.lastmod = Some("2026-01-02".into());
        job.robots_wait_since_ms = Some(77);
        let m = encode(&job).unwrap();
        assert_eq!(decode(&m, "c", &job.host, job.priority).unwrap(), job);
        assert!(decode("not json", "c", "h", 0).is_err());
    }
}

//! Where a crawl's per-host state lives when it is sharded across Redis servers.
//!
//! One Redis runs its commands on one core, and every key of a crawl shares one hash tag,
//! so one crawl is bound by one server (~1,600 pages/s measured in `bench/scale`). The
//! per-host state (a host's queue, its politeness slot and claims, its robots.txt) is
//! what every page touches, so it is what gets sharded: a host belongs to one shard, by a
//! hash of its name, and each shard keeps everything of its hosts, so the atomic
//! politeness step (a claim: the host's next job, its in-flight count and next-allowed
//! time) stays one script on one server. A URL's seen-set entry lives on the shard of the
//! URL's host, so admitting a URL (mark it seen, queue its job) stays one script too.
//!
//! Shard 0 keeps the layout of an unsharded crawl (`trawl:{crawl}:`, with the crawl's
//! other keys: counters, spec, archives, the page gate); shard `i` uses the hash tag
//! `{crawl|s<i>}`, so its keys also fall in a slot of their own (`trawl submit` refuses
//! crawl ids with `|`, `{` or `}`, so no crawl's keys are another's shard). The cap on
//! queued URLs holds on each shard.

use crate::redis_conn::Conn;

/// One shard: its server and its key prefix.
#[derive(Clone)]
pub(crate) struct Shard {
    pub conn: Conn,
    pub prefix: String,
}

/// The key prefix of shard `i` of `crawl`.
pub fn shard_prefix(crawl: &str, i: usize) -> String {
    if i == 0 {
        format!("trawl:{{{crawl}}}:")
    } else {
        format!("trawl:{{{crawl}|s{i}}}:")
    }
}

/// A crawl id its keys can carry: `{` and `}` would end the hash tag early, and `|` could
/// make one crawl's keys another's shard.
pub fn check_crawl_id(crawl: &str) -> Result<(), String> {
    match crawl.chars().find(|c| matches!(c, '{' | '}' | '|')) {
        Some(c) => Err(format!("a crawl id cannot hold {c:?}: {crawl:?}")),
        None if crawl.is_empty() => Err("the crawl id is empty".into()),
        None => Ok(()),
    }
}

/// The shard of `host` among `n` (FNV-1a: stable across processes and versions, unlike
/// the standard library's hasher).
pub fn shard_of_host(host: &str, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in host.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % n as u64) as usize
}

/// The shard of a seen-set key: the shard of its URL's host (the frontier's
/// [`trawl_core::urlnorm::host_key`]), so a URL and its job are admitted together; a key
/// that is no URL goes by its own text.
pub fn shard_of_key(key: &str, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    match url::Url::parse(key) {
        Ok(u) if u.host_str().is_some() => shard_of_host(&trawl_core::urlnorm::host_key(&u), n),
        _ => shard_of_host(key, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_goes_with_its_host() {
        for n in 1..6 {
            for host in ["a.test", "127.1.0.7:18400", "example.org"] {
                let url = format!("http://{host}/x?y=1");
                let parsed = url::Url::parse(&url).unwrap();
                assert_eq!(
                    shard_of_key(&url, n),
                    shard_of_host(&trawl_core::urlnorm::host_key(&parsed), n),
                    "{url} over {n}"
                );
            }
        }
    }

    #[test]
    fn hosts_spread_over_the_shards() {
        let mut per = [0usize; 4];
        for i in 0..4000 {
            per[shard_of_host(&format!("host{i}.test"), 4)] += 1;
        }
        assert!(per.iter().all(|&c| (800..1200).contains(&c)), "{per:?}");
        assert_eq!(shard_of_key("not a url", 1), 0);
        assert!(shard_of_key("not a url", 3) < 3);
    }

    #[test]
    fn crawl_ids_that_would_break_the_hash_tag_are_refused() {
        assert!(check_crawl_id("docs-2026").is_ok());
        for bad in ["", "a|s1", "a{b", "a}b"] {
            assert!(check_crawl_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shard_zero_is_the_unsharded_layout() {
        assert_eq!(shard_prefix("c", 0), "trawl:{c}:");
        assert_eq!(shard_prefix("c", 2), "trawl:{c|s2}:");
    }
}

//! Where the cluster's backends are ([`ClusterSettings`]) and how their URLs are shown.

use serde::{Deserialize, Serialize};

/// Where the cluster's backends are and how its queues behave. Shared by the services and
/// the `trawl submit`/`status`/`dlq` commands, so both reach the same (secured) servers.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct ClusterSettings {
    /// The NATS server (JetStream enabled).
    #[cfg_attr(feature = "cli", arg(long))]
    pub nats_url: String,
    /// NATS user (with `nats_password`).
    #[cfg_attr(feature = "cli", arg(long))]
    pub nats_user: Option<String>,
    /// NATS password; better given as `TRAWL_NATS_PASSWORD` than on the command line.
    #[cfg_attr(feature = "cli", arg(long))]
    pub nats_password: Option<String>,
    /// NATS token; better given as `TRAWL_NATS_TOKEN`.
    #[cfg_attr(feature = "cli", arg(long))]
    pub nats_token: Option<String>,
    /// The Redis server; credentials go in the URL (`redis://user:password@host:6379`).
    #[cfg_attr(feature = "cli", arg(long))]
    pub redis_url: String,
    /// More Redis servers for the per-host state of a crawl submitted from here (its
    /// queues, politeness slots, robots cache and seen-set), sharded by host across
    /// `redis_url` and these: past what one Redis core sustains (~1,600 pages/s). Every
    /// service of the crawl must name the same servers in the same order.
    #[cfg_attr(
        feature = "cli",
        arg(long = "redis-state-url", value_name = "URL", value_delimiter = ',')
    )]
    pub redis_state_urls: Vec<String>,
    /// Subject and stream prefix of the hops.
    #[cfg_attr(feature = "cli", arg(long))]
    pub queue_prefix: String,
    /// Deliveries of a message before it is dead-lettered.
    #[cfg_attr(feature = "cli", arg(skip = ClusterSettings::default().max_deliver))]
    pub max_deliver: i64,
    /// Seconds a delivery may stay unacknowledged before the server redelivers it.
    #[cfg_attr(feature = "cli", arg(skip = ClusterSettings::default().ack_wait_s))]
    pub ack_wait_s: u64,
    /// A host slot claimed and never released (its holder died) frees itself after this,
    /// and its job goes back in the queue. Longer than a fetch can take.
    #[cfg_attr(feature = "cli", arg(skip = ClusterSettings::default().claim_ttl_s))]
    pub claim_ttl_s: u64,
    /// How long a claimed host stays taken by a holder (a frontier publishing its job, a
    /// fetcher fetching it) that stops renewing it every third of it: a killed replica's
    /// hosts are free again this soon. At most `claim_ttl_s`.
    #[cfg_attr(feature = "cli", arg(skip = ClusterSettings::default().claim_lease_s))]
    pub claim_lease_s: u64,
    /// Copies JetStream keeps of each stream (1, or 3 on a three-node cluster, which then
    /// rides through a node's loss). Applied when a stream is made, and to a stream made
    /// before with fewer.
    #[cfg_attr(feature = "cli", arg(skip = ClusterSettings::default().stream_replicas))]
    pub stream_replicas: usize,
    /// Seconds a stage may consume nothing while messages wait for it before `/readyz`
    /// says it is not ready (so Kubernetes starts it again).
    #[cfg_attr(feature = "cli", arg(skip = ClusterSettings::default().stall_after_s))]
    pub stall_after_s: u64,
    /// Jobs the fetch stream holds before the frontier waits to claim more: shallow, so a
    /// job's host claim never ages in it (more than all fetchers' concurrency together).
    #[cfg_attr(feature = "cli", arg(skip = ClusterSettings::default().fetch_stream_max))]
    pub fetch_stream_max: i64,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            nats_url: "nats://127.0.0.1:4222".into(),
            nats_user: None,
            nats_password: None,
            nats_token: None,
            redis_url: "redis://127.0.0.1:6379".into(),
            redis_state_urls: Vec::new(),
            queue_prefix: "trawl".into(),
            max_deliver: 5,
            ack_wait_s: 30,
            claim_ttl_s: 600,
            claim_lease_s: 10,
            stream_replicas: 1,
            stall_after_s: 60,
            fetch_stream_max: 4096,
        }
    }
}

impl ClusterSettings {
    /// The delivery limits and claim TTL, which are no flags of the `trawl` command, from
    /// `from` (the loaded layers): a hop's consumer that `trawl submit` happens to make
    /// first gets the ack wait the services are configured with, not the default.
    pub fn take_limits(&mut self, from: &ClusterSettings) {
        self.max_deliver = from.max_deliver;
        self.ack_wait_s = from.ack_wait_s;
        self.claim_ttl_s = from.claim_ttl_s;
        self.claim_lease_s = from.claim_lease_s;
        self.stream_replicas = from.stream_replicas;
        self.stall_after_s = from.stall_after_s;
        self.fetch_stream_max = from.fetch_stream_max;
    }

    /// The Redis servers a crawl's per-host state is sharded across: shard `i` lives on
    /// the `i`th (shard 0, with the crawl's other keys, on `redis_url`).
    pub fn state_nodes(&self) -> Vec<String> {
        std::iter::once(self.redis_url.clone())
            .chain(self.redis_state_urls.iter().cloned())
            .collect()
    }
}

/// Credentials stay out of logs and error messages.
impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |o: &Option<String>| o.as_ref().map(|_| "<hidden>");
        f.debug_struct("ClusterSettings")
            .field("nats_url", &redact_url(&self.nats_url))
            .field("nats_user", &self.nats_user)
            .field("nats_password", &hidden(&self.nats_password))
            .field("nats_token", &hidden(&self.nats_token))
            .field("redis_url", &redact_url(&self.redis_url))
            .field(
                "redis_state_urls",
                &self
                    .redis_state_urls
                    .iter()
                    .map(|u| redact_url(u))
                    .collect::<Vec<_>>(),
            )
            .field("queue_prefix", &self.queue_prefix)
            .field("max_deliver", &self.max_deliver)
            .field("ack_wait_s", &self.ack_wait_s)
            .field("claim_ttl_s", &self.claim_ttl_s)
            .field("claim_lease_s", &self.claim_lease_s)
            .field("stream_replicas", &self.stream_replicas)
            .field("stall_after_s", &self.stall_after_s)
            .field("fetch_stream_max", &self.fetch_stream_max)
            .finish()
    }
}

/// A server URL without its password, for logs and errors.
pub fn redact_url(raw: &str) -> String {
    // A list of servers (`nats://a:4222,nats://b:4222`): each one redacted.
    if raw.contains(',') {
        return raw.split(',').map(redact_url).collect::<Vec<_>>().join(",");
    }
    match url::Url::parse(raw) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => raw.to_string(),
    }
}

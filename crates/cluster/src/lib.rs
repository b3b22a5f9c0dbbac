//! The cluster runtime's parts: the queue interface over NATS JetStream, the state
//! interface and the dedup gate in Redis, the crawl spec the services share, and what every
//! service binary needs (configuration, endpoints, signals).

pub mod activity;
pub mod dead_pages;
pub mod dlq;
pub mod endpoints;
pub mod jetstream;
pub mod queue_stats;
pub mod queued_job;
pub mod redis_archives;
pub mod redis_conn;
pub mod redis_gate;
pub mod redis_history;
pub mod redis_min_gate;
pub(crate) mod redis_scripts;
pub mod redis_shards;
pub mod redis_state;
pub mod service;
pub mod spec;
pub mod spec_watch;
pub mod status;
pub mod submit;

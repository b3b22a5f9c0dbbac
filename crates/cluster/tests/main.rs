//! trawl-cluster's integration tests, one binary so its dependencies link once.

mod common;
mod gate_concurrency;
mod jetstream_queue;
mod nats_restart;
mod redis_restart;
mod redis_shards;
mod redis_state;

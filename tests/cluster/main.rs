//! The cluster end to end: the service binaries over NATS JetStream and Redis (the shared
//! servers and servers of the tests' own), and the faults they ride through.

mod cluster_ingest;
mod cluster_pipeline;
mod cluster_services;
mod cluster_shards;
mod faults;
mod policy;
mod recrawl_cluster;
mod restarts;
mod settings;

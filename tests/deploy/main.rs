//! What is deployed: the crate graph's invariants, the Helm chart and the compose file, the
//! compose stack started in Docker, and the check that keeps tests off stale binaries.

mod architecture;
mod containers;
mod deploy;
mod stale;

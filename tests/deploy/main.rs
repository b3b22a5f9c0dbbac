//! What is deployed: the crate graph's invariants, the Helm chart and the compose file, and
//! the compose stack started in Docker.

mod architecture;
mod containers;
mod deploy;

//! trawl-index's integration tests, one binary so its dependencies link once.

mod common;
mod index;
mod parity;
mod vectors;

//! Near-duplicate detection, the gate every extracted page passes before it is indexed.
//!
//! - [`simhash`]: 64-bit SimHash of normalized text over word 3-shingles, plus an exact
//!   128-bit content hash.
//! - [`gate`]: the check-and-insert interface and the in-memory band index (4 bands of 16
//!   bits: with Hamming distance <= 3 one band is always equal, so a lookup is 4 probes).
//! - [`redis_gate`]: the same gate in Redis, one atomic Lua script per check-and-insert, so
//!   replicas that see two near-copies at the same moment keep exactly one.
//! - [`minhash`]: MinHash signatures and an LSH index for corpus-level dedup at Jaccard 0.8.

pub mod boilerplate;
pub mod gate;
pub mod minhash;
pub mod redis_gate;
pub mod simhash;

pub use boilerplate::{BoilerplateConfig, HostLines};
pub use gate::{Gate, GateError, MemoryGate, Verdict};
pub use simhash::{Fingerprint, fingerprint, hamming};

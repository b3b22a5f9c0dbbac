//! Near-duplicate detection, the gate every extracted page passes before it is indexed.
//!
//! - [`simhash`]: 64-bit SimHash of normalized text over word 3-shingles, plus an exact
//!   128-bit content hash.
//! - [`gate`]: the check-and-insert interface and the SimHash gate's rule ([`SimGate`])
//!   over a [`print_store::PrintStore`]: the in-memory band index (distance + 1
//!   bands by pigeonhole: 3 bands of 21 bits at the default distance 2, 4 of 16 bits at 3;
//!   one band of a match is always equal, so a lookup is that many probes), or the
//!   embedded crawl's file of it (`trawl_store::gate_file`).
//!   The same gate in Redis (one atomic Lua script per check-and-insert, so replicas that
//!   see two near-copies at the same moment keep exactly one) is
//!   `trawl_cluster::redis_gate`.
//! - [`minhash`]: MinHash over word 5-grams: LSH bands for candidates, a b-bit sketch to
//!   verify them; the second page gate ([`MemoryMinGate`]; in Redis
//!   `trawl_cluster::redis_min_gate`) and the export's corpus dedup.

pub mod boilerplate;
pub mod gate;
pub mod minhash;
pub mod print_index;
pub mod print_store;
pub mod simhash;
pub mod sketch_store;

pub use boilerplate::{BoilerplateConfig, HostLines};
pub use gate::{
    Gate, GateError, GateMethod, GatePage, GateVerdict, MemoryGate, MemoryMinGate, MinGate, SimGate,
};
pub use print_store::{PrintStore, StoredPrint};
pub use simhash::{Fingerprint, fingerprint, hamming};
pub use sketch_store::SketchStore;

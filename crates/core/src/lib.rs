//! trawl's shared core: the messages that travel between stages, the two narrow interfaces a
//! stage sees (a [`queue::Queue`] and the shared [`state::State`]), their in-memory
//! implementations, URL normalization and crawl scope.
//!
//! Every stage is written against the traits only, so the embedded runtime (in-memory) and
//! the cluster runtime (NATS JetStream / Redis) run the same stage code.

#[cfg(feature = "runtime")]
pub mod archives;
pub mod change;
pub mod clock;
pub mod counters;
#[cfg(feature = "runtime")]
pub mod history;
#[cfg(feature = "runtime")]
pub mod journal;
pub mod message;
#[cfg(feature = "test-support")]
pub mod mutate;
#[cfg(feature = "runtime")]
pub mod pipeline;
pub mod policy;
#[cfg(feature = "runtime")]
pub mod queue;
pub mod render;
pub mod scope;
pub mod settings;
#[cfg(feature = "runtime")]
pub mod shutdown;
pub mod spec;
#[cfg(feature = "runtime")]
pub mod spill;
#[cfg(feature = "runtime")]
pub mod state;
pub mod urlnorm;

pub use message::*;

/// Errors from the shared interfaces. Stages map them into their own errors.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("queue closed")]
    Closed,
    #[error("unknown delivery id {0}")]
    UnknownDelivery(u64),
    #[error("backend error: {0}")]
    Backend(String),
}

pub type CoreResult<T> = Result<T, CoreError>;

/// The log filter when `TRAWL_LOG` is not set: trawl's own events from `info` up, the
/// storage engine's (LanceDB, DataFusion: one line per file they write) from `warn` up.
pub const DEFAULT_LOG_FILTER: &str = "info,lance=warn,datafusion=warn";

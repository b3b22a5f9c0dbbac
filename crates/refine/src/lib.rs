//! LM refinement of web pages, after ReScraper (cxcscmu/ReScraper): a page is rendered to
//! numbered lines ([`lines`]), a model writes a short edit program over those lines, and a
//! deterministic executor ([`program`]) applies it, so kept text is always copied from the
//! page, never generated.

#[cfg(feature = "models")]
pub mod backend;
pub mod bff;
pub mod lines;
#[cfg(feature = "models")]
pub mod page;
pub mod postfilter;
pub mod program;
mod python;
pub mod teacher;

pub use program::{Decision, Finish, Generation, Mode, Outcome, ProgramError, Warning, execute};

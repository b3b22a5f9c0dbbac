//! trawl-corpus's integration tests, one binary so its dependencies link once.

mod archives;
mod filters;

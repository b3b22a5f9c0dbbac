//! trawl-extract's integration tests, one binary so its dependencies link once.

mod fixtures;
mod hostile;

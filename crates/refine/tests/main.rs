//! trawl-refine's integration tests, one binary so its dependencies link once.

mod candle;
mod lines;
mod openai;
mod parity;
mod program;
mod teacher;

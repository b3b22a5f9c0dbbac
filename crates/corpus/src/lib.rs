//! Corpus building: web archives in (WARC, WET, ARC), language identification and quality
//! filters, JSONL or Parquet out.

pub mod archive;
pub mod export;
pub mod http;
pub mod ingest;
pub mod lang;
pub mod language_rules;
pub mod paragraphs;
pub mod quality;
pub mod sink;
pub mod tokenize;

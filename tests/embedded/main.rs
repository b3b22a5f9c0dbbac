//! The embedded runtime end to end over loopback test sites, in one test binary so the
//! whole stack links once.

mod bad_input;
mod cli;
mod corpus;
mod crawl_site;
mod dedup;
mod discovery_traps;
mod documents;
mod index_search;
mod page_policy;
mod politeness;
mod recrawl;
mod redirects;
mod refine;
mod render;
mod resume;
mod rustdoc;
mod synthetic_web;
mod warc_output;

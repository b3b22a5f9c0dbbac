//! Any bytes, as a sitemap and as a feed: the parsers report errors, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_extract::discovery::{parse_feed, parse_sitemap};

fuzz_target!(|data: &[u8]| {
    let _ = parse_sitemap(data);
    let _ = parse_feed(data);
});

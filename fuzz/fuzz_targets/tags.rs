//! Include/exclude selectors (from an API request) over a page (from the web): the first
//! line is the selector, the rest the page. Every call returns.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (sel, page) = text.split_once('\n').unwrap_or((&text, ""));
    let sel = vec![sel.to_string()];
    let _ = trawl_extract::filter_tags(page, &sel, &[]);
    let _ = trawl_extract::filter_tags(page, &[], &sel);
});

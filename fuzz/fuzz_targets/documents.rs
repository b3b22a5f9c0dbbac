//! Any bytes, as a PDF, a DOCX, a text or a Markdown file: the document reader returns
//! text or an error, without panicking, within its limits (the reader runs on the calling
//! thread here, so a hang is the fuzzer's timeout, not a watchdog's).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_doc::{DocKind, Limits, extract_here};

fuzz_target!(|data: &[u8]| {
    let kind = match data.first().map(|b| b % 4) {
        Some(0) => DocKind::Pdf,
        Some(1) => DocKind::Docx,
        Some(2) => DocKind::Text,
        _ => DocKind::Markdown,
    };
    let limits = Limits {
        max_chars: 1 << 20,
        max_pages: 50,
        deadline: std::time::Duration::from_secs(2),
    };
    if let Ok(d) = extract_here(data.get(1..).unwrap_or_default(), kind, &limits) {
        assert!(d.scanned_pages <= d.pages);
        assert!(d.pages as usize <= limits.max_pages);
    }
});

//! trawl-refine on hostile input: any bytes as a page to render, and as a model's output to
//! parse and execute (both readings) over lines rendered from a fixed page.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_refine::program::{Finish, Generation, Mode, execute};

const PAGE: &str = "<html><body><nav>Home | About</nav><h1>Title</h1><p>First paragraph of text.</p>\
    <ul><li>one</li><li>two</li></ul><p>Second paragraph, <code>code</code> inline.</p><footer>(c) 2026</footer></body></html>";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = trawl_refine::lines::render_lines(&text);
    let lines = trawl_refine::lines::render_lines(PAGE);
    for finish in [Finish::Stop, Finish::Length] {
        let g = Generation { text: text.to_string(), finish };
        let o = execute(&lines, &g, Mode::Trawl);
        // Kept text is copied: each line is a page line with parts cut out.
        if let (Some(t), Some(trawl_refine::Decision::Keep | trawl_refine::Decision::Edit)) = (&o.text, o.decision) {
            for l in t.lines() {
                assert!(lines.iter().any(|p| subsequence(l, p)), "{l:?} is not from the page");
            }
        }
        let _ = execute(&lines, &g, Mode::Python);
    }
});

fn subsequence(part: &str, whole: &str) -> bool {
    let mut it = whole.chars().filter(|c| !c.is_whitespace());
    part.chars().filter(|c| !c.is_whitespace()).all(|c| it.any(|w| w == c))
}

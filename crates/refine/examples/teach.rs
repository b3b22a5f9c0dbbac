//! Prints a page's rendered lines with the teacher's verdict (`+` kept, `-` removed) and the
//! program it writes.
//!
//!     cargo run -p trawl-refine --example teach -- page.html [URL]

fn main() {
    let mut args = std::env::args().skip(1);
    let p = args.next().expect("usage: teach PAGE.html [URL]");
    let url =
        url::Url::parse(&args.next().unwrap_or_else(|| "http://example.com/".into())).expect("URL");
    let raw = std::fs::read(p).expect("read the page");
    let (html, _) = trawl_body::decode_html(&raw, None);
    let (lines, t) = trawl_refine::teacher::teach_page(&html, &url);
    for (i, (l, k)) in lines.iter().zip(&t.keep).enumerate() {
        println!("{} {:>4} {l}", if *k { '+' } else { '-' }, i + 1);
    }
    println!("{}", t.program);
}

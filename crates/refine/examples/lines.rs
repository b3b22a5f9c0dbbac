//! Prints a page as the refining model reads it: `<lid:N> line`, one per line.
//!
//!     cargo run -p trawl-refine --example lines -- page.html

fn main() {
    let p = std::env::args().nth(1).expect("usage: lines PAGE.html");
    let raw = std::fs::read(p).expect("read the page");
    let lines = trawl_refine::lines::render_lines(&String::from_utf8_lossy(&raw));
    println!("{}", trawl_refine::lines::number_lines(&lines));
}

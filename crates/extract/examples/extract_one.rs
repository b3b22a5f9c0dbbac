//! Prints what the extractor makes of one HTML file: `extract_one FILE [URL] [explain|md]`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let html = String::from_utf8_lossy(&std::fs::read(&args[1]).expect("read")).into_owned();
    let url = args.get(2).and_then(|u| url::Url::parse(u).ok());
    let c = trawl_extract::content::extract(&html, url.as_ref(), Default::default());
    match args.get(3).map(String::as_str) {
        Some("explain") => print!("{}", trawl_extract::content::explain(&html, url.as_ref())),
        Some("md") => println!("{}", c.markdown.unwrap_or_default()),
        _ => println!("{}", c.text),
    }
}

//! Writes the metadata trawl's extractor finds on each page of a benchmark set (a directory
//! with `ground_truth.jsonl` naming `html_file` and `url`), one JSON object a line, for
//! `bench/metadata/score.py` to judge beside trafilatura and htmldate.
//!
//! cargo run --release -p trawl-extract --example meta_eval -- SET_DIR OUT.jsonl

use std::io::{BufRead, Write};
use std::path::PathBuf;

use trawl_extract::content::{Options, extract};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 3, "usage: meta_eval SET_DIR OUT.jsonl");
    let dir = PathBuf::from(&args[1]);
    let truth = std::fs::File::open(dir.join("ground_truth.jsonl"))?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[2])?);
    let opts = Options {
        markdown: false,
        markdown_links: false,
        links: false,
        ..Options::default()
    };
    let mut n = 0;
    for line in std::io::BufReader::new(truth).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let file = v["html_file"].as_str().unwrap_or_default();
        let url = v["url"].as_str().and_then(|u| url::Url::parse(u).ok());
        let html = String::from_utf8_lossy(&std::fs::read(dir.join(file))?).into_owned();
        let c = extract(&html, url.as_ref(), opts);
        let m = c.meta;
        let rec = serde_json::json!({
            "html_file": file, "title": c.title, "author": m.author,
            "published": m.published, "modified": m.modified, "site_name": m.site_name,
            "description": m.description, "language": m.language,
        });
        writeln!(out, "{rec}")?;
        n += 1;
    }
    eprintln!("{n} pages");
    Ok(())
}

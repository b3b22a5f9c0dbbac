//! Runs the content extractor in-process over an extraction benchmark set and writes
//! predictions in the form `shared/bench/extraction/eval.py` caches (one JSON object per
//! page with the text and the CPU seconds of the extraction call), so eval.py scores them
//! beside the Python peers.
//!
//! cargo run --release -p trawl-extract --example extract_eval -- SET_DIR PREDS.jsonl [ROUNDS]
//!
//! With `TRAWL_EVAL_PARSE_ONLY` set it times the HTML parse alone and writes empty texts.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use trawl_extract::content::{Options, extract};

fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 3,
        "usage: extract_eval SET_DIR PREDS.jsonl [ROUNDS]"
    );
    let dir = PathBuf::from(&args[1]);
    let rounds: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let truth = std::fs::File::open(dir.join("ground_truth.jsonl"))?;
    let mut pages = Vec::new();
    for line in std::io::BufReader::new(truth).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let id = v["id"].as_str().unwrap_or_default().to_string();
        let file = v["html_file"].as_str().unwrap_or_default().to_string();
        let url = v["url"].as_str().and_then(|u| url::Url::parse(u).ok());
        let bytes = std::fs::read(dir.join(&file))?;
        pages.push((id, url, bytes));
    }
    let opts = Options {
        markdown: false,
        markdown_links: false,
        links: false,
        ..Options::default()
    };
    // Warm-up, untimed (as eval.py does for its workers): page faults and lazy statics.
    if let Some((_, url, bytes)) = pages.first() {
        let _ = extract(&String::from_utf8_lossy(bytes), url.as_ref(), opts);
    }
    // The parse alone (html5ever through dom_query, as the extractor calls it), for the
    // share of the time no extraction heuristic can win back.
    let parse_only = std::env::var_os("TRAWL_EVAL_PARSE_ONLY").is_some();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[2])?);
    let mut total_cpu = 0.0;
    let mut times = Vec::new();
    for (id, url, bytes) in &pages {
        let html = String::from_utf8_lossy(bytes);
        let mut best = f64::MAX;
        let mut text = String::new();
        for _ in 0..rounds {
            let t0 = thread_cpu();
            if parse_only {
                drop(dom_query::Document::from(html.as_ref()));
            } else {
                text = extract(&html, url.as_ref(), opts).text;
            }
            let dt = thread_cpu() - t0;
            best = best.min(dt);
        }
        total_cpu += best;
        times.push(best);
        let rec = serde_json::json!({"id": id, "text": text, "sec": best, "cpu": best,
            "bytes": bytes.len(), "error": null});
        writeln!(out, "{rec}")?;
    }
    times.sort_by(f64::total_cmp);
    eprintln!(
        "{} pages, {:.1} pages/CPU-s, median {:.2} ms",
        pages.len(),
        pages.len() as f64 / total_cpu,
        times[times.len() / 2] * 1e3
    );
    Ok(())
}

//! The document reader as the crawl runs it (`trawl_doc::extract`, default limits), one
//! file a process so its peak memory is its own: `doc_bench FILE OUT.txt` prints one JSON
//! line (kind, bytes, pages, scanned pages, characters, seconds, pages/s, cut, error) and
//! writes the text to OUT.txt for scoring. `bench/documents/run.sh` runs it.

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(file), Some(out)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: doc_bench FILE OUT.txt");
        std::process::exit(2);
    };
    let bytes = std::fs::read(file).unwrap_or_else(|e| {
        eprintln!("{file}: {e}");
        std::process::exit(1)
    });
    let len = bytes.len();
    let Some(kind) = trawl_doc::kind_of(None, file, &bytes) else {
        eprintln!("{file}: not a document read here");
        std::process::exit(1)
    };
    let t = Instant::now();
    let r = trawl_doc::extract(bytes, kind, trawl_doc::Limits::default());
    let secs = t.elapsed().as_secs_f64();
    let line = match r {
        Ok(d) => {
            let _ = std::fs::write(out, &d.text);
            format!(
                r#"{{"file":"{file}","kind":"{}","bytes":{len},"pages":{},"scanned":{},"chars":{},"secs":{secs:.3},"pages_per_s":{:.1},"cut":{}}}"#,
                kind.as_str(),
                d.pages,
                d.scanned_pages,
                d.text.chars().count(),
                f64::from(d.pages) / secs.max(1e-9),
                d.cut
            )
        }
        Err(e) => format!(
            r#"{{"file":"{file}","kind":"{}","bytes":{len},"secs":{secs:.3},"error":"{}"}}"#,
            kind.as_str(),
            e.kind()
        ),
    };
    println!("{line}");
}

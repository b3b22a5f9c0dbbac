//! Counts the records of web archives by type: `archive_count FILE...`.
use std::collections::BTreeMap;
fn main() {
    for p in std::env::args().skip(1) {
        let mut c: BTreeMap<String, usize> = BTreeMap::new();
        let mut errs = Vec::new();
        match trawl_corpus::archive::read_all(std::path::Path::new(&p)) {
            Ok(items) => {
                for i in items {
                    match i {
                        trawl_corpus::archive::Item::Record(r) => {
                            *c.entry(r.kind).or_default() += 1
                        }
                        trawl_corpus::archive::Item::Malformed { number, message } => {
                            errs.push(format!("#{number}: {message}"))
                        }
                    }
                }
            }
            Err(e) => errs.push(e.to_string()),
        }
        println!(
            "{}: {:?} {:?}",
            std::path::Path::new(&p)
                .file_name()
                .unwrap()
                .to_string_lossy(),
            c,
            errs
        );
    }
}

//! Every sample archive in `shared/data/warc` read: good files completely (record counts
//! checked against warcio's reading of the same files), malformed ones reported record by
//! record with the good records around them kept; hostile bytes never panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use trawl_corpus::archive::{ArchiveReader, Item, read_all};

fn data() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/warc");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!(
            "SKIPPED: {} is not here (the shared sample archives)",
            d.display()
        );
        None
    }
}

fn counts(path: &Path) -> (BTreeMap<String, usize>, Vec<String>) {
    let mut c = BTreeMap::new();
    let mut errors = Vec::new();
    for item in read_all(path).unwrap() {
        match item {
            Item::Record(r) => *c.entry(r.kind).or_default() += 1,
            Item::Malformed { number, message } => errors.push(format!("#{number}: {message}")),
        }
    }
    (c, errors)
}

fn map(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn good_archives_are_read_completely() {
    let Some(d) = data() else { return };
    // The counts warcio 1.8.1 reads from the same files (ARC headers become warcinfo).
    let expected: &[(&str, &[(&str, usize)])] = &[
        (
            "commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz",
            &[
                ("warcinfo", 1),
                ("request", 17),
                ("response", 16),
                ("metadata", 16),
            ],
        ),
        (
            "commoncrawl/clueweb-quirk.warc.gz",
            &[("warcinfo", 1), ("response", 29)],
        ),
        (
            "commoncrawl/whirlwind.warc.gz",
            &[
                ("warcinfo", 1),
                ("request", 1),
                ("response", 1),
                ("metadata", 1),
            ],
        ),
        (
            "commoncrawl/whirlwind.warc.wet.gz",
            &[("warcinfo", 1), ("conversion", 1)],
        ),
        (
            "commoncrawl/whirlwind.warc.wat.gz",
            &[("warcinfo", 1), ("metadata", 1)],
        ),
        (
            "warcio/example.warc",
            &[
                ("warcinfo", 2),
                ("request", 2),
                ("response", 1),
                ("revisit", 1),
            ],
        ),
        (
            "warcio/example.warc.gz",
            &[
                ("warcinfo", 2),
                ("request", 2),
                ("response", 1),
                ("revisit", 1),
            ],
        ),
        ("warcio/example.arc", &[("warcinfo", 1), ("response", 1)]),
        ("warcio/example.arc.gz", &[("warcinfo", 1), ("response", 1)]),
        ("warcio/example-digest.warc", &[("request", 4)]),
        (
            "warcio/example-iana.org-chunked.warc",
            &[("warcinfo", 1), ("request", 1), ("response", 1)],
        ),
        (
            "warcio/example-resource.warc.gz",
            &[("warcinfo", 2), ("resource", 1)],
        ),
        (
            "warcio/post-test.warc.gz",
            &[("request", 3), ("response", 3)],
        ),
        (
            "warcio/example-space-in-target-uri.warc.gz",
            &[("warcinfo", 1), ("resource", 1)],
        ),
        (
            "warcio/example-space-in-url.arc",
            &[("warcinfo", 1), ("response", 1)],
        ),
        (
            "warcio/example-wget-bad-target-uri.warc.gz",
            &[
                ("warcinfo", 1),
                ("request", 1),
                ("response", 1),
                ("metadata", 1),
                ("resource", 2),
            ],
        ),
    ];
    for (file, want) in expected {
        let (got, errors) = counts(&d.join(file));
        assert_eq!(got, map(want), "{file}");
        assert!(errors.is_empty(), "{file}: {errors:?}");
    }
    // Every file of the folders is covered by this test or the next.
    let mut n = 0;
    for sub in ["commoncrawl", "warcio"] {
        n += std::fs::read_dir(d.join(sub)).unwrap().count();
    }
    assert_eq!(n, expected.len() + 5);
}

#[test]
fn malformed_archives_are_reported_and_the_good_records_kept() {
    let Some(d) = data() else { return };
    // Two bad ARC records (lengths -1 and "abc") are reported; the good one between them
    // is kept.
    let (got, errors) = counts(&d.join("warcio/bad.arc"));
    assert_eq!(got, map(&[("response", 1)]));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("bad ARC length \"-1\""), "{errors:?}");
    // A file cut in the middle of a record, followed by junk: the four whole records, then a
    // clear error for the junk.
    let (got, errors) = counts(&d.join("warcio/example-trunc.warc"));
    assert_eq!(
        got,
        map(&[("warcinfo", 2), ("request", 1), ("response", 1)])
    );
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("not a WARC record header"), "{errors:?}");
    // A record split across gzip members is still one record; warcio stops here.
    let (got, errors) = counts(&d.join("warcio/example-wrong-chunks.warc.gz"));
    assert_eq!(got, map(&[("request", 1), ("response", 1)]), "{errors:?}");
    // Bad HTTP chunking inside a well-framed record is the HTTP parser's business.
    for f in [
        "warcio/example-bad-non-chunked.warc.gz",
        "warcio/example-bad.warc.gz.bad",
    ] {
        let (got, errors) = counts(&d.join(f));
        assert_eq!(got.values().sum::<usize>(), 6, "{f}: {got:?}");
        assert!(errors.is_empty(), "{f}: {errors:?}");
    }
}

#[test]
fn a_corrupt_gzip_member_loses_only_its_record() {
    let Some(d) = data() else { return };
    let bytes = std::fs::read(d.join("commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz")).unwrap();
    // Members start with 1f 8b 08; damage the deflate data of the 10th.
    let starts: Vec<usize> = bytes
        .windows(3)
        .enumerate()
        .filter(|(_, w)| *w == [0x1f, 0x8b, 0x08])
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 50);
    let mut bad = bytes.clone();
    for b in &mut bad[starts[9] + 30..starts[9] + 60] {
        *b ^= 0x5a;
    }
    let items: Vec<Item> = ArchiveReader::new(std::io::Cursor::new(bad)).collect();
    let records = items
        .iter()
        .filter(|i| matches!(i, Item::Record(_)))
        .count();
    let errors: Vec<&Item> = items
        .iter()
        .filter(|i| matches!(i, Item::Malformed { .. }))
        .collect();
    assert!(!errors.is_empty());
    assert!(
        (47..=49).contains(&records),
        "{records} records, errors {errors:?}"
    );
}

#[test]
fn hostile_bytes_never_panic() {
    let Some(d) = data() else { return };
    let seeds: Vec<Vec<u8>> = [
        "warcio/example.warc",
        "warcio/example.arc",
        "commoncrawl/whirlwind.warc.wet.gz",
    ]
    .iter()
    .map(|f| std::fs::read(d.join(f)).unwrap())
    .collect();
    let seeds: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
    let mut read = 0usize;
    trawl_core::mutate::each_mutation(&seeds, 3000, |m| {
        read += ArchiveReader::new(std::io::Cursor::new(m.to_vec())).count();
    });
    assert!(read > 3000, "{read}");
}

//! WARC output: every exchange as request + response, readable by the `warc` crate and
//! accepted by Python's warcio.

use support::{options, python_has};
use trawl_testsite::{SiteConfig, TestSite};
use warc::{RecordType, WarcHeader, WarcReader};

/// warcio's command line (the package has no `__main__`).
const WARCIO: &str = "import sys; from warcio.cli import main; sys.exit(main(sys.argv[1:]))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_exchange_is_archived_and_warcio_accepts_it() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(
        &[
            site.url("/"),
            site.url("/redirect/chain/2"),
            site.url("/gzip-page"),
        ],
        out.path(),
    );
    o.crawl.warc_max_bytes = 4096;
    let (_, outputs) = trawl::crawl(o).await.unwrap();
    assert!(
        outputs.warc_files.len() > 1,
        "a 4 KiB limit must rotate files"
    );

    let mut requests = 0;
    let mut responses = std::collections::HashMap::new();
    let mut concurrent = Vec::new();
    for f in &outputs.warc_files {
        for rec in WarcReader::from_path_gzip(f).unwrap().iter_records() {
            let rec = rec.unwrap();
            assert_eq!(rec.warc_version(), "1.1");
            match rec.warc_type() {
                RecordType::Request => {
                    requests += 1;
                    concurrent.push(rec.header(WarcHeader::ConcurrentTo).unwrap().to_string());
                }
                RecordType::Response => {
                    assert!(
                        rec.header(WarcHeader::PayloadDigest)
                            .unwrap()
                            .starts_with("sha1:")
                    );
                    let uri = rec.header(WarcHeader::TargetURI).unwrap().to_string();
                    responses.insert(rec.warc_id().to_string(), (uri, rec.body().to_vec()));
                }
                _ => {}
            }
        }
    }
    assert_eq!(
        requests,
        site.log().len(),
        "one request record per request the server saw"
    );
    assert_eq!(responses.len(), site.log().len());
    for id in &concurrent {
        assert!(
            responses.contains_key(id),
            "WARC-Concurrent-To {id} names no response"
        );
    }
    // Raw bytes as received: the gzip page is stored compressed, with its header.
    let (_, gz) = responses
        .values()
        .find(|(u, _)| u.ends_with("/gzip-page"))
        .unwrap();
    let head_end = gz.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&gz[..head_end]).to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"));
    assert_eq!(&gz[head_end + 4..head_end + 6], &[0x1f, 0x8b]);

    if python_has("warcio") {
        for f in &outputs.warc_files {
            let check = std::process::Command::new("python3")
                .args(["-c", WARCIO, "check", "-v"])
                .arg(f)
                .output()
                .unwrap();
            assert!(
                check.status.success(),
                "warcio check {}: {}{}",
                f.display(),
                String::from_utf8_lossy(&check.stdout),
                String::from_utf8_lossy(&check.stderr)
            );
            let index = std::process::Command::new("python3")
                .args(["-c", WARCIO, "index"])
                .arg(f)
                .output()
                .unwrap();
            assert!(index.status.success());
            let idx = String::from_utf8_lossy(&index.stdout);
            assert!(idx.lines().count() >= 3, "{idx}");
        }
    }
}

//! Distributed ingest (`trawl submit --archives` + `trawl-ingester` replicas + the indexer)
//! beside the local `trawl ingest` of the same archives: the same documents and the same
//! dedup decisions, every archive acked once through, a missing one retried and
//! dead-lettered with its reason, progress per archive in `trawl status`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::services::{Stack, service_bins};
use trawl::corpus::IngestArgs;
use trawl_core::archives::ArchiveLedger;
use trawl_testsite::{SiteConfig, TestSite};

/// Index of `trawl-ingester` and `trawl-indexer` in `support::services::NAMES`.
const INGESTER: usize = 8;
const INDEXER: usize = 4;

/// The id the gate knows a page by (its record id: every archive here has them).
fn id_of(p: &Value) -> String {
    p["source"]["record_id"].as_str().unwrap().to_string()
}

/// Documents by id: what a page is, leaving out where its archive was read from and which
/// copy of its group it names (order decides that).
fn documents(lines: &[Value]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut twice = Vec::new();
    for p in lines {
        let mut p = p.clone();
        let m = p.as_object_mut().unwrap();
        for k in ["duplicate_of", "distance", "similarity"] {
            m.remove(k);
        }
        m["source"].as_object_mut().unwrap().remove("file");
        let id = id_of(&p);
        if out.insert(id.clone(), p).is_some() {
            twice.push(id);
        }
    }
    assert!(twice.is_empty(), "written twice: {twice:?}");
    out
}

/// The dedup decisions up to order: the groups the `duplicate_of` links make.
fn groups(lines: &[Value]) -> BTreeSet<BTreeSet<String>> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    fn root(parent: &BTreeMap<String, String>, mut id: String) -> String {
        while let Some(p) = parent.get(&id) {
            id = p.clone();
        }
        id
    }
    for p in lines {
        if let Some(of) = p["duplicate_of"].as_str() {
            let (a, b) = (root(&parent, id_of(p)), root(&parent, of.to_string()));
            if a != b {
                parent.insert(a, b);
            }
        }
    }
    let mut by_root: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in lines {
        let id = id_of(p);
        by_root
            .entry(root(&parent, id.clone()))
            .or_default()
            .insert(id);
    }
    by_root.into_values().filter(|g| g.len() > 1).collect()
}

/// `trawl ingest` with its defaults (the MinHash gate, no boilerplate step), the gate's
/// first `gate_in_memory` / 4 pages in memory.
async fn local_ingest(
    inputs: Vec<String>,
    out: &Path,
    gate_in_memory: usize,
) -> trawl_corpus::ingest::IngestReport {
    trawl::corpus::ingest(&IngestArgs {
        inputs,
        out: out.to_path_buf(),
        threads: Some(2),
        dedup_method: trawl_core::settings::DedupMethod::Minhash,
        dedup_distance: 2,
        dedup_similarity: 0.8,
        no_dedup: false,
        boilerplate_min_pages: 0,
        gate_in_memory: Some(gate_in_memory),
    })
    .await
    .unwrap()
}

fn shared(rel: &str) -> Option<std::path::PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared")
        .join(rel);
    p.exists().then_some(p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ingesters_ingest_what_trawl_ingest_does() {
    let Some(paths) = service_bins() else {
        return;
    };
    // Archives: a crawl of the test site twice (the second's pages copy the first's under
    // other record ids), and the shared Common Crawl samples when they are here.
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let archives = dir.path().join("archives");
    std::fs::create_dir_all(&archives).unwrap();
    let mut names = Vec::new();
    for round in 0..2 {
        let out = tempfile::tempdir().unwrap();
        let (_, outputs) = trawl::crawl(support::options(&[site.url("/")], out.path()))
            .await
            .unwrap();
        for (i, f) in outputs.warc_files.iter().enumerate() {
            let name = format!("crawl{round}-{i}.warc.gz");
            std::fs::copy(f, archives.join(&name)).unwrap();
            names.push(name);
        }
    }
    for rel in [
        "data/warc/commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz",
        "data/warc/commoncrawl/whirlwind.warc.wet.gz",
        "data/warc/commoncrawl/clueweb-quirk.warc.gz",
    ] {
        match shared(rel) {
            Some(p) => {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                std::fs::copy(&p, archives.join(&name)).unwrap();
                names.push(name);
            }
            None => eprintln!("{rel} is not here: ingesting the crawl's archives only"),
        }
    }
    assert!(names.len() >= 2, "{names:?}");

    // Local: `trawl ingest` of every archive.
    let local = tempfile::tempdir().unwrap();
    let inputs: Vec<String> = names
        .iter()
        .map(|n| archives.join(n).display().to_string())
        .collect();
    let report = local_ingest(inputs.clone(), local.path(), 200_000).await;
    let local_lines = support::all_pages(local.path());
    assert!(
        report.duplicates_exact > 0,
        "the second crawl copies the first"
    );
    // The gate in its file from the first page on: the same documents and groups of
    // copies (which page of a group comes first depends on the extraction threads'
    // timing, so the verdicts are compared as groups; page for page in gate_file's tests).
    let filed = tempfile::tempdir().unwrap();
    let filed_report = local_ingest(inputs, filed.path(), 0).await;
    let filed_lines = support::all_pages(filed.path());
    assert_eq!(filed_report.duplicates_exact, report.duplicates_exact);
    assert_eq!(filed_report.duplicates_near, report.duplicates_near);
    assert_eq!(documents(&filed_lines), documents(&local_lines));
    assert_eq!(groups(&filed_lines), groups(&local_lines));
    assert!(!filed.path().join("gate.db").exists(), "removed at the end");

    // Distributed: a gzip list of relative paths, the last archive by URL instead, and one
    // URL that answers 404.
    let served = TestSite::start(SiteConfig {
        dir: Some(archives.clone()),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let (by_url, by_path) = names.split_last().unwrap();
    let mut list = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for n in by_path {
        writeln!(list, "{n}").unwrap();
    }
    let by_url = served.url(&format!("/{by_url}"));
    let missing = served.url("/no-such-archive.warc.gz");
    writeln!(list, "{by_url}\n{missing}").unwrap();
    let list_path = archives.join("warc.paths.gz");
    std::fs::write(&list_path, list.finish().unwrap()).unwrap();

    let stack = Stack::start_services(&paths, &[INGESTER, INGESTER, INDEXER], &[]);
    let done = submit(&paths[0], &stack, &list_path).await.unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    // The missing archive fails the submit once everything else is through.
    assert!(!done.status.success(), "{stderr}");
    assert!(stderr.contains("1 archives failed"), "{stderr}");
    let status = drained_status(&done);
    assert_eq!(status["drained"], true, "{status}");
    let a = &status["archives"];
    assert_eq!(a["total"], names.len() + 1, "{a}");
    assert_eq!(a["stages"]["done"], names.len(), "{a}");
    assert_eq!(a["stages"]["failed"], 1, "{a}");
    let failed = &a["unfinished"][0];
    assert_eq!(failed["source"], missing.as_str(), "{a}");
    assert_eq!(failed["failures"], trawl_ingester::ARCHIVE_TRIES, "{a}");
    assert!(failed["error"].as_str().unwrap().contains("404"), "{a}");
    assert_eq!(a["documents"], report.documents, "{a}");
    assert_eq!(a["malformed"], report.malformed, "{a}");

    // The dead letter keeps the reason.
    let dlq = Command::new(&paths[0])
        .args(["dlq", "list", "ingester"])
        .envs(stack.env())
        .output()
        .unwrap();
    let letters = String::from_utf8_lossy(&dlq.stdout);
    assert_eq!(letters.lines().count(), 1, "{letters}");
    assert!(letters.contains("HTTP 404"), "{letters}");

    // The same documents, the same groups of copies.
    let cluster_lines = support::all_pages(stack.out.path());
    assert_eq!(cluster_lines.len(), local_lines.len());
    let (l, c) = (documents(&local_lines), documents(&cluster_lines));
    for (id, doc) in &l {
        assert_eq!(Some(doc), c.get(id), "{id}");
    }
    let copies = |lines: &[Value]| {
        lines
            .iter()
            .filter(|p| p["duplicate_of"].is_string())
            .count()
    };
    assert_eq!(copies(&cluster_lines), copies(&local_lines));
    assert!(copies(&local_lines) > 0);
    assert_eq!(groups(&cluster_lines), groups(&local_lines));
    eprintln!(
        "{} archives: {} documents, {} copies in {} groups, the same in both ingests",
        names.len(),
        cluster_lines.len(),
        copies(&cluster_lines),
        groups(&cluster_lines).len()
    );
    // Read from where the list said: the URL's archive names its URL.
    assert!(
        cluster_lines
            .iter()
            .any(|p| p["source"]["file"].as_str() == Some(by_url.as_str()))
    );
    stack.stop().await;
}

/// A gzip WARC of `n` HTML responses, one member a record; every tenth page copies the
/// one before it.
fn synthetic_warc(path: &Path, n: usize) {
    use flate2::{Compression, write::GzEncoder};
    let mut out = std::fs::File::create(path).unwrap();
    for i in 0..n {
        let text_of = if i % 10 == 9 { i - 1 } else { i };
        let body = format!(
            "<html><head><title>Page {text_of}</title></head><body><main><h1>Page \
             {text_of}</h1><p>Record {text_of} of the synthetic archive: {} words follow \
             so that the page has text enough. {}</p></main></body></html>",
            40,
            (0..40)
                .map(|w| format!("w{}x{}", text_of * 7 + w, w % 5))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let http = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \
             {}\r\n\r\n{body}",
            body.len()
        );
        let rec = format!(
            "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: \
             <urn:uuid:00000000-0000-4000-8000-{i:012}>\r\nWARC-Target-URI: \
             http://synthetic.test/p/{i}\r\nWARC-Date: 2026-01-01T00:00:00Z\r\nContent-Type: \
             application/http; msgtype=response\r\nContent-Length: {}\r\n\r\n{http}\r\n\r\n",
            http.len()
        );
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(rec.as_bytes()).unwrap();
        out.write_all(&gz.finish().unwrap()).unwrap();
    }
}

/// `trawl submit --archives LIST --wait` with the stack's variables (its ack wait among
/// them: the first to make the `archives` consumer sets it), in the background.
fn submit(
    trawl: &Path,
    stack: &Stack,
    list: &Path,
) -> tokio::task::JoinHandle<std::process::Output> {
    let mut c = Command::new(trawl);
    c.args(["submit", "--archives"])
        .arg(list)
        .args(["--wait", "--wait-timeout", "240"])
        .env("TRAWL_LOG", "warn")
        .envs(stack.env());
    tokio::task::spawn_blocking(move || c.output().unwrap())
}

/// The drained status `submit --wait` printed after the crawl id.
fn drained_status(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (_, json) = stdout
        .split_once('\n')
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    serde_json::from_str(json).unwrap()
}

/// `trawl status --json` of the stack's crawl.
fn status(trawl: &Path, stack: &Stack) -> Value {
    let out = Command::new(trawl)
        .args(["status", "--json", &stack.crawl])
        .envs(stack.env())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingester_killed_mid_archive_is_taken_over_with_no_page_lost_or_doubled() {
    let Some(paths) = service_bins() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let warc = dir.path().join("synthetic.warc.gz");
    let n = 3000;
    synthetic_warc(&warc, n);
    let local = tempfile::tempdir().unwrap();
    local_ingest(vec![warc.display().to_string()], local.path(), 200_000).await;
    let local_lines = support::all_pages(local.path());
    assert_eq!(local_lines.len(), n);

    // A short ack wait: the killed replica's job comes back within seconds.
    let mut stack = Stack::start_services(
        &paths,
        &[INGESTER, INGESTER, INDEXER],
        &[("TRAWL_ACK_WAIT_S", "3")],
    );
    let submitted = submit(&paths[0], &stack, &warc);
    // Wait until one replica is well into the archive, then kill it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let pid = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no ingester took the archive"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let s = status(&paths[0], &stack);
        let p = &s["archives"]["unfinished"][0];
        if p["stage"] == "reading" && p["through"].as_u64().unwrap_or(0) >= 300 {
            eprintln!("killing the replica reading it: {p}");
            let worker = p["worker"].as_str().unwrap();
            break worker.rsplit('-').next().unwrap().parse::<u32>().unwrap();
        }
    };
    let i = stack
        .services
        .0
        .iter()
        .position(|(_, c)| c.id() == pid)
        .expect("the replica reading the archive is one of the stack's");
    let _ = stack.services.0[i].1.kill();
    let done = submitted.await.unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let report = drained_status(&done);
    assert_eq!(report["drained"], true, "{report}");
    let a = &report["archives"];
    assert_eq!(a["stages"]["done"], 1, "{a}");
    assert_eq!(a["documents"], n, "{a}");
    // Every record once (`documents` fails on a page written twice), as the local ingest.
    let cluster_lines = support::all_pages(stack.out.path());
    let (l, c) = (documents(&local_lines), documents(&cluster_lines));
    assert_eq!(l.len(), c.len());
    for (id, doc) in &l {
        assert_eq!(Some(doc), c.get(id), "{id}");
    }
    assert_eq!(groups(&cluster_lines), groups(&local_lines));
    assert_eq!(groups(&local_lines).len(), n / 10);
    // Taken over on the second delivery; a crash is no failed read.
    let ledger =
        trawl_cluster::redis_archives::RedisLedger::connect("redis://127.0.0.1:6379", &stack.crawl)
            .await
            .unwrap();
    let p = ledger.get(warc.to_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(
        (p.attempts, p.failures, p.through),
        (2, 0, n as u64),
        "{p:?}"
    );
    stack.stop().await;
}

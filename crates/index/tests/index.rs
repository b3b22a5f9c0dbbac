//! The index end to end on real LanceDB tables in a temporary directory: chunk aliases,
//! page replacement without stale or duplicate rows, reopening, search modes, and Python's
//! `lancedb` reading what trawl wrote.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use trawl_core::PageRecord;
use trawl_index::{IndexOptions, Indexer, Mode, search};

fn page(url: &str, title: &str, markdown: &str) -> PageRecord {
    let mut p: PageRecord = serde_json::from_value(serde_json::json!({
        "url": url, "final_url": url, "status": 200, "redirects": [], "depth": 0,
        "kind": "page", "fetched_at": "2026-11-30T12:00:00Z", "text": markdown,
        "links_found": 0, "wire_bytes": 0
    }))
    .unwrap();
    p.title = Some(title.to_string());
    p.markdown = Some(markdown.to_string());
    p
}

fn para(topic: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("The {topic} step number {i} explains how {topic} works in detail."))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Stored chunks whose text holds `needle`.
async fn stored(store: &trawl_index::Store, needle: &str) -> usize {
    let texts = column(store, "chunks", "text").await;
    texts.iter().filter(|t| t.contains(needle)).count()
}

async fn column(store: &trawl_index::Store, table: &str, name: &str) -> Vec<String> {
    let t = if table == "chunks" {
        store.chunks()
    } else {
        store.aliases()
    };
    trawl_index::store::string_column(t, name).await.unwrap()
}

fn opts(dir: &std::path::Path, embed: bool) -> IndexOptions {
    let mut o = IndexOptions::new(dir.join("index").to_string_lossy().to_string());
    o.embed = embed;
    o.flush_chunks = 8;
    o
}

#[tokio::test]
async fn aliases_replacement_and_reopening_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let install = format!(
        "# Install\n\n## Linux\n\n{}\n\n## Windows\n\n{}",
        para("kraken", 30),
        para("walrus", 30)
    );
    let usage = format!("# Usage\n\n{}", para("pelican", 20));
    // A "print the whole book" page repeats both chapters.
    let book = format!("# Book\n\n{install}\n\n{usage}");
    let mut ix = Indexer::open(opts(dir.path(), false)).await.unwrap();
    assert!(
        ix.add_page(&page("http://t/install", "Install", &install))
            .await
            .unwrap()
    );
    assert!(
        ix.add_page(&page("http://t/usage", "Usage", &usage))
            .await
            .unwrap()
    );
    assert!(
        ix.add_page(&page("http://t/print", "Book", &book))
            .await
            .unwrap()
    );
    let mut dup = page("http://t/copy", "Copy", &usage);
    dup.duplicate_of = Some("http://t/usage".into());
    assert!(
        !ix.add_page(&dup).await.unwrap(),
        "a page copy is not indexed again"
    );
    let stats = ix.finish().await.unwrap();
    assert_eq!(stats.pages, 3);
    assert!(stats.aliases_exact + stats.aliases_near >= 3, "{stats:?}");
    assert!(
        stats.indexes_built.contains(&"text".to_string()),
        "{stats:?}"
    );

    let ids = column(ix.store(), "chunks", "id").await;
    assert_eq!(
        ids.len(),
        ids.iter().collect::<HashSet<_>>().len(),
        "chunk ids are unique"
    );
    let kraken = stored(ix.store(), "kraken step number 3 ").await;
    assert_eq!(kraken, 1, "the repeated chapter is stored once");

    // Full-text search finds the chapter on its own page, with the book page as an alias.
    let hits = search(ix.store(), None, "walrus", 3, Mode::Text)
        .await
        .unwrap();
    assert_eq!(hits[0].url, "http://t/install");
    assert_eq!(hits[0].heading_path, ["Windows"]);
    assert!(hits[0].text.contains("walrus"));
    assert_eq!(hits[0].also_at, ["http://t/print"]);
    let err = search(ix.store(), None, "walrus", 3, Mode::Vector)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--no-embed"), "{err}");

    // The install page changes: its old chunks go, and the book's copies of them (aliases
    // of chunks that no longer exist) become chunks of their own.
    let changed = format!("# Install\n\n## Linux\n\n{}", para("narwhal", 30));
    ix.add_page(&page("http://t/install", "Install", &changed))
        .await
        .unwrap();
    let stats = ix.finish().await.unwrap();
    assert_eq!(stats.pages_replaced, 1);
    let canon = column(ix.store(), "chunks", "canonical_url").await;
    let texts = column(ix.store(), "chunks", "text").await;
    for (c, t) in canon.iter().zip(&texts) {
        if c == "http://t/install" {
            assert!(
                !t.contains("kraken") && !t.contains("walrus"),
                "stale chunk: {t}"
            );
        }
    }
    let hits = search(ix.store(), None, "walrus", 3, Mode::Text)
        .await
        .unwrap();
    assert_eq!(
        hits[0].url, "http://t/print",
        "the book now holds the walrus chapter"
    );
    let hits = search(ix.store(), None, "narwhal", 3, Mode::Text)
        .await
        .unwrap();
    assert_eq!(hits[0].url, "http://t/install");
    let (rows, aliases) = ix.store().count().await.unwrap();
    drop(ix);

    // Reopened: indexing the same pages again replaces them; nothing is added twice.
    let mut ix = Indexer::open(opts(dir.path(), false)).await.unwrap();
    ix.add_page(&page("http://t/install", "Install", &changed))
        .await
        .unwrap();
    ix.add_page(&page("http://t/print", "Book", &book))
        .await
        .unwrap();
    ix.add_page(&page("http://t/usage", "Usage", &usage))
        .await
        .unwrap();
    let stats = ix.finish().await.unwrap();
    assert_eq!(stats.pages_replaced, 3);
    assert_eq!(ix.store().count().await.unwrap(), (rows, aliases));
    let ids = column(ix.store(), "chunks", "id").await;
    assert_eq!(ids.len(), ids.iter().collect::<HashSet<_>>().len());
    let alias_of = column(ix.store(), "aliases", "alias_of").await;
    let id_set: HashSet<_> = ids.iter().collect();
    assert!(
        alias_of.iter().all(|a| id_set.contains(a)),
        "every alias points at a stored chunk"
    );

    // An index made without vectors refuses a run with them, and says why.
    if let Some(_dir) = common::model_dir() {
        let e = Indexer::open(opts(dir.path(), true)).await.err().unwrap();
        assert!(e.to_string().contains("no vectors"), "{e}");
    }
}

#[tokio::test]
async fn vector_and_hybrid_search_and_python_reads_the_table() {
    let Some(_model) = common::model_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut ix = Indexer::open(opts(dir.path(), true)).await.unwrap();
    let pages = [
        (
            "http://t/cook",
            "Baking bread",
            "# Baking bread\n\nMix flour, water, salt and yeast. Knead the dough for ten minutes, let it rise for an hour, then bake it in a hot oven until the crust is brown.",
        ),
        (
            "http://t/git",
            "Undoing a commit",
            "# Undoing a commit\n\nUse git revert to make a new commit that undoes an earlier one, or git reset to move the branch back when the commit was never pushed.",
        ),
        (
            "http://t/bike",
            "Fixing a flat tyre",
            "# Fixing a flat tyre\n\nTake the wheel off, lever the tyre from the rim, find the hole in the inner tube and patch it, then pump it up again.",
        ),
    ];
    for (u, t, m) in pages {
        ix.add_page(&page(u, t, m)).await.unwrap();
    }
    ix.finish().await.unwrap();
    let e = ix.embedder().unwrap().clone();
    let hits = search(
        ix.store(),
        Some(&e),
        "how do I repair a puncture on my bicycle",
        3,
        Mode::Vector,
    )
    .await
    .unwrap();
    assert_eq!(hits[0].url, "http://t/bike");
    assert!(hits[0].score > hits[1].score);
    let hits = search(ix.store(), Some(&e), "revert a git commit", 2, Mode::Hybrid)
        .await
        .unwrap();
    assert_eq!(hits[0].url, "http://t/git");

    // Python's lancedb opens the same table and ranks the same chunk first.
    let q = e
        .embed(&["making a loaf of bread at home"], 1)
        .unwrap()
        .remove(0);
    let ours = search(
        ix.store(),
        Some(&e),
        "making a loaf of bread at home",
        1,
        Mode::Vector,
    )
    .await
    .unwrap();
    let script = r#"
import json, sys, lancedb
db = lancedb.connect(sys.argv[1])
t = db.open_table("chunks")
q = json.loads(sys.argv[2])
r = t.search(q).distance_type("cosine").limit(1).to_list()[0]
print(json.dumps({"id": r["id"], "url": r["url"], "rows": t.count_rows(), "dim": len(r["vector"])}))
"#;
    let py = std::process::Command::new("python3")
        .args([
            "-c",
            script,
            &dir.path().join("index").to_string_lossy(),
            &serde_json::to_string(&q).unwrap(),
        ])
        .output()
        .unwrap();
    if !py.status.success() {
        let err = String::from_utf8_lossy(&py.stderr);
        if err.contains("No module named 'lancedb'")
            && !std::env::var("TRAWL_REQUIRE_PY").is_ok_and(|v| v == "1")
        {
            eprintln!("SKIPPED: Python's lancedb is not installed");
            return;
        }
        panic!("python lancedb failed: {err}");
    }
    let got: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    assert_eq!(got["id"], ours[0].id.as_str());
    assert_eq!(got["url"], "http://t/cook");
    assert_eq!(got["rows"], 3);
    assert_eq!(got["dim"], 384);
}

/// A tmpfs of the test's own, unmounted when dropped; `None` where mounting is not allowed
/// (the test command runs as root, which may).
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk(dir))
    }

    /// Fills the disk, then frees `leave` bytes of it.
    fn fill_leaving(&self, leave: u64) {
        use std::io::Write;
        let path = self.0.path().join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).is_ok() {}
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(leave)).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// The stored chunk texts of one page, in table order.
async fn page_texts(store: &trawl_index::Store, url: &str) -> Vec<String> {
    let canon = column(store, "chunks", "canonical_url").await;
    let text = column(store, "chunks", "text").await;
    canon
        .into_iter()
        .zip(text)
        .filter(|(c, _)| c == url)
        .map(|(_, t)| t)
        .collect()
}

/// A page replaced on a disk that fills up: the write fails, and the page keeps every row
/// it had. Delete-then-add lost them: the small delete commit fitted, the add did not.
#[tokio::test]
async fn a_replace_that_fails_on_a_full_disk_keeps_the_old_rows() {
    let Some(disk) = SmallDisk::mount("16m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    };
    let mut ix = Indexer::open(opts(disk.0.path(), false)).await.unwrap();
    let url = "http://t/guide";
    let old = format!("# Guide\n\n{}", para("kraken", 60));
    ix.add_page(&page(url, "Guide", &old)).await.unwrap();
    ix.flush().await.unwrap();
    let before = page_texts(ix.store(), url).await;
    assert!(before.len() > 1, "{before:?}");

    disk.fill_leaving(24 << 10);
    let new = format!("# Guide\n\n{}", para("walrus", 3000));
    let written = match ix.add_page(&page(url, "Guide", &new)).await {
        Ok(_) => ix.flush().await,
        Err(e) => Err(e),
    };
    let e = written.expect_err("24 KiB cannot hold the new chunks");
    assert!(e.to_string().to_lowercase().contains("space"), "{e}");
    drop(ix);
    // Read back, not opened to write: a writer needs room for its state file, and the
    // disk is full.
    let reopened = trawl_index::Store::open_existing(&opts(disk.0.path(), false).uri)
        .await
        .unwrap();
    assert_eq!(
        page_texts(&reopened, url).await,
        before,
        "the page's rows are all there"
    );
}

/// A page that says `noindex`, or whose site reserves search or a use the index is for
/// (`purposes`), is left out; one that turns so takes its rows along.
#[tokio::test]
async fn pages_that_reserve_the_index_s_uses_are_left_out() {
    use trawl_core::policy::{Purpose, Signal, Source};
    let dir = tempfile::tempdir().unwrap();
    let reserve = |p: &mut PageRecord, purpose: Purpose| {
        p.usage
            .note(purpose, Signal::Reserved, Source::ContentSignal, None)
    };
    let mut o = opts(dir.path(), false);
    o.purposes = vec![Purpose::Search, Purpose::AiInput];
    let mut ix = Indexer::open(o).await.unwrap();
    let plain = page("http://t/plain", "Plain", &para("ibis", 10));
    let mut no_search = page("http://t/no-search", "NoSearch", &para("heron", 10));
    reserve(&mut no_search, Purpose::Search);
    let mut no_input = page("http://t/no-input", "NoInput", &para("egret", 10));
    reserve(&mut no_input, Purpose::AiInput);
    let mut no_train = page("http://t/no-train", "NoTrain", &para("stork", 10));
    reserve(&mut no_train, Purpose::AiTrain);
    let mut noindex = page("http://t/noindex", "NoIndex", &para("crane", 10));
    noindex.robots.noindex = Some(Source::XRobotsTag);
    for (p, kept) in [
        (&plain, true),
        (&no_search, false),
        (&no_input, false),
        (&no_train, true),
        (&noindex, false),
    ] {
        assert_eq!(ix.add_page(p).await.unwrap(), kept, "{}", p.url);
    }
    let stats = ix.finish().await.unwrap();
    assert_eq!((stats.pages, stats.pages_excluded), (2, 3), "{stats:?}");
    let canon: HashSet<String> = column(ix.store(), "chunks", "canonical_url")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        canon,
        HashSet::from([
            "http://t/plain".to_string(),
            "http://t/no-train".to_string()
        ])
    );
    // The plain page turns noindex: its rows go.
    let mut now_noindex = plain.clone();
    now_noindex.robots.noindex = Some(Source::MetaRobots);
    assert!(!ix.add_page(&now_noindex).await.unwrap());
    ix.finish().await.unwrap();
    let hits = search(ix.store(), None, "ibis", 3, Mode::Text)
        .await
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");
}

/// The whole book on one page indexed before its chapters: each chapter's text moves to
/// the chapter (it is more of it), the book keeping aliases; whether the book's chunks
/// were still pending or already stored, and across a reopening.
#[tokio::test]
async fn a_chunk_lives_on_the_page_it_is_most_of() {
    for flush_between in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let install = format!("# Install\n\n{}", para("kraken", 30));
        let usage = format!("# Usage\n\n{}", para("pelican", 30));
        let book = format!(
            "# Book\n\n{install}\n\n{usage}\n\n# Index\n\n{}",
            para("yak", 30)
        );
        let mut o = opts(dir.path(), false);
        o.flush_chunks = 10_000;
        let mut ix = Indexer::open(o.clone()).await.unwrap();
        ix.add_page(&page("http://t/print", "Book", &book))
            .await
            .unwrap();
        if flush_between {
            ix.finish().await.unwrap();
            drop(ix);
            ix = Indexer::open(o).await.unwrap();
        }
        ix.add_page(&page("http://t/install", "Install", &install))
            .await
            .unwrap();
        ix.add_page(&page("http://t/usage", "Usage", &usage))
            .await
            .unwrap();
        let stats = ix.finish().await.unwrap();
        assert!(stats.chunks_rehomed >= 2, "{stats:?}");
        for (word, home) in [
            ("kraken", "http://t/install"),
            ("pelican", "http://t/usage"),
        ] {
            let hits = search(ix.store(), None, word, 3, Mode::Text).await.unwrap();
            assert_eq!(hits[0].url, home, "{flush_between}: {hits:?}");
            assert_eq!(hits[0].also_at, ["http://t/print"], "{flush_between}");
        }
        let hits = search(ix.store(), None, "yak", 3, Mode::Text)
            .await
            .unwrap();
        assert_eq!(hits[0].url, "http://t/print", "the book's own part stays");
        assert_eq!(
            stored(ix.store(), "kraken step number 3 ").await,
            1,
            "stored once: {flush_between}"
        );
    }
}

/// A stored chunk's move to a better home is called off when that home goes before the
/// move is written (the text stays searchable where it was), and a page leaving with a
/// chunk on the move takes the move with it (its chunk ids, back with new text, stay
/// chunks of their own).
#[tokio::test]
async fn a_move_to_a_better_home_ends_with_either_page() {
    let install = format!("# Install\n\n{}", para("kraken", 30));
    let book = |first: &str| format!("# Book\n\n{first}\n\n# Index\n\n{}", para("yak", 30));
    let print = "http://t/print";
    for home_goes in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path(), false);
        o.flush_chunks = 10_000;
        let mut ix = Indexer::open(o.clone()).await.unwrap();
        ix.add_page(&page(print, "Book", &book(&install)))
            .await
            .unwrap();
        ix.finish().await.unwrap();
        // The chapter arrives: the book's install chunk is to move to it.
        ix.add_page(&page("http://t/install", "Install", &install))
            .await
            .unwrap();
        let walrus = format!("# Walrus\n\n{}", para("walrus", 30));
        if home_goes {
            assert!(ix.remove_page("http://t/install").unwrap());
        } else {
            // The book changes: its first chunk is about something else now.
            ix.add_page(&page(print, "Book", &book(&walrus)))
                .await
                .unwrap();
        }
        let stats = ix.finish().await.unwrap();
        let word = if home_goes { "kraken" } else { "walrus" };
        let hits = search(ix.store(), None, word, 3, Mode::Text).await.unwrap();
        assert_eq!(
            hits.first().map(|h| h.url.as_str()),
            Some(print),
            "{home_goes}: {hits:?}"
        );
        assert_eq!(stats.chunks_rehomed, 0, "{home_goes}: {stats:?}");
        let kraken = stored(ix.store(), "kraken step number 3 ").await;
        if home_goes {
            assert_eq!(kraken, 1, "stored once");
        } else {
            let walrus = stored(ix.store(), "walrus step number 3 ").await;
            assert_eq!(walrus, 1, "the book's new chunk");
            assert_eq!(kraken, 1, "the chapter's chunk");
            let hits = search(ix.store(), None, "kraken", 3, Mode::Text)
                .await
                .unwrap();
            assert_eq!(hits[0].url, "http://t/install", "{hits:?}");
            assert!(hits[0].also_at.is_empty(), "{hits:?}");
        }
        // The gate agrees with the table: the chapter's text indexed again joins what
        // is stored, it is not a second copy.
        drop(ix);
        let mut ix = Indexer::open(o).await.unwrap();
        ix.add_page(&page("http://t/again", "Install", &install))
            .await
            .unwrap();
        ix.finish().await.unwrap();
        assert_eq!(
            stored(ix.store(), "kraken step number 3 ").await,
            1,
            "{home_goes}: stored once after a third copy"
        );
    }
}

/// A table's earlier versions (one a flush, each listing every fragment) go when the
/// search indexes are brought up to date, once older than `keep_versions`; what is left
/// answers, and takes more pages.
#[tokio::test]
async fn earlier_versions_go_once_older_than_kept() {
    let manifests = |dir: &std::path::Path| {
        std::fs::read_dir(dir.join("index/chunks.lance/_versions"))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().ends_with(".manifest")
            })
            .count()
    };
    for keep in [Duration::ZERO, Duration::from_secs(3600)] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path(), false);
        o.keep_versions = keep;
        o.dedup_distance = None;
        let mut ix = Indexer::open(o.clone()).await.unwrap();
        for i in 0..30 {
            let md = format!("# Page {i}\n\n{}", para(&format!("topic{i}zq"), 4));
            ix.add_page(&page(&format!("http://t/p{i}"), "P", &md))
                .await
                .unwrap();
        }
        let stats = ix.finish().await.unwrap();
        let left = manifests(dir.path());
        if keep.is_zero() {
            assert!(left <= 2, "{left} versions left");
            assert!(stats.bytes_pruned > 0, "{stats:?}");
        } else {
            assert!(left >= 5, "{left} versions: the young ones stay");
            assert_eq!(stats.bytes_pruned, 0, "{stats:?}");
        }
        drop(ix);
        let mut ix = Indexer::open(o).await.unwrap();
        let md = format!("# Page 3\n\n{}", para("replacedzq", 4));
        ix.add_page(&page("http://t/p3", "P", &md)).await.unwrap();
        ix.finish().await.unwrap();
        for (word, url) in [("topic7zq", "http://t/p7"), ("replacedzq", "http://t/p3")] {
            let hits = search(ix.store(), None, word, 3, Mode::Text).await.unwrap();
            assert_eq!(hits.first().map(|h| h.url.as_str()), Some(url), "{keep:?}");
        }
    }
}

/// The search indexes take new chunks as they are written, a segment's worth at a time,
/// and not in one build at the end: every chunk is covered once the run finishes, in more
/// than one segment, and a page replaced in a later run is found by its new text only.
#[tokio::test]
async fn the_text_index_grows_in_segments_as_chunks_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path(), false);
    o.segment_rows = 12;
    // Pages alike but for one word: none may become an alias of another.
    o.dedup_distance = None;
    let topic = |i: usize| format!("topic{i}zq");
    let url = |i: usize| format!("http://t/p{i}");
    let mut ix = Indexer::open(o.clone()).await.unwrap();
    for i in 0..40 {
        let md = format!("# Page {i}\n\n{}", para(&topic(i), 4));
        ix.add_page(&page(&url(i), "P", &md)).await.unwrap();
    }
    let stats = ix.finish().await.unwrap();
    assert!(stats.chunks >= 40, "{stats:?}");
    assert!(
        stats.indexes_built.contains(&"text".to_string()),
        "{stats:?}"
    );
    let table = ix.store().chunks();
    let indices = table.list_indices().await.unwrap();
    let name = &indices
        .iter()
        .find(|i| i.columns == ["text"])
        .expect("a full-text index")
        .name;
    let s = table.index_stats(name).await.unwrap().unwrap();
    assert_eq!(s.num_unindexed_rows, 0, "{s:?}");
    assert_eq!(s.num_indexed_rows as u64, stats.chunks, "{s:?}");
    assert!(s.num_indices.unwrap_or(1) > 1, "one segment only: {s:?}");
    for i in [0, 17, 39] {
        let hits = search(ix.store(), None, &topic(i), 3, Mode::Text)
            .await
            .unwrap();
        assert_eq!(hits.first().map(|h| h.url.clone()), Some(url(i)), "{i}");
    }
    drop(ix);

    let mut ix = Indexer::open(o).await.unwrap();
    let md = format!("# Page 5\n\n{}", para("replacedzq", 4));
    ix.add_page(&page(&url(5), "P", &md)).await.unwrap();
    let again = ix.finish().await.unwrap();
    assert_eq!(again.pages_replaced, 1, "{again:?}");
    let hits = search(ix.store(), None, "replacedzq", 3, Mode::Text)
        .await
        .unwrap();
    assert_eq!(hits.first().map(|h| h.url.clone()), Some(url(5)));
    let old = search(ix.store(), None, &topic(5), 3, Mode::Text)
        .await
        .unwrap();
    assert!(
        old.iter().all(|h| h.url != url(5)),
        "the replaced text is gone: {old:?}"
    );
    let s = ix
        .store()
        .chunks()
        .index_stats(name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.num_unindexed_rows, 0, "{s:?}");
}

/// The state beside the index is taken as it is only after a writer finished: one dropped
/// mid-run (as a killed process is) leaves rows the next writer must still know, and it
/// fills its state again from the tables.
#[tokio::test]
async fn a_writer_that_did_not_finish_leaves_a_state_that_is_filled_again() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(dir.path(), false);
    let url = "http://t/guide";
    let mut ix = Indexer::open(o.clone()).await.unwrap();
    let first = format!("# Guide\n\n{}", para("kraken", 60));
    ix.add_page(&page(url, "Guide", &first)).await.unwrap();
    ix.finish().await.unwrap();
    drop(ix);

    // Finished: the next writer knows the page without reading the tables.
    let mut ix = Indexer::open(o.clone()).await.unwrap();
    let second = format!("# Guide\n\n{}", para("walrus", 60));
    ix.add_page(&page(url, "Guide", &second)).await.unwrap();
    assert_eq!(ix.stats().pages_replaced, 1);
    ix.flush().await.unwrap();
    drop(ix); // no finish

    let mut ix = Indexer::open(o).await.unwrap();
    let third = format!("# Guide\n\n{}", para("pelican", 20));
    ix.add_page(&page(url, "Guide", &third)).await.unwrap();
    assert_eq!(ix.stats().pages_replaced, 1, "the page is known");
    ix.finish().await.unwrap();
    let texts = page_texts(ix.store(), url).await;
    assert!(!texts.is_empty());
    assert!(
        texts
            .iter()
            .all(|t| t.contains("pelican") && !t.contains("walrus") && !t.contains("kraken")),
        "only the last text is stored: {texts:?}"
    );
}

//! Corpus building end to end: a crawl's own WARC files ingested back give the crawl's pages;
//! Common Crawl's WET text and language reach the export unchanged; Parquet is readable by
//! pyarrow.

use std::path::Path;

use serde_json::Value;
use support::{options, pages, python_has};
use trawl::corpus::{ExportArgs, ExportFormat, FilterName, IngestArgs, RulesArg};
use trawl_testsite::{SiteConfig, TestSite};

fn shared(rel: &str) -> Option<std::path::PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared")
        .join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: {} is not here (the shared sample archives)",
            p.display()
        );
        None
    }
}

fn ingest_args(inputs: Vec<String>, out: &Path) -> IngestArgs {
    IngestArgs {
        inputs,
        out: out.to_path_buf(),
        threads: Some(2),
        dedup_method: trawl_core::settings::DedupMethod::Minhash,
        dedup_distance: 2,
        dedup_similarity: 0.8,
        no_dedup: false,
        gate_in_memory: Some(200_000),
        boilerplate_min_pages: 5,
    }
}

fn export_args(
    from: &Path,
    out: &Path,
    format: ExportFormat,
    filters: Vec<FilterName>,
) -> ExportArgs {
    ExportArgs {
        from: from.to_path_buf(),
        format,
        out: out.to_path_buf(),
        lang: Vec::new(),
        min_lang_score: 0.0,
        filters,
        min_words: None,
        quality_config: None,
        quality_rules: None,
        minhash_threshold: 0.8,
        no_minhash: false,
        keep_duplicates: false,
        include_reserved: false,
        paragraph_dedup: false,
        chunks: None,
        index: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawls_warc_ingested_gives_back_its_pages() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let crawl = tempfile::tempdir().unwrap();
    let (_, outputs) = trawl::crawl(options(&[site.url("/")], crawl.path()))
        .await
        .unwrap();
    let ingest = tempfile::tempdir().unwrap();
    let inputs = outputs
        .warc_files
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let report = trawl::corpus::ingest(&ingest_args(inputs, ingest.path()))
        .await
        .unwrap();
    assert_eq!(report.malformed, 0);
    // Every HTML page the crawl extracted comes back with the same text and title.
    let crawled: Vec<Value> = pages(crawl.path())
        .into_iter()
        .filter(|p| {
            p["status"] == 200 && p["kind"] == "page" && !p["text"].as_str().unwrap().is_empty()
        })
        .collect();
    assert!(crawled.len() >= 5, "{}", crawled.len());
    let ingested = pages(ingest.path());
    for c in &crawled {
        let i = ingested
            .iter()
            .find(|i| i["url"] == c["final_url"])
            .unwrap_or_else(|| panic!("{} not ingested", c["final_url"]));
        assert_eq!(i["text"], c["text"], "{}", c["url"]);
        assert_eq!(i["title"], c["title"]);
        assert!(
            i["source"]["record_id"]
                .as_str()
                .unwrap()
                .starts_with("<urn:uuid:")
        );
        assert_eq!(i["source"]["record_type"], "response");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wet_text_and_language_reach_the_export_unchanged() {
    let (Some(wet), Some(warc)) = (
        shared("data/warc/commoncrawl/whirlwind.warc.wet.gz"),
        shared("data/warc/commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz"),
    ) else {
        return;
    };
    // The WET record as the archive holds it.
    let rec = trawl_corpus::archive::read_all(&wet)
        .unwrap()
        .into_iter()
        .find_map(|i| match i {
            trawl_corpus::archive::Item::Record(r) if r.kind == "conversion" => Some(r),
            _ => None,
        })
        .unwrap();
    let wet_text = String::from_utf8(rec.body.clone()).unwrap();
    assert_eq!(rec.language.as_deref(), Some("spa"));

    let dir = tempfile::tempdir().unwrap();
    let report = trawl::corpus::ingest(&ingest_args(
        vec![wet.display().to_string(), warc.display().to_string()],
        dir.path(),
    ))
    .await
    .unwrap();
    assert_eq!(report.records["conversion"], 1);
    assert_eq!(report.records["response"], 16);

    // No filters: every readable document out, the WET one as the archive gave it.
    let out = dir.path().join("corpus.jsonl");
    trawl::corpus::export(&export_args(
        dir.path(),
        &out,
        ExportFormat::Jsonl,
        vec![FilterName::None],
    ))
    .await
    .unwrap();
    let rows: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let w = rows
        .iter()
        .find(|r| {
            r["source"]
                .as_str()
                .unwrap()
                .ends_with("whirlwind.warc.wet.gz")
        })
        .unwrap();
    assert_eq!(w["text"].as_str().unwrap(), wet_text.trim());
    assert_eq!(w["language"], "spa");
    assert_eq!(w["language_score"], 1.0);
    assert_eq!(w["source_record_id"].as_str(), rec.record_id.as_deref());
    assert_eq!(w["date"].as_str(), rec.date.as_deref());
    assert_eq!(w["url"].as_str(), rec.target_uri.as_deref());
    // The rest got a language from whatlang.
    assert!(rows.iter().filter(|r| r["language"].is_string()).count() >= rows.len() - 2);

    // The dataset report accounts for every document.
    let rep: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("corpus.jsonl.report.json")).unwrap(),
    )
    .unwrap();
    let dropped: u64 = rep["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        rep["documents_in"].as_u64().unwrap(),
        rep["documents_out"].as_u64().unwrap() + dropped
    );
    assert_eq!(rep["documents_out"].as_u64().unwrap(), rows.len() as u64);
    assert!(
        std::fs::read_to_string(dir.path().join("corpus.jsonl.report.md"))
            .unwrap()
            .contains("| spa |")
    );

    // With the filters on, Parquet that pyarrow reads back.
    let pq = dir.path().join("corpus.parquet");
    trawl::corpus::export(&export_args(
        dir.path(),
        &pq,
        ExportFormat::Parquet,
        vec![FilterName::All],
    ))
    .await
    .unwrap();
    let rep: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("corpus.parquet.report.json")).unwrap(),
    )
    .unwrap();
    assert!(
        rep["dropped"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("gopher"))
    );
    if python_has("pyarrow") {
        let script = "import sys, json, pyarrow.parquet as pq\n\
             t = pq.read_table(sys.argv[1])\n\
             print(json.dumps({'rows': t.num_rows, 'cols': t.schema.names, \
             'quality': [json.loads(q) for q in t.column('quality').to_pylist()]}))";
        let o = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&pq)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["rows"], rep["documents_out"]);
        for col in [
            "id",
            "url",
            "title",
            "text",
            "markdown",
            "language",
            "language_score",
            "date",
            "source",
            "source_record_id",
            "simhash",
            "quality",
        ] {
            assert!(
                v["cols"].as_array().unwrap().iter().any(|c| c == col),
                "{col}"
            );
        }
        for q in v["quality"].as_array().unwrap() {
            assert!(q["gopher_words"].as_f64().unwrap() >= 50.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilingual_archive_exported_with_defaults_keeps_its_good_non_english_pages() {
    let (Some(warc), Some(wet)) = (
        shared("data/warc/commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz"),
        shared("data/warc/commoncrawl/whirlwind.warc.wet.gz"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    trawl::corpus::ingest(&ingest_args(
        vec![warc.display().to_string(), wet.display().to_string()],
        dir.path(),
    ))
    .await
    .unwrap();
    let report = async |name: &str, rules: Option<RulesArg>| {
        let out = dir.path().join(name);
        let mut a = export_args(dir.path(), &out, ExportFormat::Jsonl, vec![FilterName::All]);
        a.quality_rules = rules;
        trawl::corpus::export(&a).await.unwrap();
        let rep: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("{name}.report.json"))).unwrap(),
        )
        .unwrap();
        let rows = std::fs::read_to_string(&out).unwrap().lines().count() as u64;
        assert_eq!(rep["documents_out"].as_u64().unwrap(), rows);
        rep
    };
    // English rules on every page (the old default): the English stop words and the
    // alphabetic-word ratio reject the Chinese, German, Dutch, Russian and Spanish pages.
    let english = report("english.jsonl", Some(RulesArg::English)).await;
    let non_english_in: u64 = english["languages_in"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "eng")
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    assert!(non_english_in >= 10, "{english}");
    let kept_non_english = |rep: &Value| -> u64 {
        rep["languages_out"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "eng")
            .map(|(_, v)| v.as_u64().unwrap())
            .sum()
    };
    assert_eq!(kept_non_english(&english), 0, "{english}");
    assert!(english["not_applied"].as_object().unwrap().is_empty());

    // The default: each language's own settings. The Dutch and the Russian business pages
    // (real prose) are kept; pages of navigation and broken encodings are still dropped.
    let rep = report("default.jsonl", None).await;
    assert_eq!(rep["rules"], "per_language");
    assert!(rep["rules_source"].as_str().unwrap().contains("FineWeb 2"));
    assert_eq!(rep["languages_out"]["nld"], 1, "{rep}");
    assert_eq!(rep["languages_out"]["rus"], 1, "{rep}");
    assert!(kept_non_english(&rep) >= 3, "{rep}");
    assert!(kept_non_english(&rep) < non_english_in, "{rep}");
    assert!(rep["dropped"]["gopher_quality:gopher_below_alpha_threshold"].as_u64() > Some(0));
    // C4 is for English: the report says it did not run on the others.
    let chinese = rep["languages_in"]["cmn"].as_u64().unwrap();
    assert!(chinese >= 5, "{rep}");
    assert_eq!(
        rep["not_applied"]["c4"]["cmn"].as_u64(),
        Some(chinese),
        "{rep}"
    );
    assert_eq!(rep["languages_in"]["eng"].as_u64(), Some(1), "{rep}");
    assert!(rep["not_applied"]["c4"].get("eng").is_none(), "{rep}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_by_url_language_selection_and_a_quality_config() {
    let Some(dir) = shared("data/warc/commoncrawl") else {
        return;
    };
    let site = TestSite::start(SiteConfig {
        dir: Some(dir),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let report = trawl::corpus::ingest(&ingest_args(
        vec![
            site.url("/whirlwind.warc.wet.gz"),
            site.url("/CC-MAIN-2020-34-excerpt.warc.gz"),
        ],
        out.path(),
    ))
    .await
    .unwrap();
    assert_eq!(report.files, 2);
    assert_eq!(report.records["conversion"], 1);
    assert_eq!(report.documents, 17);

    // Only Spanish, no quality filters.
    let spa = out.path().join("spa.jsonl");
    let mut a = export_args(
        out.path(),
        &spa,
        ExportFormat::Jsonl,
        vec![FilterName::None],
    );
    a.lang = vec!["spa".into()];
    trawl::corpus::export(&a).await.unwrap();
    let rows: Vec<Value> = std::fs::read_to_string(&spa)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["language"] == "spa"));

    // Thresholds from a file: a Gopher filter that wants 10,000 words drops everything, with
    // its reason in the report.
    let cfg = out.path().join("quality.json");
    std::fs::write(&cfg, r#"{"gopher_quality": {"min_doc_words": 10000}}"#).unwrap();
    let strict = out.path().join("strict.jsonl");
    let mut a = export_args(
        out.path(),
        &strict,
        ExportFormat::Jsonl,
        vec![FilterName::All],
    );
    a.quality_config = Some(cfg.clone());
    a.no_minhash = true;
    trawl::corpus::export(&a).await.unwrap();
    let rep: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("strict.jsonl.report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rep["documents_out"], 0);
    assert!(
        rep["dropped"]["gopher_quality:gopher_short_doc"]
            .as_u64()
            .unwrap()
            > 0
    );
    // A misspelt setting is an error, not a silent default.
    std::fs::write(&cfg, r#"{"gopher_quality": {"min_words": 10}}"#).unwrap();
    let err = trawl::corpus::export(&a).await.unwrap_err();
    assert!(format!("{err:#}").contains("unknown field"), "{err:#}");
}

/// What the Python side reads of the datasets: pyarrow for the schema and the vectors (the
/// index's own, through LanceDB's Python client), Hugging Face `datasets` for loading.
const READ_DATASETS: &str = r#"
import csv, json, sys
import pyarrow.parquet as pq, lancedb, datasets
pages_pq, pages_csv, chunks_pq, all_pq, index, cache = sys.argv[1:7]
pages = pq.read_table(pages_pq)
chunks = pq.read_table(chunks_pq)
every = pq.read_table(all_pq)
stored = lancedb.connect(index).open_table("chunks").to_arrow()
vectors = dict(zip(stored.column("id").to_pylist(), stored.column("vector").to_pylist()))
stored_urls = stored.column("url").to_pylist()
emb = chunks.schema.field("embedding").type
rows = chunks.to_pylist()
page_ids = dict(zip(pages.column("url").to_pylist(), pages.column("id").to_pylist()))
with open(pages_csv, newline="") as f:
    table = list(csv.DictReader(f))
load = lambda kind, path: datasets.load_dataset(kind, data_files=path, split="train", cache_dir=cache)
d_chunks = load("parquet", chunks_pq)
print(json.dumps({
    "embedding_type": str(emb),
    "chunk_columns": chunks.schema.names,
    "chunks": chunks.num_rows,
    "row_groups": pq.ParquetFile(chunks_pq).metadata.num_row_groups,
    "vectors_equal": all(r["embedding"] == vectors[r["id"]] for r in rows),
    "vectors_checked": sum(1 for r in rows if r["id"] in vectors),
    "stored_chunks_of_kept_pages": sum(1 for u in stored_urls if u in page_ids),
    "page_ids_match": all(page_ids.get(r["url"]) == r["page_id"] for r in rows),
    "with_record_id": sum(1 for r in rows if r["source_record_id"]),
    "sources": sorted({r["source"].rsplit("/", 1)[-1] for r in rows}),
    "languages": sorted({r["language"] for r in rows if r["language"]}),
    "token_counts_positive": all(r["token_count"] > 0 for r in rows),
    "every_chunk": every.num_rows,
    "stored": stored.num_rows,
    "every_vectors_equal": all(r["embedding"] == vectors[r["id"]] for r in every.to_pylist()),
    "pages": pages.num_rows,
    "page_columns": pages.schema.names,
    "csv_rows": len(table),
    "csv_columns": list(table[0].keys()) if table else [],
    "csv_urls_match": [r["url"] for r in table] == pages.column("url").to_pylist(),
    "csv_longest_preview": max((len(r["preview"]) for r in table), default=0),
    "previews_start_texts": all(" ".join(t.split()).startswith(p) for t, p in zip(pages.column("text").to_pylist(), pages.column("preview").to_pylist())),
    "hf_chunks": d_chunks.num_rows,
    "hf_embedding_length": d_chunks.features["embedding"].length,
    "hf_pages": load("parquet", pages_pq).num_rows,
    "hf_csv": load("csv", pages_csv).num_rows,
    "hf_first_vector_equal": d_chunks[0]["embedding"] == vectors[d_chunks[0]["id"]] if d_chunks.num_rows else True,
}))
"#;

/// The datasets a user opens: an ingest of the Common Crawl sample, indexed with embeddings,
/// exported with the defaults to pages (Parquet, CSV) and the kept pages' chunks (Parquet,
/// the vectors as a fixed-size list), and the whole index's chunks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_ingest_exports_datasets_that_pyarrow_and_hugging_face_datasets_open() {
    let (Some(warc), Some(wet)) = (
        shared("data/warc/commoncrawl/CC-MAIN-2020-34-excerpt.warc.gz"),
        shared("data/warc/commoncrawl/whirlwind.warc.wet.gz"),
    ) else {
        return;
    };
    let Some(model) = support::embedding_model() else {
        return;
    };
    if !python_has("datasets") || !python_has("lancedb") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    trawl::corpus::ingest(&ingest_args(
        vec![warc.display().to_string(), wet.display().to_string()],
        out,
    ))
    .await
    .unwrap();
    let index = out.join("index");
    trawl::index::index_pages(&trawl::index::IndexCmdArgs {
        inputs: vec![out.join("pages.jsonl").display().to_string()],
        index_dir: index.clone(),
        index: trawl::index::IndexArgs {
            embed: true,
            model_dir: Some(model),
            embed_precision: "auto".into(),
            index: trawl_core::settings::IndexSettings::default(),
        },
    })
    .await
    .unwrap();

    let pages_pq = out.join("sets/pages.parquet");
    let chunks_pq = out.join("sets/chunks.parquet");
    let mut a = export_args(out, &pages_pq, ExportFormat::Parquet, vec![FilterName::All]);
    a.chunks = Some(chunks_pq.clone());
    trawl::corpus::export(&a).await.unwrap();
    let pages_csv = out.join("sets/pages.csv");
    let a = export_args(out, &pages_csv, ExportFormat::Csv, vec![FilterName::All]);
    trawl::corpus::export(&a).await.unwrap();
    // The index itself as FROM: every chunk.
    let all_pq = out.join("sets/all-chunks.parquet");
    let a = export_args(
        &index,
        &all_pq,
        ExportFormat::Parquet,
        vec![FilterName::All],
    );
    trawl::corpus::export(&a).await.unwrap();
    // An index as FROM takes no page format.
    let a = export_args(&index, &pages_csv, ExportFormat::Csv, vec![FilterName::All]);
    assert!(trawl::corpus::export(&a).await.is_err());

    let rep: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("sets/pages.parquet.report.json")).unwrap(),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let o = std::process::Command::new("python3")
        .args(["-c", READ_DATASETS])
        .args([&pages_pq, &pages_csv, &chunks_pq, &all_pq, &index])
        .arg(cache.path())
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_DATASETS_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    eprintln!("{v:#}");

    // Pages: as many as the export kept, in Parquet, in CSV and through `datasets`.
    let kept = rep["documents_out"].as_u64().unwrap();
    assert!(kept >= 3, "{rep}");
    assert_eq!(v["pages"], kept);
    assert_eq!(v["csv_rows"], kept);
    assert_eq!(v["hf_pages"], kept);
    assert_eq!(v["hf_csv"], kept);
    assert_eq!(v["csv_urls_match"], true);
    assert_eq!(v["previews_start_texts"], true);
    let longest = v["csv_longest_preview"].as_u64().unwrap();
    assert!(longest > 0 && longest <= trawl_corpus::sink::PREVIEW_CHARS as u64);
    for col in [
        "preview",
        "token_count",
        "text",
        "language",
        "source_record_id",
    ] {
        assert!(
            v["page_columns"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == col),
            "{col}"
        );
    }
    for col in ["preview", "token_count", "quality", "url"] {
        assert!(
            v["csv_columns"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == col),
            "{col}"
        );
    }
    assert!(
        !v["csv_columns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "text")
    );

    // Chunks: every stored chunk of a kept page, its vector the index's, bit for bit.
    let ty = v["embedding_type"].as_str().unwrap();
    assert!(
        ty.starts_with("fixed_size_list<") && ty.ends_with(": float>[384]"),
        "{ty}"
    );
    let chunks = v["chunks"].as_u64().unwrap();
    assert!(chunks >= kept, "{v}");
    assert_eq!(v["stored_chunks_of_kept_pages"], chunks);
    assert_eq!(v["vectors_checked"], chunks);
    assert_eq!(v["vectors_equal"], true);
    assert_eq!(v["page_ids_match"], true);
    assert_eq!(v["with_record_id"], chunks);
    assert_eq!(v["token_counts_positive"], true);
    assert!(!v["languages"].as_array().unwrap().is_empty());
    for s in v["sources"].as_array().unwrap() {
        let s = s.as_str().unwrap();
        assert!(s.ends_with(".warc.gz") || s.ends_with(".wet.gz"), "{s}");
    }
    for col in [
        "id",
        "page_id",
        "url",
        "title",
        "heading_path",
        "position",
        "token_count",
        "language",
        "source",
        "source_record_id",
        "text",
        "embedding",
    ] {
        assert!(
            v["chunk_columns"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == col),
            "{col}"
        );
    }
    assert_eq!(v["hf_chunks"], chunks);
    assert_eq!(v["hf_embedding_length"], 384);
    assert_eq!(v["hf_first_vector_equal"], true);
    assert_eq!(rep["chunks"]["chunks"], chunks);
    assert_eq!(
        rep["chunks"]["chunks_skipped"].as_u64().unwrap() + chunks,
        v["stored"].as_u64().unwrap()
    );
    // The whole index.
    assert_eq!(v["every_chunk"], v["stored"]);
    assert_eq!(v["every_vectors_equal"], true);
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `--paragraph-dedup` on a crawl whose pages repeat lines (the chain pages' sentence
/// differs only in its number): each normalized line is left in one document, the first;
/// what a document lost is exactly the lines kept before it, and it says how many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paragraph_dedup_leaves_each_line_in_the_first_document_that_has_it() {
    use trawl_corpus::paragraphs::normalize;
    let site = TestSite::start(SiteConfig {
        pages: 20,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let crawl = tempfile::tempdir().unwrap();
    trawl::crawl(options(&[site.url("/"), site.url("/page/1")], crawl.path()))
        .await
        .unwrap();
    let export = async |name: &str, dedup: bool| {
        let out = crawl.path().join(name);
        let mut a = export_args(
            crawl.path(),
            &out,
            ExportFormat::Jsonl,
            vec![FilterName::None],
        );
        a.no_minhash = true;
        a.paragraph_dedup = dedup;
        trawl::corpus::export(&a).await.unwrap();
        let rep: Value = serde_json::from_str(
            &std::fs::read_to_string(crawl.path().join(format!("{name}.report.json"))).unwrap(),
        )
        .unwrap();
        (jsonl(&out), rep)
    };
    let (whole, _) = export("whole.jsonl", false).await;
    let (deduped, rep) = export("deduped.jsonl", true).await;
    assert!(whole.len() >= 10, "{}", whole.len());
    let lines = |t: &str| -> Vec<String> {
        t.split('\n')
            .map(normalize)
            .filter(|l| !l.is_empty())
            .collect()
    };
    let mut kept = std::collections::HashSet::new();
    let mut removed_total = 0;
    let mut emptied = 0;
    let mut d = deduped.iter().peekable();
    for w in &whole {
        let before = lines(w["text"].as_str().unwrap());
        let Some(row) = d.next_if(|r| r["id"] == w["id"]) else {
            // Dropped: every line was kept before.
            assert!(before.iter().all(|l| kept.contains(l)), "{}", w["url"]);
            emptied += 1;
            removed_total += before.len() as u64;
            continue;
        };
        let after = lines(row["text"].as_str().unwrap());
        // What went is exactly what an earlier document (or an earlier line) had.
        let mut seen_here = std::collections::HashSet::new();
        let mut expected = Vec::new();
        for l in &before {
            if !kept.contains(l) && seen_here.insert(l.clone()) {
                expected.push(l.clone());
            }
        }
        assert_eq!(after, expected, "{}", w["url"]);
        assert_eq!(
            row["paragraphs_removed"].as_u64().unwrap(),
            (before.len() - after.len()) as u64,
            "{}",
            w["url"]
        );
        removed_total += (before.len() - after.len()) as u64;
        kept.extend(after);
    }
    assert!(d.next().is_none());
    let p = &rep["paragraphs"];
    assert!(p["lines_removed"].as_u64().unwrap() >= 5, "{rep}");
    assert_eq!(p["lines_removed"], removed_total);
    assert_eq!(p["documents_emptied"], emptied);
    assert_eq!(
        rep["dropped"]["dedup:paragraphs"].as_u64().unwrap_or(0),
        emptied
    );
    assert_eq!(p["distinct_lines"], kept.len() as u64);
}

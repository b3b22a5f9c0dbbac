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
        dedup_distance: 2,
        no_dedup: false,
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
    let report = |name: &str, rules: Option<RulesArg>| {
        let out = dir.path().join(name);
        let mut a = export_args(dir.path(), &out, ExportFormat::Jsonl, vec![FilterName::All]);
        a.quality_rules = rules;
        trawl::corpus::export(&a).unwrap();
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
    let english = report("english.jsonl", Some(RulesArg::English));
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
    let rep = report("default.jsonl", None);
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
    trawl::corpus::export(&a).unwrap();
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
    trawl::corpus::export(&a).unwrap();
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
    let err = trawl::corpus::export(&a).unwrap_err();
    assert!(format!("{err:#}").contains("unknown field"), "{err:#}");
}

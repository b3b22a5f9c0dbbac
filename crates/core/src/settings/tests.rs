use std::collections::HashMap;

use super::*;

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

#[test]
fn field_names_are_unique_across_sections() {
    let v = serde_json::to_value(Settings::default()).unwrap();
    let mut seen = HashMap::new();
    for (section, fields) in v.as_object().unwrap() {
        for field in fields.as_object().unwrap().keys() {
            if let Some(other) = seen.insert(field.clone(), section.clone()) {
                panic!("{field} is in both {other} and {section}: one environment variable each");
            }
        }
    }
    assert_eq!(flat_keys().len(), seen.len());
}

#[test]
fn defaults_without_layers() {
    let s = Settings::load_with(None, env(&[])).unwrap();
    assert_eq!(s, Settings::default());
    assert_eq!(s.cluster.ack_wait_s, 30);
    assert_eq!(s.crawl.delay_ms, 500);
}

#[test]
fn environment_over_defaults_typed_by_field() {
    let s = Settings::load_with(
        None,
        env(&[
            ("TRAWL_CRAWL", "42"),
            ("TRAWL_DELAY_MS", "0"),
            ("TRAWL_EMBED", "off"),
            ("TRAWL_STRIP_PARAM", "ignored"),
            ("TRAWL_STRIP_PARAMS", "ref, utm_*"),
            ("TRAWL_NATS_PASSWORD", "12345"),
            ("TRAWL_SCOPE", "domain"),
            ("TRAWL_INDEX_URI", "/tmp/ix"),
            ("TRAWL_LOG", "debug"),
        ]),
    )
    .unwrap();
    assert_eq!(s.process.crawl, "42");
    assert_eq!(s.crawl.delay_ms, 0);
    assert!(!s.process.embed);
    assert_eq!(s.crawl.strip_params, ["ref", "utm_*"]);
    assert_eq!(s.cluster.nats_password.as_deref(), Some("12345"));
    assert_eq!(s.crawl.scope, ScopeKind::Domain);
    assert_eq!(s.process.index_uri.as_deref(), Some("/tmp/ix"));
}

#[test]
fn bad_environment_values_name_the_variable() {
    let e = Settings::load_with(None, env(&[("TRAWL_CONCURRENCY", "many")])).unwrap_err();
    assert!(e.to_string().contains("TRAWL_CONCURRENCY"), "{e}");
    let e = Settings::load_with(None, env(&[("TRAWL_EMBED", "maybe")])).unwrap_err();
    assert!(e.to_string().contains("TRAWL_EMBED"), "{e}");
    let e = Settings::load_with(None, env(&[("TRAWL_SCOPE", "planet")])).unwrap_err();
    assert!(e.to_string().contains("planet"), "{e}");
    let e = Settings::load_with(None, env(&[("TRAWL_CONCURRENCY", "0")])).unwrap_err();
    assert!(e.to_string().contains("concurrency"), "{e}");
    let e = Settings::load_with(None, env(&[("TRAWL_MAX_PAGES", "-1")])).unwrap_err();
    assert!(e.to_string().contains("TRAWL_MAX_PAGES"), "{e}");
}

#[test]
fn strings_are_taken_as_given_numbers_trimmed() {
    let s = Settings::load_with(
        None,
        env(&[
            ("TRAWL_NATS_PASSWORD", " two words "),
            ("TRAWL_DELAY_MS", " 7 "),
        ]),
    )
    .unwrap();
    assert_eq!(s.cluster.nats_password.as_deref(), Some(" two words "));
    assert_eq!(s.crawl.delay_ms, 7);
}

#[test]
fn file_flat_or_sectioned_then_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trawl.json");
    std::fs::write(
        &path,
        r#"{"crawl": "docs", "delay_ms": 5, "index": {"chunk_tokens": 128},
            "cluster": {"redis_url": "redis://127.0.0.2:6379"}, "concurrency": 3}"#,
    )
    .unwrap();
    let p = path.to_string_lossy().to_string();
    let s = Settings::load_with(
        None,
        env(&[("TRAWL_CONFIG", &p), ("TRAWL_CONCURRENCY", "4")]),
    )
    .unwrap();
    assert_eq!(s.process.crawl, "docs");
    assert_eq!(s.crawl.delay_ms, 5);
    assert_eq!(s.index.chunk_tokens, 128);
    assert_eq!(s.cluster.redis_url, "redis://127.0.0.2:6379");
    assert_eq!(
        s.process.concurrency, 4,
        "the environment wins over the file"
    );

    // The services' former name of `out`.
    std::fs::write(&path, r#"{"out_dir": "/data"}"#).unwrap();
    let s = Settings::load_with(Some(&path), env(&[])).unwrap();
    assert_eq!(s.process.out, std::path::PathBuf::from("/data"));

    std::fs::write(&path, r#"{"dealy_ms": 5}"#).unwrap();
    let e = Settings::load_with(Some(&path), env(&[])).unwrap_err();
    assert!(e.to_string().contains("dealy_ms"), "{e}");
    std::fs::write(&path, r#"{"crawl": {"nope": 1}}"#).unwrap();
    let e = Settings::load_with(Some(&path), env(&[])).unwrap_err();
    assert!(e.to_string().contains("crawl.nope"), "{e}");
    std::fs::write(&path, "not json").unwrap();
    assert!(Settings::load_with(Some(&path), env(&[])).is_err());
}

#[test]
fn flat_strings_round_trip_every_field() {
    let s = Settings {
        crawl: CrawlSettings {
            strip_params: vec!["a".into(), "b".into()],
            user_agent: Some("Bot/1".into()),
            ..CrawlSettings::default()
        },
        ..Settings::default()
    };
    let flat = s.flat();
    assert_eq!(flat["strip_params"], ["a", "b"]);
    assert_eq!(flat["delay_ms"], ["500"]);
    assert_eq!(flat["warc"], ["true"]);
    assert_eq!(flat["scope"], ["host"]);
    assert_eq!(flat["user_agent"], ["Bot/1"]);
    assert!(flat["nats_token"].is_empty());
    assert_eq!(flat.len(), flat_keys().len());
}

#[test]
fn robots_token_is_the_product_name() {
    assert_eq!(robots_token("MyBot/2.1 (+http://x)"), "MyBot");
    assert_eq!(robots_token("plain"), "plain");
    assert_eq!(robots_token(" LeadingSpace/1.0"), "LeadingSpace");
    assert_eq!(robots_token("/1.0"), "trawl");
    assert_eq!(robots_token(""), "trawl");
    assert_eq!(CrawlSettings::default().robots_agent(), "trawl");
    let c = CrawlSettings {
        user_agent: Some("  ".into()),
        ..CrawlSettings::default()
    };
    assert!(c.user_agent().starts_with("trawl/"));
}

#[test]
fn secrets_are_not_in_debug_output() {
    let c = ClusterSettings {
        nats_password: Some("hunter2".into()),
        redis_url: "redis://u:sesame@127.0.0.1:6379".into(),
        ..ClusterSettings::default()
    };
    let d = format!("{c:?}");
    assert!(!d.contains("hunter2") && !d.contains("sesame"), "{d}");
}

//! The quality filters against datatrove's own verdicts on the same documents
//! (`tests/data/datatrove_verdicts.json`, made by `datatrove_cases.py` with datatrove's
//! default filters).

use serde_json::Value;
use trawl_corpus::quality::{C4, FineWeb, GopherQuality, GopherRepetition};

#[test]
fn each_filter_agrees_with_datatrove() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/datatrove_verdicts.json"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut checked = 0;
    let mut disagreements = Vec::new();
    for (name, text) in v["cases"].as_object().unwrap() {
        let text = text.as_str().unwrap();
        let want = &v["verdicts"][name];
        let mut sig = Vec::new();
        let got = [
            (
                "gopher_quality",
                GopherQuality::default().check(text, &mut sig).err(),
            ),
            (
                "gopher_repetition",
                GopherRepetition::default().check(text, &mut sig).err(),
            ),
            ("c4", C4::default().check(text, &mut sig).err()),
            ("fineweb", FineWeb::default().check(text, &mut sig).err()),
        ];
        for (filter, reason) in got {
            let reason = reason.unwrap_or("keep");
            checked += 1;
            if want[filter] != reason {
                disagreements.push(format!(
                    "{name}/{filter}: datatrove {} trawl {reason}",
                    want[filter]
                ));
            }
        }
        if want["c4"] == "keep" {
            let kept = C4::default().check(text, &mut sig).unwrap();
            assert_eq!(
                kept.lines().count() as u64,
                want["c4_lines"].as_u64().unwrap(),
                "{name}: lines C4 keeps"
            );
        }
    }
    assert_eq!(checked, 60);
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

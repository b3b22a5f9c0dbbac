//! Firecrawl's `changeTracking` format: each scrape of a URL (per API key and tag) is
//! compared with the one before it: `new` (none before), `removed` (now a 404 or 410),
//! `same` (the Markdown equal but for whitespace) or `changed`, with a unified diff and its
//! parsed form (the `git-diff` mode).

use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};

use super::db::{Db, Snapshot};

/// The change of this scrape against the last one, which this one then replaces.
pub fn track(
    db: &Db,
    owner: &str,
    url: &str,
    tag: Option<&str>,
    markdown: &str,
    status: u16,
    git_diff: bool,
) -> anyhow::Result<Value> {
    let tag = tag.unwrap_or("");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    // Read and replaced in one step: two scrapes at once do not both find nothing.
    let previous = db.swap_snapshot(
        owner,
        url,
        tag,
        &Snapshot {
            markdown: markdown.to_string(),
            status,
            scraped_at: now,
        },
    )?;
    let mut out = json!({"visibility": "visible"});
    match &previous {
        None => {
            out["changeStatus"] = "new".into();
            out["previousScrapeAt"] = Value::Null;
        }
        Some(p) => {
            out["previousScrapeAt"] = p.scraped_at.clone().into();
            let status_word = if matches!(status, 404 | 410) {
                "removed"
            } else if squeeze(&p.markdown) == squeeze(markdown) {
                "same"
            } else {
                "changed"
            };
            out["changeStatus"] = status_word.into();
            if status_word == "changed" && git_diff {
                out["diff"] = diff(&p.markdown, markdown);
            }
        }
    }
    if let Some(t) = (!tag.is_empty()).then_some(tag) {
        out["tag"] = t.into();
    }
    Ok(out)
}

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// `{"text": unified diff, "json": {"files": [...]}}`, the json in parse-diff's shape.
fn diff(old: &str, new: &str) -> Value {
    // A deadline: two large, unrelated texts would keep Myers' algorithm busy for minutes
    // (past it the diff is coarser, never wrong).
    let d = TextDiff::configure()
        .timeout(std::time::Duration::from_secs(1))
        .diff_lines(old, new);
    let mut unified = d.unified_diff();
    unified.context_radius(3).header("a", "b");
    let text = unified.to_string();
    let mut chunks = Vec::new();
    for hunk in unified.iter_hunks() {
        let mut changes = Vec::new();
        for op in hunk.ops() {
            for c in d.iter_changes(op) {
                let line = c.value().trim_end_matches('\n');
                let old_ln = c.old_index().map(|i| i + 1);
                let new_ln = c.new_index().map(|i| i + 1);
                changes.push(match c.tag() {
                    ChangeTag::Delete => json!({"type": "del", "del": true, "ln": old_ln, "content": format!("-{line}")}),
                    ChangeTag::Insert => json!({"type": "add", "add": true, "ln": new_ln, "content": format!("+{line}")}),
                    ChangeTag::Equal => json!({"type": "normal", "normal": true, "ln1": old_ln, "ln2": new_ln, "content": format!(" {line}")}),
                });
            }
        }
        chunks.push(json!({"content": hunk.header().to_string(), "changes": changes}));
    }
    json!({"text": text, "json": {"files": [{"from": "a", "to": "b", "chunks": chunks}]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_then_same_then_changed_then_removed() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("serve.db")).unwrap();
        let t =
            |md: &str, status| track(&db, "k", "http://h/c", Some("t1"), md, status, true).unwrap();
        let first = t("# C\nVersion one.\n", 200);
        assert_eq!(first["changeStatus"], "new");
        assert!(first["previousScrapeAt"].is_null());
        let second = t("# C\n\nVersion   one.\n", 200);
        assert_eq!(second["changeStatus"], "same");
        assert!(second["previousScrapeAt"].is_string());
        let third = t("# C\nVersion two.\n", 200);
        assert_eq!(third["changeStatus"], "changed");
        let text = third["diff"]["text"].as_str().unwrap();
        assert!(text.contains("+Version two."), "{text}");
        let changes = &third["diff"]["json"]["files"][0]["chunks"][0]["changes"];
        assert!(
            changes
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "add" && c["content"] == "+Version two.")
        );
        assert_eq!(t("gone", 404)["changeStatus"], "removed");
        // Another tag, another history.
        let other = track(&db, "k", "http://h/c", Some("t2"), "x", 200, false).unwrap();
        assert_eq!(other["changeStatus"], "new");
    }
}

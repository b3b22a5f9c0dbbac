//! The model-free teacher on the shared WCXB split (511 pages, 7 page types): the word F1 of
//! the refined text (the rendered lines its `<extract>` program keeps) beside that of
//! `trawl extract`'s own text, scored as WCXB's evaluate.py does, in one run.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use trawl_refine::program::{Finish, Generation, Mode, execute};
use trawl_refine::teacher::teach_page;

fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        if c.is_alphanumeric() || c == '_' {
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// evaluate.py's word P/R/F1 (multisets of lower-cased `\w+` tokens).
fn word_f1(pred: &str, truth: &str) -> f64 {
    word_prf(pred, truth).2
}

fn word_prf(pred: &str, truth: &str) -> (f64, f64, f64) {
    let (p, t) = (tokens(pred), tokens(truth));
    if t.is_empty() {
        return if p.is_empty() {
            (1.0, 1.0, 1.0)
        } else {
            (0.0, 0.0, 0.0)
        };
    }
    if p.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut bag: HashMap<&str, i64> = HashMap::new();
    for w in &t {
        *bag.entry(w).or_default() += 1;
    }
    let mut ov = 0usize;
    for w in &p {
        if let Some(n) = bag.get_mut(w.as_str())
            && *n > 0
        {
            *n -= 1;
            ov += 1;
        }
    }
    let (pr, rc) = (ov as f64 / p.len() as f64, ov as f64 / t.len() as f64);
    (
        pr,
        rc,
        if pr + rc == 0.0 {
            0.0
        } else {
            2.0 * pr * rc / (pr + rc)
        },
    )
}

#[test]
fn extract_program_costs_at_most_a_hundredth_of_word_f1_on_wcxb() {
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/extraction/wcxb");
    let Ok(f) = std::fs::File::open(set.join("ground_truth.jsonl")) else {
        eprintln!(
            "skipped: the shared WCXB split is not on this machine ({})",
            set.display()
        );
        return;
    };
    let (mut n, mut f_extract, mut f_refine, mut lines_total, mut kept_total) =
        (0usize, 0.0, 0.0, 0usize, 0usize);
    for row in std::io::BufReader::new(f).lines() {
        let v: serde_json::Value = serde_json::from_str(&row.expect("read")).expect("json");
        let body =
            std::fs::read(set.join(v["html_file"].as_str().expect("html_file"))).expect("page");
        let truth = v["text"].as_str().unwrap_or_default();
        let url = url::Url::parse(v["url"].as_str().unwrap_or_default())
            .unwrap_or_else(|_| url::Url::parse("http://example.com/").expect("url"));
        let (html, _) = trawl_body::decode_html(&body, None);
        let extracted = trawl_extract::extract_html(&html, &url).text;
        let (lines, t) = teach_page(&html, &url);
        let out = execute(
            &lines,
            &Generation {
                text: t.program.clone(),
                finish: Finish::Stop,
            },
            Mode::Trawl,
        );
        let refined = out.text.unwrap_or_default();
        n += 1;
        lines_total += lines.len();
        kept_total += t.keep.iter().filter(|k| **k).count();
        f_extract += word_f1(&extracted, truth);
        f_refine += word_f1(&refined, truth);
        if std::env::var("TEACHER_DEBUG").is_ok() {
            let (a, b) = (word_prf(&extracted, truth), word_prf(&refined, truth));
            println!("{:.3} {:.3} {:.3} {:.3} {}", a.0, a.1, b.0, b.1, v["id"]);
        }
    }
    let (fe, fr) = (f_extract / n as f64, f_refine / n as f64);
    eprintln!(
        "WCXB {n} pages: trawl extract word F1 {fe:.4}, refine --engine extract {fr:.4} ({:+.4}); {kept_total} of {lines_total} rendered lines kept",
        fr - fe
    );
    assert!(n >= 500);
    assert!(fr >= fe - 0.01, "refined {fr:.4} vs extract {fe:.4}");
}

//! ReScraper's own reader, for parity tests: `rescraper_ops.body_from_prediction_dfirst`
//! over `editops.apply_ops`, line for line. It writes an `<edit>` payload that does not
//! parse as the page text, and accepts a cut-off `<rewrite>`; trawl's reader
//! ([`crate::program::Mode::Trawl`]) does neither.

use crate::program::{Decision, Outcome, ProgramError};

fn is_rm(s: &str) -> Option<(u64, u64)> {
    let rest = s.strip_prefix("rm ")?;
    let (a, b) = rest.split_once('-').unwrap_or((rest, rest));
    Some((num(a)?, num(b)?))
}

fn is_sub(s: &str) -> Option<(u64, &str)> {
    let rest = s.strip_prefix("sub ")?;
    let (n, p) = rest.split_once(": ")?;
    Some((num(n)?, p))
}

fn num(s: &str) -> Option<u64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().unwrap_or(u64::MAX))
}

fn is_op(s: &str) -> bool {
    is_rm(s).is_some() || is_sub(s).is_some()
}

fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// `parse_staged`: (extract ops, second tag, rest).
fn parse_staged(pred: &str) -> (Vec<String>, String, String) {
    let lines: Vec<&str> = py_strip(pred).split('\n').collect();
    let mut i = 0;
    let mut ops = Vec::new();
    if lines.first().is_some_and(|l| py_strip(l) == "<extract>") {
        i = 1;
        while let Some(l) = lines.get(i) {
            let s = py_strip(l);
            if s.is_empty() || is_op(s) {
                ops.push(s.to_string());
                i += 1;
            } else {
                break;
            }
        }
    }
    if i >= lines.len() {
        return (ops, "<keep>".into(), String::new());
    }
    (
        ops,
        py_strip(lines[i]).to_string(),
        lines[i + 1..].join("\n"),
    )
}

/// `editops.apply_ops`: Err when Python raises (a `sub` payload that is JSON but no string).
fn apply_ops(lines: &[String], ops: &[String]) -> Result<String, String> {
    let n = lines.len() as u64;
    let mut ranges = Vec::new();
    let mut subs: Vec<Vec<String>> = vec![Vec::new(); lines.len()];
    for l in ops {
        let l = py_strip(l);
        if l.is_empty() {
            continue;
        }
        if let Some((a, b)) = is_rm(l) {
            ranges.push((a, b));
            continue;
        }
        if let Some((k, p)) = is_sub(l) {
            let s = match serde_json::from_str::<serde_json::Value>(p) {
                Ok(serde_json::Value::String(s)) => s,
                Ok(other) => {
                    return Err(format!(
                        "TypeError: replace() argument must be str, not {other}"
                    ));
                }
                Err(_) => p.trim_matches('"').to_string(),
            };
            if k >= 1 && k <= n {
                subs[(k - 1) as usize].push(s);
            }
        }
    }
    let removed = crate::program::removed_mask(lines.len(), ranges);
    let mut out = Vec::new();
    for (i, x) in lines.iter().enumerate() {
        if removed[i] {
            continue;
        }
        let mut x = x.clone();
        for s in &subs[i] {
            if let Some(at) = x.find(s.as_str()) {
                x.replace_range(at..at + s.len(), "");
            }
        }
        let x = x.split_whitespace().collect::<Vec<_>>().join(" ");
        if !x.is_empty() {
            out.push(x);
        }
    }
    Ok(out.join("\n"))
}

/// `_apply_edit_body` with `OPS_TOLERANT` off.
fn edit_body(lines: &[String], ops1: &[String], rest: &str) -> Result<String, String> {
    let bl: Vec<&str> = rest
        .split('\n')
        .map(py_strip)
        .filter(|l| !l.is_empty())
        .collect();
    if bl.is_empty() {
        return Ok(py_strip(rest).to_string());
    }
    if bl.iter().all(|l| is_op(l)) {
        let mut all = ops1.to_vec();
        all.extend(bl.iter().map(|s| s.to_string()));
        return apply_ops(lines, &all);
    }
    Ok(py_strip(rest).to_string())
}

fn staged(lines: &[String], pred: &str) -> Result<(String, String), String> {
    let (ops1, tag, rest) = parse_staged(pred);
    Ok(match tag.as_str() {
        "<delete>" => ("<delete>".into(), String::new()),
        "<rewrite>" => ("<rewrite>".into(), py_strip(&rest).to_string()),
        "<keep>" => ("<extract>".into(), apply_ops(lines, &ops1)?),
        "<edit>" => ("<refine>".into(), edit_body(lines, &ops1, &rest)?),
        _ => (tag, py_strip(&rest).to_string()),
    })
}

/// `body_from_prediction_dfirst`: (provenance tag, text).
pub fn read(lines: &[String], pred: &str) -> Result<(String, String), String> {
    let all: Vec<&str> = py_strip(pred).split('\n').collect();
    let d = all.first().map(|l| py_strip(l)).unwrap_or("");
    if Decision::parse_tag(d).is_none() {
        return staged(lines, pred);
    }
    let (ops1, tag2, mut rest) = parse_staged(&all[1..].join("\n"));
    match d {
        "<delete>" => return Ok(("<delete>".into(), String::new())),
        "<keep>" => return Ok(("<extract>".into(), apply_ops(lines, &ops1)?)),
        _ => {}
    }
    if Decision::parse_tag(&tag2).is_none() && !tag2.is_empty() {
        rest = format!("{tag2}\n{rest}");
    }
    if d == "<rewrite>" {
        return Ok(("<rewrite>".into(), py_strip(&rest).to_string()));
    }
    Ok(("<refine>".into(), edit_body(lines, &ops1, &rest)?))
}

pub fn execute(lines: &[String], pred: &str) -> Outcome {
    // Read as far as the trawl reading does (the whole text stays in the record).
    let mut cut = pred.len().min(crate::program::MAX_PROGRAM_BYTES);
    while !pred.is_char_boundary(cut) {
        cut -= 1;
    }
    let pred = &pred[..cut];
    let mut out = Outcome {
        decision: None,
        provenance: None,
        text: None,
        warnings: Vec::new(),
        error: None,
        fell_back: false,
        removed: 0,
    };
    match read(lines, pred) {
        Ok((tag, text)) => {
            out.decision = match tag.as_str() {
                "<extract>" => Some(Decision::Keep),
                "<refine>" => Some(Decision::Edit),
                "<rewrite>" => Some(Decision::Rewrite),
                "<delete>" => Some(Decision::Delete),
                _ => None,
            };
            out.provenance = Some(
                tag.trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string(),
            );
            out.text = (!text.is_empty()).then_some(text);
        }
        Err(reason) => out.error = Some(ProgramError::PythonException { reason }),
    }
    out
}

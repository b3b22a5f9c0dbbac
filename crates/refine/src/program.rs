//! The edit programs a refining model writes, and the executor that applies them.
//!
//! ```text
//! output   := dec NL "<extract>" NL { ext_op NL } dec2 [ NL payload ]
//! dec      := "<keep>" | "<edit>" | "<delete>" | "<rewrite>"       ; dec2 repeats dec
//! ext_op   := rm | ""
//! rm       := "rm " ID [ "-" ID ]          ; 1-based, inclusive
//! sub      := "sub " ID ": " JSON_STRING   ; removes the first occurrence on line ID
//! payload  := { (rm | sub) NL }            ; <edit>
//!           | TEXT                         ; <rewrite>
//! ```
//!
//! [`execute`] is total: any model output (truncated, malformed, a `<think>` block, ids out
//! of range, megabytes of noise) gives an [`Outcome`] saying what was kept and why anything
//! fell back; it never panics and never alters the lines. Two readings exist:
//! [`Mode::Trawl`] copies every kept character from the page (an `<edit>` payload that does
//! not parse falls back to the extract-only result; a `<rewrite>` cut off at the token limit
//! is rejected), and [`Mode::Python`] reproduces ReScraper's reader
//! (`rescraper_ops.body_from_prediction_dfirst`) for parity tests.

use serde::{Deserialize, Serialize};

/// Model outputs past this are read only this far (the whole text stays in the record).
pub const MAX_PROGRAM_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Keep,
    Edit,
    Delete,
    Rewrite,
}

impl Decision {
    pub fn parse_tag(s: &str) -> Option<Decision> {
        match s.trim() {
            "<keep>" => Some(Decision::Keep),
            "<edit>" => Some(Decision::Edit),
            "<delete>" => Some(Decision::Delete),
            "<rewrite>" => Some(Decision::Rewrite),
            _ => None,
        }
    }

    pub fn tag(self) -> &'static str {
        match self {
            Decision::Keep => "<keep>",
            Decision::Edit => "<edit>",
            Decision::Delete => "<delete>",
            Decision::Rewrite => "<rewrite>",
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Finish {
    /// A stop token.
    #[default]
    Stop,
    /// The token limit: the last line may be cut.
    Length,
}

/// One model output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Generation {
    pub text: String,
    pub finish: Finish,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Lines `a..=b` (1-based) removed.
    Rm(u64, u64),
    /// The first occurrence of the string removed from line `n`.
    Sub(u64, String),
}

/// Reading the lines of a program, `None` when a line is not an op.
pub fn parse_op(line: &str) -> Option<Op> {
    let l = line.trim();
    if let Some(rest) = l.strip_prefix("rm ") {
        let (a, b) = match rest.split_once('-') {
            Some((a, b)) => (a, b),
            None => (rest, rest),
        };
        return Some(Op::Rm(id(a)?, id(b)?));
    }
    let rest = l.strip_prefix("sub ")?;
    let (n, s) = rest.split_once(": ")?;
    Some(Op::Sub(id(n)?, sub_string(s).0))
}

fn id(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Longer than any page: read as "past the end", not as an error.
    Some(s.parse().unwrap_or(u64::MAX))
}

/// A `sub` payload: a JSON string, else the text with its quotes stripped (`false`).
fn sub_string(s: &str) -> (String, bool) {
    match serde_json::from_str::<String>(s) {
        Ok(v) => (v, true),
        Err(_) => (s.trim_matches('"').to_string(), false),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Trawl,
    Python,
}

/// Something the executor tolerated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "warning", rename_all = "snake_case")]
pub enum Warning {
    /// A `<think>` block before the program was skipped.
    Think,
    /// Generation hit the token limit; its last line was dropped.
    Truncated,
    /// The output was longer than [`MAX_PROGRAM_BYTES`] and read only that far.
    Oversized { bytes: usize },
    /// The closing tag differs from the decision (or is missing).
    TagMismatch { found: String },
    /// `rm A-B` with A > B removes nothing.
    ReversedRange { line: String },
    /// Line ids outside 1..=n were ignored.
    OutOfRange { count: usize },
    /// A `sub` whose string is not on its line.
    SubNotFound { line: u64 },
    /// A `sub` payload that is not a JSON string, read with its quotes stripped.
    SubNotJson { line: u64 },
    /// A `sub` in the extract block (the teacher never writes one).
    SubInExtract,
    /// A line that looks like an op but does not parse.
    BadOp { line: String },
    /// `<edit>` with nothing after it: read as `<keep>`.
    EmptyEdit,
    /// A cut-off `<edit>` payload whose ops parsed at 80% or more: those were applied.
    PartialEdit { parsed: usize, lines: usize },
}

/// Why no refined text (or only the extract-only text) came out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum ProgramError {
    #[error("no decision tag on the first line")]
    NoDecision,
    #[error("an unclosed <think> block")]
    ThinkUnclosed,
    #[error("the <edit> payload does not parse as ops ({parsed} of {lines} lines)")]
    EditUnparsed { parsed: usize, lines: usize },
    #[error("a <rewrite> cut off at the token limit")]
    RewriteTruncated,
    #[error("an empty <rewrite>")]
    EmptyRewrite,
    #[error("nothing left after the extract ops")]
    EmptyAfterExtract,
    #[error("the text failed ReScraper's post-filter ({rule})")]
    PostFilter { rule: String },
    #[error("the Python reader raises here ({reason})")]
    PythonException { reason: String },
}

/// What came of one program over one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub decision: Option<Decision>,
    /// ReScraper's provenance tag of the text: `extract`, `refine`, `rewrite` or `delete`.
    pub provenance: Option<String>,
    /// The refined page; `None` when the page is dropped.
    pub text: Option<String>,
    pub warnings: Vec<Warning>,
    pub error: Option<ProgramError>,
    /// The text is the extract-only result, taken because the decision's own could not be.
    pub fell_back: bool,
    /// Lines removed (1-based), when the text was copied from the page.
    pub removed: usize,
}

/// The parts of a program as read from the output.
#[derive(Debug, Default)]
struct Parsed {
    decision: Option<Decision>,
    extract: Vec<String>,
    tag2: Option<String>,
    payload: Vec<String>,
}

/// Runs `output` over the rendered `lines` (unnumbered, as [`crate::lines::render_lines`]
/// gives them).
pub fn execute(lines: &[String], output: &Generation, mode: Mode) -> Outcome {
    match mode {
        Mode::Trawl => execute_trawl(lines, output),
        Mode::Python => crate::python::execute(lines, &output.text),
    }
}

fn empty_outcome() -> Outcome {
    Outcome {
        decision: None,
        provenance: None,
        text: None,
        warnings: Vec::new(),
        error: None,
        fell_back: false,
        removed: 0,
    }
}

fn execute_trawl(lines: &[String], output: &Generation) -> Outcome {
    let mut out = empty_outcome();
    let mut text: &str = &output.text;
    if text.len() > MAX_PROGRAM_BYTES {
        let mut cut = MAX_PROGRAM_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        out.warnings.push(Warning::Oversized { bytes: text.len() });
        text = &text[..cut];
    }
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut body = normalized.trim_start();
    if let Some(rest) = body.strip_prefix("<think>") {
        match rest.find("</think>") {
            Some(end) => {
                out.warnings.push(Warning::Think);
                body = rest[end + "</think>".len()..].trim_start();
            }
            None => {
                out.error = Some(ProgramError::ThinkUnclosed);
                return out;
            }
        }
    }
    let mut all: Vec<&str> = body.split('\n').collect();
    let truncated = output.finish == Finish::Length
        || out
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::Oversized { .. }));
    if truncated {
        // `rm 1` may be the start of `rm 15-20`: a cut last line is never read.
        all.pop();
        out.warnings.push(Warning::Truncated);
    }
    let parsed = parse_program(&all, &mut out.warnings);
    let Some(decision) = parsed.decision else {
        out.error = Some(ProgramError::NoDecision);
        return out;
    };
    out.decision = Some(decision);
    let extract_ops = read_ops(&parsed.extract, &mut out.warnings, true);
    let extract_only = |out: &mut Outcome| apply(lines, &extract_ops, out);
    match decision {
        Decision::Delete => {
            out.provenance = Some("delete".into());
        }
        Decision::Keep => {
            out.provenance = Some("extract".into());
            out.text = extract_only(&mut out);
        }
        Decision::Edit => {
            let payload: Vec<&String> = parsed
                .payload
                .iter()
                .filter(|l| !l.trim().is_empty())
                .collect();
            if payload.is_empty() {
                out.warnings.push(Warning::EmptyEdit);
                out.provenance = Some("extract".into());
                out.text = extract_only(&mut out);
            } else {
                let ok: Vec<String> = payload
                    .iter()
                    .filter(|l| parse_op(l).is_some())
                    .map(|l| l.to_string())
                    .collect();
                let partial = truncated && ok.len() * 5 >= payload.len() * 4;
                if ok.len() == payload.len() || partial {
                    if ok.len() != payload.len() {
                        out.warnings.push(Warning::PartialEdit {
                            parsed: ok.len(),
                            lines: payload.len(),
                        });
                    }
                    let mut ops = extract_ops.clone();
                    ops.extend(read_ops(&ok, &mut out.warnings, false));
                    out.provenance = Some("refine".into());
                    out.text = apply(lines, &ops, &mut out);
                } else {
                    out.error = Some(ProgramError::EditUnparsed {
                        parsed: ok.len(),
                        lines: payload.len(),
                    });
                    out.fell_back = true;
                    out.provenance = Some("extract".into());
                    out.text = extract_only(&mut out);
                }
            }
        }
        Decision::Rewrite => {
            if truncated {
                out.error = Some(ProgramError::RewriteTruncated);
            } else {
                let t = parsed.payload.join("\n").trim().to_string();
                if t.is_empty() {
                    out.error = Some(ProgramError::EmptyRewrite);
                } else {
                    out.provenance = Some("rewrite".into());
                    out.text = Some(t);
                }
            }
        }
    }
    if let Some(t) = &out.text {
        if t.is_empty() {
            out.text = None;
            if out.error.is_none() {
                out.error = Some(ProgramError::EmptyAfterExtract);
            }
        } else if let Some(rule) = crate::postfilter::reject(t) {
            out.text = None;
            out.error = Some(ProgramError::PostFilter { rule: rule.into() });
        }
    }
    out
}

fn parse_program(all: &[&str], warnings: &mut Vec<Warning>) -> Parsed {
    let mut p = Parsed::default();
    let mut i = all
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or(all.len());
    let Some(first) = all.get(i) else { return p };
    let staged = first.trim() == "<extract>";
    if !staged {
        p.decision = Decision::parse_tag(first);
        if p.decision.is_none() {
            return p;
        }
        i += 1;
        while all.get(i).is_some_and(|l| l.trim().is_empty()) {
            i += 1;
        }
        if all.get(i).is_some_and(|l| l.trim() == "<extract>") {
            i += 1;
        }
    } else {
        i += 1;
    }
    while let Some(l) = all.get(i) {
        let s = l.trim();
        if s.is_empty() || parse_op(s).is_some() {
            p.extract.push(s.to_string());
        } else if (s.starts_with("rm ") || s.starts_with("sub "))
            && Decision::parse_tag(s).is_none()
        {
            warnings.push(Warning::BadOp { line: clip(s) });
        } else {
            break;
        }
        i += 1;
    }
    if let Some(l) = all.get(i) {
        let tag2 = Decision::parse_tag(l);
        match (p.decision, tag2) {
            (None, t) => p.decision = t,
            (Some(d), Some(t)) if d != t => warnings.push(Warning::TagMismatch {
                found: clip(l.trim()),
            }),
            (Some(_), Some(_)) => {}
            (Some(_), None) => {
                warnings.push(Warning::TagMismatch {
                    found: clip(l.trim()),
                });
                // The repeat is missing: this line is already payload.
                p.payload.push(l.to_string());
            }
        }
        p.tag2 = Some(l.trim().to_string());
        i += 1;
    } else if p.decision.is_some() {
        warnings.push(Warning::TagMismatch {
            found: String::new(),
        });
    }
    p.payload
        .extend(all.get(i..).unwrap_or(&[]).iter().map(|l| l.to_string()));
    p
}

fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

fn read_ops(lines: &[String], warnings: &mut Vec<Warning>, extract: bool) -> Vec<Op> {
    let mut ops = Vec::new();
    for l in lines {
        let s = l.trim();
        if s.is_empty() {
            continue;
        }
        match parse_op(s) {
            Some(Op::Rm(a, b)) => {
                if a > b {
                    warnings.push(Warning::ReversedRange { line: clip(s) });
                }
                ops.push(Op::Rm(a, b));
            }
            Some(Op::Sub(n, _)) => {
                if extract {
                    warnings.push(Warning::SubInExtract);
                }
                let payload = s.split_once(": ").map_or("", |(_, p)| p);
                let (text, json) = sub_string(payload);
                if !json {
                    warnings.push(Warning::SubNotJson { line: n });
                }
                ops.push(Op::Sub(n, text));
            }
            None => warnings.push(Warning::BadOp { line: clip(s) }),
        }
    }
    ops
}

/// Which of `n` lines the 1-based inclusive `ranges` remove (out-of-range parts ignored,
/// overlaps unioned), marked in a difference array: many long ranges cost their number
/// plus the page's length, not their product.
pub(crate) fn removed_mask(n: usize, ranges: impl IntoIterator<Item = (u64, u64)>) -> Vec<bool> {
    let mut delta = vec![0i64; n + 1];
    for (a, b) in ranges {
        let (lo, hi) = (a.max(1), b.min(n as u64));
        if lo <= hi {
            delta[(lo - 1) as usize] += 1;
            delta[hi as usize] -= 1;
        }
    }
    let mut depth = 0i64;
    delta[..n]
        .iter()
        .map(|d| {
            depth += d;
            depth > 0
        })
        .collect()
}

/// Applies ops to the lines: removals as a union, subs in order on the lines that remain,
/// whitespace collapsed, empty lines dropped.
fn apply(lines: &[String], ops: &[Op], out: &mut Outcome) -> Option<String> {
    let n = lines.len() as u64;
    let mut out_of_range = 0usize;
    let mut ranges = Vec::new();
    for op in ops {
        if let Op::Rm(a, b) = *op {
            if a > b {
                continue;
            }
            if a == 0 || b > n {
                out_of_range += 1;
            }
            ranges.push((a, b));
        }
    }
    let removed = removed_mask(lines.len(), ranges);
    let mut kept: Vec<String> = lines.to_vec();
    for op in ops {
        if let Op::Sub(line, s) = op {
            if *line == 0 || *line > n {
                out_of_range += 1;
                continue;
            }
            let idx = (*line - 1) as usize;
            if removed[idx] || s.is_empty() {
                continue;
            }
            match kept[idx].find(s.as_str()) {
                Some(at) => kept[idx].replace_range(at..at + s.len(), ""),
                None => out.warnings.push(Warning::SubNotFound { line: *line }),
            }
        }
    }
    if out_of_range > 0 {
        out.warnings.push(Warning::OutOfRange {
            count: out_of_range,
        });
    }
    let mut text = Vec::new();
    for (i, l) in kept.iter().enumerate() {
        if removed[i] {
            out.removed += 1;
            continue;
        }
        let c = l.split_whitespace().collect::<Vec<_>>().join(" ");
        if !c.is_empty() {
            text.push(c);
        }
    }
    Some(text.join("\n"))
}

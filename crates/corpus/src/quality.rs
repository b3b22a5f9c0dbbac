//! Document quality filters with datatrove's rules and default thresholds: Gopher quality,
//! Gopher repetition, C4 and FineWeb. Each filter is configurable, says why it drops a
//! document (datatrove's reason names), and reports the signals it computed.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// Punctuation tokens, as datatrove's word splitter separates them.
fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '…' | '“' | '”' | '‘' | '’' | '«' | '»' | '—' | '–' | '·' | '•'
        )
}

/// Words the way datatrove's tokenizers give them: whitespace-separated, with punctuation
/// split off the ends as tokens of their own ("Hello," -> "Hello", ",").
pub fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for w in text.split_whitespace() {
        let start = w.len() - w.trim_start_matches(is_punct).len();
        let end = w.trim_end_matches(is_punct).len();
        if start >= end {
            // All punctuation.
            out.push(w);
            continue;
        }
        if start > 0 {
            out.push(&w[..start]);
        }
        out.push(&w[start..end]);
        if end < w.len() {
            out.push(&w[end..]);
        }
    }
    out
}

pub use crate::tokenize::{Tokenizer, Words};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GopherQuality {
    pub min_doc_words: usize,
    pub max_doc_words: usize,
    pub min_avg_word_length: f64,
    pub max_avg_word_length: f64,
    pub max_symbol_word_ratio: f64,
    pub max_bullet_lines_ratio: f64,
    pub max_ellipsis_lines_ratio: f64,
    pub max_non_alpha_words_ratio: f64,
    pub min_stop_words: usize,
    pub stop_words: Vec<String>,
    #[serde(skip)]
    pub tokenizer: Tokenizer,
}

impl Default for GopherQuality {
    fn default() -> Self {
        GopherQuality {
            min_doc_words: 50,
            max_doc_words: 100_000,
            min_avg_word_length: 3.0,
            max_avg_word_length: 10.0,
            max_symbol_word_ratio: 0.1,
            max_bullet_lines_ratio: 0.9,
            max_ellipsis_lines_ratio: 0.3,
            max_non_alpha_words_ratio: 0.8,
            min_stop_words: 2,
            stop_words: ["the", "be", "to", "of", "and", "that", "have", "with"]
                .map(String::from)
                .to_vec(),
            tokenizer: Tokenizer::Spaces,
        }
    }
}

/// Signals: name -> value, in a stable order for output.
pub type Signals = Vec<(&'static str, f64)>;

impl GopherQuality {
    pub fn check(&self, text: &str, sig: &mut Signals) -> Result<(), &'static str> {
        self.check_words(&Words::new(text, self.tokenizer), sig)
    }

    pub fn check_words(&self, w: &Words, sig: &mut Signals) -> Result<(), &'static str> {
        let w = w.with(self.tokenizer);
        let (text, words) = (w.text, w.get());
        let n_words = words.len().max(1) as f64;
        let non_symbol: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| w.chars().any(|c| !is_punct(c)))
            .collect();
        sig.push(("gopher_words", non_symbol.len() as f64));
        if non_symbol.len() < self.min_doc_words {
            return Err("gopher_short_doc");
        }
        if non_symbol.len() > self.max_doc_words {
            return Err("gopher_long_doc");
        }
        let avg = non_symbol.iter().map(|w| w.chars().count()).sum::<usize>() as f64
            / non_symbol.len() as f64;
        sig.push(("gopher_mean_word_length", avg));
        if avg < self.min_avg_word_length {
            return Err("gopher_below_avg_threshold");
        }
        if avg > self.max_avg_word_length {
            return Err("gopher_above_avg_threshold");
        }
        let hashes = text.matches('#').count() as f64 / n_words;
        let ellipses = (text.matches("...").count() + text.matches('…').count()) as f64 / n_words;
        sig.push(("gopher_hash_ratio", hashes));
        sig.push(("gopher_ellipsis_ratio", ellipses));
        if hashes > self.max_symbol_word_ratio {
            return Err("gopher_too_many_hashes");
        }
        if ellipses > self.max_symbol_word_ratio {
            return Err("gopher_too_many_ellipsis");
        }
        let lines: Vec<&str> = text.lines().collect();
        let n_lines = lines.len().max(1) as f64;
        let bullets = lines
            .iter()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with('•') || l.starts_with('-')
            })
            .count() as f64
            / n_lines;
        let end_ellipsis = lines
            .iter()
            .filter(|l| {
                let l = l.trim_end();
                l.ends_with("...") || l.ends_with('…')
            })
            .count() as f64
            / n_lines;
        sig.push(("gopher_bullet_lines", bullets));
        sig.push(("gopher_ellipsis_lines", end_ellipsis));
        if bullets > self.max_bullet_lines_ratio {
            return Err("gopher_too_many_bullets");
        }
        if end_ellipsis > self.max_ellipsis_lines_ratio {
            return Err("gopher_too_many_end_ellipsis");
        }
        let alpha = words
            .iter()
            .filter(|w| w.chars().any(char::is_alphabetic))
            .count() as f64
            / n_words;
        sig.push(("gopher_alpha_words", alpha));
        if alpha < self.max_non_alpha_words_ratio {
            return Err("gopher_below_alpha_threshold");
        }
        let stop: HashSet<&str> = self.stop_words.iter().map(String::as_str).collect();
        // Case-sensitive, as datatrove counts them.
        let stops = words.iter().filter(|w| stop.contains(*w)).count();
        sig.push(("gopher_stop_words", stops as f64));
        if stops < self.min_stop_words {
            return Err("gopher_enough_stop_words");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GopherRepetition {
    pub dup_line_frac: f64,
    pub dup_para_frac: f64,
    pub dup_line_char_frac: f64,
    pub dup_para_char_frac: f64,
    pub top_n_grams: Vec<(usize, f64)>,
    pub dup_n_grams: Vec<(usize, f64)>,
    #[serde(skip)]
    pub tokenizer: Tokenizer,
}

impl Default for GopherRepetition {
    fn default() -> Self {
        GopherRepetition {
            dup_line_frac: 0.3,
            dup_para_frac: 0.3,
            dup_line_char_frac: 0.2,
            dup_para_char_frac: 0.2,
            top_n_grams: vec![(2, 0.2), (3, 0.18), (4, 0.16)],
            dup_n_grams: vec![
                (5, 0.15),
                (6, 0.14),
                (7, 0.13),
                (8, 0.12),
                (9, 0.11),
                (10, 0.10),
            ],
            tokenizer: Tokenizer::Spaces,
        }
    }
}

/// (repeated elements, characters in the repeats), counting each repeat after the first.
fn find_duplicates<'a>(items: impl IntoIterator<Item = &'a str>) -> (usize, usize) {
    let mut seen = HashSet::new();
    let (mut n, mut chars) = (0, 0);
    for x in items {
        if !seen.insert(x) {
            n += 1;
            chars += x.chars().count();
        }
    }
    (n, chars)
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

impl GopherRepetition {
    pub fn check(&self, text: &str, sig: &mut Signals) -> Result<(), &'static str> {
        self.check_words(&Words::new(text, self.tokenizer), sig)
    }

    pub fn check_words(&self, w: &Words, sig: &mut Signals) -> Result<(), &'static str> {
        let w = w.with(self.tokenizer);
        let text = w.text;
        let len = chars(text).max(1) as f64;
        let trimmed = text.trim();
        let paragraphs: Vec<&str> = split_runs(trimmed, 2);
        let (pd, pc) = find_duplicates(paragraphs.iter().copied());
        let para_frac = pd as f64 / paragraphs.len().max(1) as f64;
        sig.push(("repetition_dup_para_frac", para_frac));
        // A threshold of 0 turns the rule off, as in datatrove (FineWeb 2 runs it so).
        let on = |t: f64| t > 0.0;
        if on(self.dup_para_frac) && para_frac > self.dup_para_frac {
            return Err("dup_para_frac");
        }
        sig.push(("repetition_dup_para_char_frac", pc as f64 / len));
        if on(self.dup_para_char_frac) && pc as f64 / len > self.dup_para_char_frac {
            return Err("dup_para_char_frac");
        }
        let lines: Vec<&str> = split_runs(text, 1);
        let (ld, lc) = find_duplicates(lines.iter().copied());
        let line_frac = ld as f64 / lines.len().max(1) as f64;
        sig.push(("repetition_dup_line_frac", line_frac));
        if on(self.dup_line_frac) && line_frac > self.dup_line_frac {
            return Err("dup_line_frac");
        }
        sig.push(("repetition_dup_line_char_frac", lc as f64 / len));
        if on(self.dup_line_char_frac) && lc as f64 / len > self.dup_line_char_frac {
            return Err("dup_line_char_frac");
        }
        let words = w.get();
        const TOP: [&str; 3] = ["top_2_gram", "top_3_gram", "top_4_gram"];
        for &(n, frac) in &self.top_n_grams {
            if words.len() < n {
                continue;
            }
            if let Some(top) = top_gram_chars(words, n) {
                let share = top as f64 / len;
                let name = TOP.get(n.wrapping_sub(2)).copied().unwrap_or("top_n_gram");
                sig.push((name, share));
                if share > frac {
                    return Err(name);
                }
            }
        }
        const DUP: [&str; 6] = [
            "duplicated_5_n_grams",
            "duplicated_6_n_grams",
            "duplicated_7_n_grams",
            "duplicated_8_n_grams",
            "duplicated_9_n_grams",
            "duplicated_10_n_grams",
        ];
        for &(n, frac) in &self.dup_n_grams {
            let name = DUP
                .get(n.wrapping_sub(5))
                .copied()
                .unwrap_or("duplicated_n_grams");
            let share = all_duplicate_chars(words, n) as f64 / len;
            sig.push((name, share));
            if share > frac {
                return Err(name);
            }
        }
        Ok(())
    }
}

/// Characters in all the occurrences of the most common `n`-gram, each joined with spaces
/// as datatrove measures it; `None` when the text has no `n`-gram.
fn top_gram_chars(words: &[&str], n: usize) -> Option<usize> {
    let mut counts: HashMap<Vec<&str>, usize> = HashMap::new();
    for g in words.windows(n) {
        *counts.entry(g.to_vec()).or_default() += 1;
    }
    // Ties go to the first seen, as Counter.most_common does.
    let mut best: Option<(&[&str], usize)> = None;
    let mut seen = HashSet::new();
    for g in words.windows(n) {
        if !seen.insert(g) {
            continue;
        }
        let c = counts[g];
        if best.is_none_or(|(_, bc)| c > bc) {
            best = Some((g, c));
        }
    }
    let (g, c) = best?;
    let glen = g.iter().map(|w| chars(w)).sum::<usize>() + n - 1;
    Some(glen * c)
}

/// Splits on runs of at least `min` newlines (datatrove's `\n{2,}` and `\n+`).
fn split_runs(text: &str, min: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\n' {
            let run_start = i;
            while i < b.len() && b[i] == b'\n' {
                i += 1;
            }
            if i - run_start >= min {
                out.push(&text[start..run_start]);
                start = i;
            }
        } else {
            i += 1;
        }
    }
    out.push(&text[start..]);
    out
}

/// Characters in repeated n-grams, counting a repeat once and skipping over it (datatrove's
/// `find_all_duplicate`: n-grams joined without spaces).
fn all_duplicate_chars(words: &[&str], n: usize) -> usize {
    let mut seen: HashSet<String> = HashSet::new();
    let (mut repeated, mut i) = (0, 0);
    while words.len() >= n && i < words.len() - n + 1 {
        let g: String = words[i..i + n].concat();
        if seen.contains(&g) {
            repeated += chars(&g);
            i += n;
        } else {
            seen.insert(g);
            i += 1;
        }
    }
    repeated
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct C4 {
    pub min_num_sentences: usize,
    pub min_words_per_line: usize,
    pub max_word_length: usize,
    pub filter_no_terminal_punct: bool,
    pub filter_lorem_ipsum: bool,
    pub filter_javascript: bool,
    pub filter_curly_bracket: bool,
    pub filter_policy: bool,
    pub remove_citations: bool,
}

impl Default for C4 {
    fn default() -> Self {
        C4 {
            min_num_sentences: 5,
            min_words_per_line: 3,
            max_word_length: 1000,
            filter_no_terminal_punct: true,
            filter_lorem_ipsum: true,
            filter_javascript: true,
            filter_curly_bracket: true,
            filter_policy: true,
            remove_citations: true,
        }
    }
}

const POLICY: [&str; 6] = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
];

/// Sentences in a line: runs of text ending in . ! ? (or the line's end).
fn sentences(line: &str) -> usize {
    let mut n = 0;
    let mut in_sentence = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if matches!(c, '.' | '!' | '?') {
            if in_sentence && chars.peek().is_none_or(|n| n.is_whitespace()) {
                n += 1;
                in_sentence = false;
            }
        } else if !c.is_whitespace() {
            in_sentence = true;
        }
    }
    n + usize::from(in_sentence)
}

fn remove_citations(line: &str) -> String {
    // \[\d*]|\[edit]|\[citation needed]
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(p) = rest.find('[') {
        out.push_str(&rest[..p]);
        let after = &rest[p + 1..];
        let close = after.find(']');
        let drop = close.is_some_and(|c| {
            let inner = &after[..c];
            inner.bytes().all(|b| b.is_ascii_digit())
                || inner == "edit"
                || inner == "citation needed"
        });
        match (drop, close) {
            (true, Some(c)) => rest = &after[c + 1..],
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

impl C4 {
    /// Keeps the lines C4 keeps; the document passes when enough sentences remain. Returns
    /// the kept text.
    pub fn check(&self, text: &str, sig: &mut Signals) -> Result<String, &'static str> {
        let mut kept: Vec<String> = Vec::new();
        let mut n_sentences = 0;
        let mut total = 0;
        for raw in text.lines() {
            total += 1;
            let line = raw.trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            if words
                .iter()
                .any(|w| w.chars().count() > self.max_word_length)
            {
                continue;
            }
            let line = if self.remove_citations {
                remove_citations(line)
            } else {
                line.to_string()
            };
            if self.filter_no_terminal_punct
                && (!line.ends_with(['.', '?', '!', '"', '\'']) || line.ends_with("..."))
            {
                continue;
            }
            if words.len() < self.min_words_per_line {
                continue;
            }
            let lower = line.to_lowercase();
            if self.filter_lorem_ipsum && lower.contains("lorem ipsum") {
                return Err("lorem_ipsum");
            }
            if self.filter_javascript && lower.contains("javascript") {
                continue;
            }
            if self.filter_curly_bracket && line.contains('{') {
                return Err("curly_bracket");
            }
            if self.filter_policy && POLICY.iter().any(|p| lower.contains(p)) {
                continue;
            }
            n_sentences += sentences(&line);
            kept.push(line);
        }
        sig.push(("c4_kept_lines", kept.len() as f64 / f64::from(total.max(1))));
        sig.push(("c4_sentences", n_sentences as f64));
        if n_sentences < self.min_num_sentences {
            return Err("too_few_sentences");
        }
        Ok(kept.join("\n"))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FineWeb {
    pub line_punct_thr: f64,
    pub line_punct_exclude_zero: bool,
    pub short_line_thr: f64,
    pub short_line_length: usize,
    pub char_duplicates_ratio: f64,
    pub new_line_ratio: f64,
    #[serde(skip)]
    pub tokenizer: Tokenizer,
}

impl Default for FineWeb {
    fn default() -> Self {
        FineWeb {
            line_punct_thr: 0.12,
            line_punct_exclude_zero: false,
            short_line_thr: 0.67,
            short_line_length: 30,
            char_duplicates_ratio: 0.01,
            new_line_ratio: 0.3,
            tokenizer: Tokenizer::Spaces,
        }
    }
}

/// Sentence-final punctuation across scripts (a subset of datatrove's list).
fn terminal(c: char) -> bool {
    matches!(
        c,
        '.' | '!'
            | '?'
            | '։'
            | '؟'
            | '۔'
            | '।'
            | '॥'
            | '။'
            | '።'
            | '᙮'
            | '᠃'
            | '‼'
            | '‽'
            | '⁇'
            | '⁈'
            | '⁉'
            | '⸮'
            | '。'
            | '︒'
            | '﹒'
            | '．'
            | '！'
            | '？'
            | '｡'
    )
}

impl FineWeb {
    pub fn check(&self, text: &str, sig: &mut Signals) -> Result<(), &'static str> {
        self.check_words(&Words::new(text, self.tokenizer), sig)
    }

    pub fn check_words(&self, w: &Words, sig: &mut Signals) -> Result<(), &'static str> {
        let w = w.with(self.tokenizer);
        let text = w.text;
        let lines: Vec<&str> = text.split('\n').filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            return Err("empty");
        }
        let n = lines.len() as f64;
        let punct = lines
            .iter()
            .filter(|l| l.chars().last().is_some_and(terminal))
            .count() as f64
            / n;
        sig.push(("fineweb_line_punct_ratio", punct));
        if punct < self.line_punct_thr && !(punct == 0.0 && self.line_punct_exclude_zero) {
            return Err("line_punct_ratio");
        }
        let short = lines
            .iter()
            .filter(|l| chars(l) <= self.short_line_length)
            .count() as f64
            / n;
        sig.push(("fineweb_short_line_ratio", short));
        if short > self.short_line_thr {
            return Err("short_line_ratio");
        }
        let (_, dup_chars) = find_duplicates(lines.iter().copied());
        let body = chars(text) - text.matches('\n').count();
        let dup = dup_chars as f64 / body.max(1) as f64;
        sig.push(("fineweb_char_dup_ratio", dup));
        if dup > self.char_duplicates_ratio {
            return Err("char_dup_ratio");
        }
        let words = w.get().len().max(1) as f64;
        let nl = text.matches('\n').count() as f64 / words;
        sig.push(("fineweb_newline_ratio", nl));
        if nl > self.new_line_ratio {
            return Err("list_ratio");
        }
        Ok(())
    }
}

/// Which settings a document's language gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LanguageRules {
    /// English gets the filters' own settings (datatrove's English defaults, or the
    /// configuration's); another language gets FineWeb 2's settings for it, and C4 (written
    /// for English) does not run; a language with no settings is not filtered and the report
    /// says which rules did not run for it.
    #[default]
    PerLanguage,
    /// The filters' own settings on every document, whatever its language.
    English,
}

/// Which filters run, with their settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filters {
    pub gopher_quality: Option<GopherQuality>,
    pub gopher_repetition: Option<GopherRepetition>,
    pub c4: Option<C4>,
    pub fineweb: Option<FineWeb>,
    #[serde(default)]
    pub rules: LanguageRules,
}

/// The verdict on one document.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QualityVerdict {
    /// `filter:reason` for the first filter that dropped it.
    pub dropped: Option<String>,
    pub signals: Vec<(&'static str, f64)>,
    /// The text after C4's line filtering, when C4 ran and kept the document.
    pub c4_text: Option<String>,
    /// Filters that are on but have no settings for the document's language.
    pub not_applied: Vec<&'static str>,
}

impl Filters {
    /// All four with datatrove's defaults.
    pub fn all() -> Self {
        Filters {
            gopher_quality: Some(GopherQuality::default()),
            gopher_repetition: Some(GopherRepetition::default()),
            c4: Some(C4::default()),
            fineweb: Some(FineWeb::default()),
            rules: LanguageRules::PerLanguage,
        }
    }

    /// Runs the filters as they are set, in the order datatrove's FineWeb pipeline does
    /// (Gopher repetition, Gopher quality, C4, FineWeb); the first drop ends the run.
    pub fn check(&self, text: &str) -> QualityVerdict {
        let mut v = QualityVerdict::default();
        // One split for every filter; a filter with another tokenizer splits on its own.
        let first = self
            .gopher_repetition
            .as_ref()
            .map(|f| f.tokenizer)
            .or(self.gopher_quality.as_ref().map(|f| f.tokenizer))
            .or(self.fineweb.as_ref().map(|f| f.tokenizer))
            .unwrap_or_default();
        let words = Words::new(text, first);
        let sig = &mut v.signals;
        let drop = |name: &str, r: &str| Some(format!("{name}:{r}"));
        if let Some(f) = &self.gopher_repetition
            && let Err(r) = f.check_words(&words, sig)
        {
            v.dropped = drop("gopher_repetition", r);
            return v;
        }
        if let Some(f) = &self.gopher_quality
            && let Err(r) = f.check_words(&words, sig)
        {
            v.dropped = drop("gopher_quality", r);
            return v;
        }
        if let Some(f) = &self.c4 {
            match f.check(text, sig) {
                Ok(t) => v.c4_text = Some(t),
                Err(r) => {
                    v.dropped = drop("c4", r);
                    return v;
                }
            }
        }
        if let Some(f) = &self.fineweb
            && let Err(r) = f.check_words(&words, sig)
        {
            v.dropped = drop("fineweb", r);
        }
        v
    }
}

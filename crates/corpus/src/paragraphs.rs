//! Paragraph dedup across a corpus, as Dolma's and CCNet's line dedup do it: each line of a
//! kept document is normalized and hashed, and a line whose hash an earlier line of the
//! corpus (this document's included) already had is removed. A corpus keeps each paragraph
//! once, in the first document that has it; menus, footers and cookie notices repeated on
//! every page of a site go from all pages but the first.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use serde::Serialize;

/// Hashes are already uniform: the set uses them as they are.
#[derive(Default)]
struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// CCNet's normalization: lower case, digits as 0, punctuation removed, whitespace runs as
/// one space. Lines that differ only in a date, a count or their case are the same line.
pub fn normalize(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut space = false;
    for c in line.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if !c.is_alphanumeric() {
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        if c.is_numeric() {
            out.push('0');
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// What the dedup did to one document.
#[derive(Debug, Clone, PartialEq)]
pub struct Deduped {
    /// The text without its repeated lines.
    pub text: String,
    pub lines: usize,
    pub removed: usize,
}

/// Totals for the dataset report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ParagraphReport {
    pub lines_in: u64,
    pub lines_removed: u64,
    /// Documents that lost a line, and those that lost all (dropped).
    pub documents_changed: u64,
    pub documents_emptied: u64,
    /// Distinct lines remembered (8 bytes each in the set, ~16 with its table).
    pub distinct_lines: u64,
}

#[derive(Default)]
pub struct ParagraphDedup {
    seen: HashSet<u64, BuildHasherDefault<Identity>>,
    report: ParagraphReport,
}

impl ParagraphDedup {
    /// What was removed from the documents so far.
    pub fn report(&self) -> ParagraphReport {
        ParagraphReport {
            distinct_lines: self.seen.len() as u64,
            ..self.report.clone()
        }
    }

    /// Removes the lines of `text` seen before and remembers the others. Blank lines and
    /// lines with nothing left after normalization (a lone "•") stay, and count for nothing.
    pub fn apply(&mut self, text: &str) -> Deduped {
        let mut out = String::with_capacity(text.len());
        let (mut lines, mut removed) = (0, 0);
        for line in text.split('\n') {
            let norm = normalize(line);
            if !norm.is_empty() {
                lines += 1;
                if !self
                    .seen
                    .insert(xxhash_rust::xxh3::xxh3_64(norm.as_bytes()))
                {
                    removed += 1;
                    continue;
                }
            }
            let blank = line.trim().is_empty();
            // No blank line at the start, nor two in a row where the lines between went.
            if !blank || !(out.is_empty() || out.ends_with("\n\n")) {
                out.push_str(line);
                out.push('\n');
            }
        }
        let text = out.trim_end().to_string();
        self.report.lines_in += lines as u64;
        self.report.lines_removed += removed as u64;
        if removed > 0 {
            self.report.documents_changed += 1;
            if removed == lines {
                self.report.documents_emptied += 1;
            }
        }
        Deduped {
            text,
            lines,
            removed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_the_same_up_to_case_digits_punctuation_and_spaces() {
        assert_eq!(
            normalize("  Copyright © 2024,  ACME Inc. "),
            "copyright 0000 acme inc"
        );
        assert_eq!(
            normalize("Copyright 1999 acme inc"),
            "copyright 0000 acme inc"
        );
        assert_eq!(normalize("Über — Größe"), "über größe");
        assert_eq!(normalize("•  ·"), "");
    }

    #[test]
    fn a_line_is_kept_in_the_first_document_only() {
        let mut d = ParagraphDedup::default();
        let a = d.apply("Home | Docs\nThe first page says this.\n\nCopyright 2023 ACME");
        assert_eq!(a.removed, 0);
        assert_eq!(a.lines, 3);
        assert_eq!(
            a.text,
            "Home | Docs\nThe first page says this.\n\nCopyright 2023 ACME"
        );
        let b = d.apply("home docs\nThe second page says that.\nCopyright 2024 ACME\nThe second page says that.");
        assert_eq!((b.lines, b.removed), (4, 3));
        assert_eq!(b.text, "The second page says that.");
        let gap = d.apply("Intro here\n\nHome | Docs\n\nOutro here");
        assert_eq!(gap.text, "Intro here\n\nOutro here");
        let c = d.apply("Home | Docs\n\nCopyright 2025 ACME");
        assert_eq!((c.lines, c.removed), (2, 2));
        assert_eq!(c.text, "");
        assert_eq!(
            d.report(),
            ParagraphReport {
                lines_in: 12,
                lines_removed: 6,
                documents_changed: 3,
                documents_emptied: 1,
                distinct_lines: 6,
            }
        );
    }
}

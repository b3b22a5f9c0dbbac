//! The quality rules as FineWeb 2 tuned them for each language: thresholds and stop words
//! from its `configs/{iso3}_{script}.yml` (Apache-2.0, bundled as
//! `data/fineweb2-filters.json` by `scripts/fineweb2-filters.py`), for the 70 languages
//! trawl's language ID can name. The Gopher, C4 and FineWeb defaults were written for English:
//! on Chinese text the alphabetic-word ratio and the English stop words reject every page.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::quality::{FineWeb, GopherQuality, GopherRepetition, Tokenizer};

/// One language's settings, as FineWeb 2 publishes them.
#[derive(Debug, Clone, Deserialize)]
pub struct LanguageSettings {
    pub dup_line_frac: f64,
    pub dup_n_grams: Vec<(usize, f64)>,
    pub top_n_grams: Vec<(usize, f64)>,
    pub line_punct_thr: f64,
    pub new_line_ratio: f64,
    pub max_avg_word_length: f64,
    pub min_avg_word_length: f64,
    pub max_non_alpha_words_ratio: f64,
    pub stopwords: Vec<String>,
    /// GlotLID's confidence FineWeb 2 required; trawl's language ID (whatlang, or the
    /// archive's CLD2 label) scores differently, so it is reported, not applied.
    pub language_score: f64,
}

#[derive(Debug, Deserialize)]
struct Table {
    commit: String,
    languages: BTreeMap<String, BTreeMap<String, LanguageSettings>>,
}

const DATA: &str = include_str!("../data/fineweb2-filters.json");

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    // Bundled at build time and checked by a unit test: not outside data.
    TABLE.get_or_init(|| serde_json::from_str(DATA).expect("data/fineweb2-filters.json parses"))
}

/// The FineWeb 2 commit the settings come from.
pub fn source_commit() -> &'static str {
    &table().commit
}

/// FineWeb 2 files some languages under another code than whatlang or Common Crawl's labels
/// give: the individual language for a macro-language, CLD2's `zho` as Mandarin.
pub fn fineweb2_code(code: &str) -> &str {
    match code {
        "ara" => "arb",
        "aze" => "azj",
        "est" => "ekk",
        "lav" => "lvs",
        "nep" => "npi",
        "ori" => "ory",
        "pes" => "fas",
        "tgl" => "fil",
        "uzb" => "uzn",
        "yid" => "ydd",
        "zho" | "chi" => "cmn",
        "msa" | "may" => "zsm",
        "nor" => "nob",
        "swa" => "swh",
        c => c,
    }
}

/// The settings for a language written in a script: the language's own for that script, or
/// its only entry when the script is not known or has none (a Russian page mostly of Latin
/// menus is still Russian); `None` when FineWeb 2 has none.
pub fn settings(code: &str, script: Option<&str>) -> Option<&'static LanguageSettings> {
    let by_script = table().languages.get(fineweb2_code(code))?;
    // Japanese mixes kanji and kana: a page may read as Han script.
    let script = match (fineweb2_code(code), script) {
        ("jpn", Some("Hani" | "Jpan")) => Some("Jpan"),
        (_, s) => s,
    };
    let only = (by_script.len() == 1)
        .then(|| by_script.values().next())
        .flatten();
    script.and_then(|s| by_script.get(s)).or(only)
}

/// Scripts written without spaces between words, which need a dictionary segmenter.
pub fn tokenizer_for(script: Option<&str>) -> Tokenizer {
    match script {
        Some("Hani" | "Jpan" | "Thai" | "Khmr" | "Mymr") => Tokenizer::Segmented,
        _ => Tokenizer::Spaces,
    }
}

impl LanguageSettings {
    // Each takes the filter as configured and replaces what FineWeb 2 tunes per language, so
    // a setting of the user's that is not language-bound (a minimum length) still holds.

    /// Gopher repetition as FineWeb 2 runs it: line and n-gram thresholds per language, the
    /// paragraph and character fractions off (its extractor leaves few paragraphs).
    /// (Every field of it is tuned or turned off, so nothing of the configured one is kept.)
    pub fn gopher_repetition(&self, tokenizer: Tokenizer) -> GopherRepetition {
        GopherRepetition {
            dup_line_frac: self.dup_line_frac,
            dup_para_frac: 0.0,
            dup_line_char_frac: 0.0,
            dup_para_char_frac: 0.0,
            top_n_grams: self.top_n_grams.clone(),
            dup_n_grams: self.dup_n_grams.clone(),
            tokenizer,
        }
    }

    /// FineWeb quality as FineWeb 2 runs it: the short-line rule off, duplicated characters
    /// allowed up to 10%.
    pub fn fineweb(&self, base: &FineWeb, tokenizer: Tokenizer) -> FineWeb {
        FineWeb {
            line_punct_thr: self.line_punct_thr,
            short_line_thr: 999.0,
            char_duplicates_ratio: 0.1,
            new_line_ratio: self.new_line_ratio,
            tokenizer,
            ..base.clone()
        }
    }

    pub fn gopher_quality(&self, base: &GopherQuality, tokenizer: Tokenizer) -> GopherQuality {
        GopherQuality {
            min_avg_word_length: self.min_avg_word_length,
            max_avg_word_length: self.max_avg_word_length,
            max_non_alpha_words_ratio: self.max_non_alpha_words_ratio,
            stop_words: self.stopwords.clone(),
            tokenizer,
            ..base.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_table_covers_the_languages_of_the_sample() {
        assert_eq!(source_commit().len(), 40);
        for (code, script) in [
            ("cmn", "Hani"),
            ("zho", "Hani"),
            ("deu", "Latn"),
            ("nld", "Latn"),
            ("rus", "Cyrl"),
            ("spa", "Latn"),
            ("jpn", "Hani"),
            ("ara", "Arab"),
            ("tha", "Thai"),
        ] {
            let s = settings(code, Some(script)).unwrap_or_else(|| panic!("{code}_{script}"));
            assert!(s.stopwords.len() >= 5, "{code}");
            assert_eq!(s.dup_n_grams.len(), 6, "{code}");
        }
        // Russian in Latin letters gets the Russian settings; Serbian, written in both
        // scripts, gets the one its text is in; English has none (it keeps datatrove's).
        assert!(std::ptr::eq(
            settings("rus", Some("Latn")).unwrap(),
            settings("rus", Some("Cyrl")).unwrap()
        ));
        assert!(!std::ptr::eq(
            settings("srp", Some("Latn")).unwrap(),
            settings("srp", Some("Cyrl")).unwrap()
        ));
        assert!(settings("srp", Some("Arab")).is_none());
        assert!(settings("eng", Some("Latn")).is_none());
        assert!(settings("deu", None).is_some());
        assert_eq!(tokenizer_for(Some("Hani")), Tokenizer::Segmented);
        assert_eq!(tokenizer_for(Some("Cyrl")), Tokenizer::Spaces);
    }
}

//! The quality rules as FineWeb 2 tuned them for each language: thresholds and stop words
//! from its `configs/{iso3}_{script}.yml` (Apache-2.0, bundled as
//! `data/fineweb2-filters.json` by `scripts/fineweb2-filters.py`), for the 70 languages
//! trawl's language ID can name. The Gopher, C4 and FineWeb defaults were written for English:
//! on Chinese text the alphabetic-word ratio and the English stop words reject every page.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::quality::{
    Filters, FineWeb, GopherQuality, GopherRepetition, LanguageRules, QualityVerdict, Tokenizer,
};

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

impl Filters {
    fn enabled(&self) -> Vec<&'static str> {
        let mut on = Vec::new();
        if self.gopher_repetition.is_some() {
            on.push("gopher_repetition");
        }
        if self.gopher_quality.is_some() {
            on.push("gopher_quality");
        }
        if self.c4.is_some() {
            on.push("c4");
        }
        if self.fineweb.is_some() {
            on.push("fineweb");
        }
        on
    }

    /// The filters for a document in `language` (ISO 639-3) written in `script` (ISO
    /// 15924), and the filters that are on but do not run for it.
    pub fn for_language(
        &self,
        language: Option<&str>,
        script: Option<&str>,
    ) -> (std::borrow::Cow<'_, Filters>, Vec<&'static str>) {
        use std::borrow::Cow;
        if self.rules == LanguageRules::English || language == Some("eng") {
            return (Cow::Borrowed(self), Vec::new());
        }
        let Some(cfg) = language.and_then(|l| crate::language_rules::settings(l, script)) else {
            return (Cow::Owned(Filters::default()), self.enabled());
        };
        let tok = crate::language_rules::tokenizer_for(script);
        let local = Filters {
            gopher_quality: self
                .gopher_quality
                .as_ref()
                .map(|b| cfg.gopher_quality(b, tok)),
            gopher_repetition: self
                .gopher_repetition
                .as_ref()
                .map(|_| cfg.gopher_repetition(tok)),
            c4: None,
            fineweb: self.fineweb.as_ref().map(|b| cfg.fineweb(b, tok)),
            rules: self.rules,
        };
        let skipped = if self.c4.is_some() {
            vec!["c4"]
        } else {
            Vec::new()
        };
        (Cow::Owned(local), skipped)
    }

    /// Runs the filters that fit the document's language (see [`LanguageRules`]).
    pub fn check_in(
        &self,
        text: &str,
        language: Option<&str>,
        script: Option<&str>,
    ) -> QualityVerdict {
        let (filters, not_applied) = self.for_language(language, script);
        let mut v = filters.check(text);
        v.not_applied = not_applied;
        v
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

#[cfg(test)]
mod language_tests {
    use super::*;
    use crate::quality::{C4, GopherQuality};

    #[test]
    fn scripts_without_spaces_are_segmented_into_words() {
        let zh = "我们的城市在二〇二〇年有了新的公园，市民很喜欢。";
        let w = Tokenizer::Segmented.words(zh);
        // Whole-sentence tokens would make one word; single characters would make 24.
        assert!(w.len() > 8 && w.len() < 24, "{w:?}");
        assert!(w.contains(&"的") && w.contains(&"，"), "{w:?}");
        let th = Tokenizer::Segmented.words("ทุกสองสัปดาห์");
        assert_eq!(th.len(), 3, "{th:?}");
        assert_eq!(Tokenizer::Spaces.words(zh).len(), 1);
    }

    #[test]
    fn each_language_gets_its_own_rules() {
        let f = Filters::all();
        let (de, skipped) = f.for_language(Some("deu"), Some("Latn"));
        assert_eq!(skipped, vec!["c4"]);
        assert!(de.c4.is_none());
        let stop = &de.gopher_quality.as_ref().unwrap().stop_words;
        assert!(stop.iter().any(|w| w == "und"), "{stop:?}");
        let (en, skipped) = f.for_language(Some("eng"), Some("Latn"));
        assert!(skipped.is_empty() && en.c4.is_some());
        // No settings for the language: nothing runs, and all four are named.
        let (none, skipped) = f.for_language(Some("xyz"), Some("Latn"));
        assert!(none.gopher_quality.is_none() && skipped.len() == 4);
        // A filter turned off stays off in every language.
        let only_c4 = Filters {
            c4: Some(C4::default()),
            ..Filters::default()
        };
        let (zh, skipped) = only_c4.for_language(Some("cmn"), Some("Hani"));
        assert!(zh.gopher_quality.is_none() && zh.fineweb.is_none());
        assert_eq!(skipped, vec!["c4"]);
        // English rules everywhere: the old behaviour.
        let english = Filters {
            rules: LanguageRules::English,
            ..Filters::all()
        };
        assert!(english.for_language(Some("cmn"), Some("Hani")).1.is_empty());
        // A Chinese paragraph passes the Chinese Gopher rules and fails the English ones.
        let text = "我们的城市在二〇二〇年有了新的公园，市民很喜欢在那里散步。".repeat(6);
        let all = Filters::all();
        let zh_rules = all.for_language(Some("cmn"), Some("Hani")).0;
        let mut sig = Vec::new();
        let zq = zh_rules.gopher_quality.as_ref().unwrap();
        assert_eq!(zq.check(&text, &mut sig), Ok(()), "{sig:?}");
        // The English rules see one long "word" per sentence.
        let english = GopherQuality {
            min_doc_words: 1,
            ..GopherQuality::default()
        };
        assert_eq!(
            english.check(&text, &mut sig),
            Err("gopher_above_avg_threshold")
        );
    }
}

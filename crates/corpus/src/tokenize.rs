//! How the quality filters split a document into words: at spaces, or with ICU's word
//! segmenter for scripts written without them; split once per document.

use crate::quality::words;

/// How a filter splits text into words: at spaces (with punctuation split off, as datatrove's
/// English tokenizer does), or by ICU's word segmenter for scripts written without
/// spaces (Chinese, Japanese, Thai, Khmer, Burmese), as datatrove uses a language's own
/// tokenizer there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tokenizer {
    #[default]
    Spaces,
    Segmented,
}

impl Tokenizer {
    pub fn words(self, text: &str) -> Vec<&str> {
        match self {
            Tokenizer::Spaces => words(text),
            Tokenizer::Segmented => segmented_words(text),
        }
    }
}

/// A text's words, split once and shared by the filters that use the same tokenizer
/// (segmenting Chinese is the costly step, and three filters count words).
#[derive(Clone)]
pub struct Words<'a> {
    pub(crate) text: &'a str,
    tokenizer: Tokenizer,
    words: std::cell::OnceCell<Vec<&'a str>>,
}

impl<'a> Words<'a> {
    pub fn new(text: &'a str, tokenizer: Tokenizer) -> Self {
        Words {
            text,
            tokenizer,
            words: std::cell::OnceCell::new(),
        }
    }

    pub(crate) fn get(&self) -> &[&'a str] {
        self.words.get_or_init(|| self.tokenizer.words(self.text))
    }

    /// These words when they were split with `tokenizer`, or a split of their own.
    pub(crate) fn with(&self, tokenizer: Tokenizer) -> std::borrow::Cow<'_, Words<'a>> {
        if tokenizer == self.tokenizer {
            std::borrow::Cow::Borrowed(self)
        } else {
            std::borrow::Cow::Owned(Words::new(self.text, tokenizer))
        }
    }
}

/// ICU word segments, less the runs of white space between them; punctuation stays a token,
/// as in the space tokenizer.
fn segmented_words(text: &str) -> Vec<&str> {
    use icu_segmenter::WordSegmenter;
    use icu_segmenter::options::WordBreakInvariantOptions;
    let segmenter = WordSegmenter::new_auto(WordBreakInvariantOptions::default());
    let mut out = Vec::new();
    let mut last = 0;
    for b in segmenter.segment_str(text) {
        if b > last {
            let seg = &text[last..b];
            if !seg.trim().is_empty() {
                out.push(seg.trim());
            }
        }
        last = b;
    }
    out
}

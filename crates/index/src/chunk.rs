//! Heading-aware chunks of a page's Markdown, sized in the model's own word pieces.
//!
//! A page is cut into sections at its headings; a section's blocks (paragraphs, lists, code
//! fences, tables) are packed greedily into chunks that fit the window; a block too long
//! for one chunk is cut at a sentence end, else at a word start, found through the
//! tokenizer's offsets. Consecutive chunks of one section share `overlap` word pieces. The
//! heading path goes in front of the text that is embedded (it is what the passage is
//! about) and counts against the window.

use tokenizers::models::wordlevel::WordLevel;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{Encoding, Tokenizer};

use crate::IndexError;

#[derive(Debug, Clone)]
pub struct ChunkerConfig {
    /// Word pieces per chunk, heading context included. all-MiniLM-L6-v2 reads 256, of
    /// which `[CLS]` and `[SEP]` take two.
    pub max_tokens: usize,
    /// Word pieces repeated from the end of one chunk at the start of the next, within a
    /// section.
    pub overlap_tokens: usize,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        let s = trawl_core::settings::IndexSettings::default();
        Self {
            max_tokens: s.chunk_tokens as usize,
            overlap_tokens: s.chunk_overlap as usize,
        }
    }
}

/// One chunk of a page, before it has an id or a vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    /// The headings above the chunk, outermost first (the page title is not repeated).
    pub heading_path: Vec<String>,
    /// The chunk's own text (Markdown).
    pub text: String,
    /// What the model reads: the heading context, a blank line, then `text`.
    pub embed_text: String,
    /// Word pieces in `embed_text`, without `[CLS]`/`[SEP]`.
    pub tokens: usize,
}

pub struct Chunker {
    tokenizer: Tokenizer,
    cfg: ChunkerConfig,
}

struct Block<'a> {
    text: &'a str,
    enc: Encoding,
}

/// A run of word pieces `[start, end)` of one block.
#[derive(Clone, Copy)]
struct Piece {
    block: usize,
    start: usize,
    end: usize,
}

impl Chunker {
    /// `tokenizer` must be the embedding model's; its padding and truncation are turned off
    /// here, as chunks are counted whole.
    pub fn new(tokenizer: &Tokenizer, cfg: ChunkerConfig) -> Result<Self, IndexError> {
        if cfg.max_tokens < 16 {
            return Err(IndexError::Config(format!(
                "chunk size {} word pieces is too small (at least 16)",
                cfg.max_tokens
            )));
        }
        if cfg.overlap_tokens * 2 > cfg.max_tokens {
            return Err(IndexError::Config(format!(
                "chunk overlap {} must be at most half the chunk size {}",
                cfg.overlap_tokens, cfg.max_tokens
            )));
        }
        let mut tokenizer = tokenizer.clone();
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| IndexError::Tokenizer(e.to_string()))?;
        Ok(Self { tokenizer, cfg })
    }

    /// A chunker for indexes built without the model: words and punctuation marks stand in
    /// for word pieces (a word is one or more pieces, so chunks come out no larger).
    pub fn words(cfg: ChunkerConfig) -> Result<Self, IndexError> {
        let vocab = [("[UNK]".to_string(), 0u32)].into_iter().collect();
        let model = WordLevel::builder()
            .vocab(vocab)
            .unk_token("[UNK]".into())
            .build()
            .map_err(|e| IndexError::Tokenizer(e.to_string()))?;
        let mut tokenizer = Tokenizer::new(model);
        tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
        Self::new(&tokenizer, cfg)
    }

    pub fn config(&self) -> &ChunkerConfig {
        &self.cfg
    }

    fn encode(&self, text: &str) -> Result<Encoding, IndexError> {
        self.tokenizer
            .encode(text, false)
            .map_err(|e| IndexError::Tokenizer(e.to_string()))
    }

    /// Word pieces of `text` without the special tokens.
    pub fn count(&self, text: &str) -> Result<usize, IndexError> {
        Ok(self.encode(text)?.len())
    }

    /// Cuts a page into chunks. `title` is the page's title: a first heading equal to it is
    /// not repeated in the heading paths.
    pub fn chunk(&self, title: &str, markdown: &str) -> Result<Vec<Draft>, IndexError> {
        let mut out = Vec::new();
        for section in sections(markdown) {
            let mut path = section.path;
            if path.first().is_some_and(|h| same_heading(h, title)) {
                path.remove(0);
            }
            let blocks = section
                .blocks
                .iter()
                .map(|b| {
                    Ok(Block {
                        text: b,
                        enc: self.encode(b)?,
                    })
                })
                .collect::<Result<Vec<_>, IndexError>>()?;
            if blocks.iter().all(|b| b.enc.is_empty()) {
                continue;
            }
            let context = self.context(title, &path)?;
            let budget = self.cfg.max_tokens - context.1;
            self.pack(&blocks, budget, &path, &context.0, context.1, &mut out);
        }
        Ok(out)
    }

    /// The heading context put in front of each chunk of a section, and its word pieces.
    /// A context that would take more than a quarter of the window keeps its last heading
    /// only, then nothing.
    fn context(&self, title: &str, path: &[String]) -> Result<(String, usize), IndexError> {
        let mut parts: Vec<&str> = Vec::new();
        if !title.trim().is_empty() {
            parts.push(title.trim());
        }
        parts.extend(path.iter().map(String::as_str));
        let limit = self.cfg.max_tokens / 4;
        for candidate in [parts.join(" > "), path.last().cloned().unwrap_or_default()] {
            if candidate.is_empty() {
                continue;
            }
            let n = self.count(&candidate)?;
            if n <= limit {
                return Ok((candidate, n));
            }
        }
        Ok((String::new(), 0))
    }

    fn pack(
        &self,
        blocks: &[Block],
        budget: usize,
        path: &[String],
        context: &str,
        context_tokens: usize,
        out: &mut Vec<Draft>,
    ) {
        // Every block cut into pieces that fit a chunk on their own.
        let mut pieces = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            let n = b.enc.len();
            let mut start = 0;
            while start < n {
                let end = if n - start <= budget {
                    n
                } else {
                    cut_point(b, start, start + budget)
                };
                pieces.push(Piece {
                    block: i,
                    start,
                    end,
                });
                start = end;
            }
        }
        let mut current: Vec<Piece> = Vec::new();
        let mut used = 0;
        for p in pieces {
            let n = p.end - p.start;
            if !current.is_empty() && used + n > budget {
                let last = *current.last().expect("not empty");
                out.push(self.draft(blocks, &current, path, context, context_tokens + used));
                current.clear();
                used = 0;
                if let Some(o) = self.overlap(blocks, last, budget - n) {
                    used = o.end - o.start;
                    current.push(o);
                }
            }
            used += n;
            current.push(p);
        }
        if !current.is_empty() {
            out.push(self.draft(blocks, &current, path, context, context_tokens + used));
        }
    }

    /// The tail of `last` to repeat at the start of the next chunk: at most
    /// `overlap_tokens` (and at most `room`), starting at a sentence or word start.
    fn overlap(&self, blocks: &[Block], last: Piece, room: usize) -> Option<Piece> {
        let want = self.cfg.overlap_tokens.min(room);
        if want == 0 || last.end - last.start <= 1 {
            return None;
        }
        let b = &blocks[last.block];
        let earliest = last.end.saturating_sub(want).max(last.start + 1);
        let start = (earliest..last.end)
            .find(|&i| is_sentence_start(b, i))
            .or_else(|| (earliest..last.end).find(|&i| is_word_start(b, i)))?;
        Some(Piece {
            block: last.block,
            start,
            end: last.end,
        })
    }

    fn draft(
        &self,
        blocks: &[Block],
        pieces: &[Piece],
        path: &[String],
        context: &str,
        tokens: usize,
    ) -> Draft {
        let mut text = String::new();
        let mut prev_block = usize::MAX;
        for p in pieces {
            let b = &blocks[p.block];
            let offsets = b.enc.get_offsets();
            let from = offsets[p.start].0;
            let to = offsets[p.end - 1].1;
            if !text.is_empty() {
                text.push_str(if p.block == prev_block { " " } else { "\n\n" });
            }
            text.push_str(b.text[from..to].trim());
            prev_block = p.block;
        }
        let embed_text = if context.is_empty() {
            text.clone()
        } else {
            format!("{context}\n\n{text}")
        };
        Draft {
            heading_path: path.to_vec(),
            text,
            embed_text,
            tokens,
        }
    }
}

/// Where to end a piece of block `b` that starts at word piece `start` and may not pass
/// `limit`: after a sentence end in the last 40% of the window, else before a word start,
/// else at `limit`.
fn cut_point(b: &Block, start: usize, limit: usize) -> usize {
    let floor = start + (limit - start) * 3 / 5;
    if let Some(i) = (floor + 1..=limit).rev().find(|&i| is_sentence_start(b, i)) {
        return i;
    }
    if let Some(i) = (start + 1..=limit).rev().find(|&i| is_word_start(b, i)) {
        return i;
    }
    limit
}

/// Word piece `i` begins a new word: whitespace precedes it in the text.
fn is_word_start(b: &Block, i: usize) -> bool {
    let offsets = b.enc.get_offsets();
    let Some(&(from, _)) = offsets.get(i) else {
        return false;
    };
    from > 0
        && b.text[..from]
            .chars()
            .next_back()
            .is_some_and(char::is_whitespace)
}

/// Word piece `i` begins a word that follows a sentence end.
fn is_sentence_start(b: &Block, i: usize) -> bool {
    if i == 0 || !is_word_start(b, i) {
        return false;
    }
    let (from, to) = b.enc.get_offsets()[i - 1];
    matches!(&b.text[from..to], "." | "!" | "?" | ":" | ";")
}

fn same_heading(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    norm(a) == norm(b)
}

struct Section<'a> {
    path: Vec<String>,
    blocks: Vec<&'a str>,
}

/// Splits Markdown at ATX headings (outside code fences) into sections, each with its
/// heading path and its blocks (runs of lines between blank lines; a fence is one block).
fn sections(md: &str) -> Vec<Section<'_>> {
    let mut out = vec![Section {
        path: Vec::new(),
        blocks: Vec::new(),
    }];
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut fence: Option<&str> = None;
    let mut block_start: Option<usize> = None;
    let mut pos = 0;
    fn close<'a>(out: &mut [Section<'a>], start: &mut Option<usize>, end: usize, md: &'a str) {
        if let Some(s) = start.take() {
            let text = md[s..end].trim();
            if !text.is_empty()
                && let Some(last) = out.last_mut()
            {
                last.blocks.push(text);
            }
        }
    }
    for line in md.split_inclusive('\n') {
        let line_start = pos;
        pos += line.len();
        let trimmed = line.trim_start();
        if let Some(marker) = fence {
            if trimmed.starts_with(marker)
                && trimmed.trim_end().trim_start_matches(marker).is_empty()
            {
                fence = None;
                close(&mut out, &mut block_start, pos, md);
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            close(&mut out, &mut block_start, line_start, md);
            let marker = if trimmed.starts_with("```") {
                "```"
            } else {
                "~~~"
            };
            fence = Some(marker);
            block_start = Some(line_start);
            continue;
        }
        if let Some((level, heading)) = atx_heading(line) {
            close(&mut out, &mut block_start, line_start, md);
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            if !heading.is_empty() {
                stack.push((level, heading));
            }
            out.push(Section {
                path: stack.iter().map(|(_, h)| h.clone()).collect(),
                blocks: Vec::new(),
            });
            continue;
        }
        if line.trim().is_empty() {
            close(&mut out, &mut block_start, line_start, md);
        } else if block_start.is_none() {
            block_start = Some(line_start);
        }
    }
    close(&mut out, &mut block_start, md.len(), md);
    out.retain(|s| !s.blocks.is_empty());
    out
}

/// `## Heading` -> (2, "Heading"), with a closing run of `#` and Markdown emphasis and
/// link marks taken off.
fn atx_heading(line: &str) -> Option<(usize, String)> {
    let t = line.trim();
    let level = t.bytes().take_while(|&c| c == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim();
    Some((level, plain_heading(text)))
}

/// `[**Foo**](#foo)` -> `Foo`.
fn plain_heading(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' | '_' | '`' | '[' => {}
            ']' => {
                if chars.peek() == Some(&'(') {
                    for c in chars.by_ref() {
                        if c == ')' {
                            break;
                        }
                    }
                }
            }
            c => out.push(c),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn para(words: usize, tag: &str) -> String {
        let mut s = String::new();
        for i in 0..words {
            s.push_str(&format!("{tag}{i}"));
            s.push_str(if i % 12 == 11 { ". " } else { " " });
        }
        s.trim_end().to_string()
    }

    #[test]
    fn chunks_fit_the_window_and_overlap() {
        let c = Chunker::words(ChunkerConfig {
            max_tokens: 64,
            overlap_tokens: 8,
        })
        .unwrap();
        let md = format!(
            "# Guide\n\n## Install\n\n{}\n\n{}\n\n## Use\n\nShort.",
            para(150, "a"),
            para(20, "b")
        );
        let chunks = c.chunk("Guide", &md).unwrap();
        for ch in &chunks {
            assert!(ch.tokens <= 64, "{} tokens: {}", ch.tokens, ch.embed_text);
            assert_eq!(
                c.count(&ch.embed_text).unwrap(),
                ch.tokens,
                "counted as the model reads it"
            );
        }
        let install: Vec<_> = chunks
            .iter()
            .filter(|c| c.heading_path == ["Install"])
            .collect();
        assert!(install.len() >= 4, "{} chunks", install.len());
        assert!(install[0].embed_text.starts_with("Guide > Install\n\n"));
        // Consecutive chunks of a section share words, cut at a sentence end when possible.
        for w in install.windows(2) {
            let first_word = w[1].text.split_whitespace().next().unwrap();
            assert!(
                w[0].text.contains(first_word),
                "no overlap between {:?} and {:?}",
                w[0].text,
                w[1].text
            );
        }
        // Every word of the section is in some chunk.
        for i in 0..150 {
            let w = format!("a{i}");
            assert!(
                install.iter().any(|c| c
                    .text
                    .split(|ch: char| !ch.is_alphanumeric())
                    .any(|x| x == w)),
                "{w} lost"
            );
        }
        let last = chunks.last().unwrap();
        assert_eq!(last.heading_path, ["Use"]);
        assert_eq!(last.text, "Short.");
    }

    #[test]
    fn sections_follow_headings_outside_fences() {
        let md = "Intro line.\n\n# Title\n\nPara one\nstill one.\n\n## Sub\n\n```rust\n# not a heading\n\nfn x() {}\n```\n\n### Deep\ntext\n## Other\n\nlast";
        let s = sections(md);
        let paths: Vec<_> = s.iter().map(|s| s.path.join("/")).collect();
        assert_eq!(
            paths,
            ["", "Title", "Title/Sub", "Title/Sub/Deep", "Title/Other"]
        );
        assert_eq!(s[1].blocks, ["Para one\nstill one."]);
        assert_eq!(s[2].blocks, ["```rust\n# not a heading\n\nfn x() {}\n```"]);
        assert_eq!(s[4].blocks, ["last"]);
    }

    #[test]
    fn headings_lose_markup() {
        assert_eq!(
            atx_heading("## [**Foo** `bar`](#foo) ##\n"),
            Some((2, "Foo bar".to_string()))
        );
        assert_eq!(atx_heading("#hashtag"), None);
        assert_eq!(atx_heading("####### seven"), None);
    }
}

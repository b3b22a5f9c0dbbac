//! Where programs come from: a model in process (candle: Qwen3 safetensors, GGUF Qwen3 or
//! Llama, CPU by default, CUDA behind the `cuda` feature) or served over an
//! OpenAI-compatible API (vLLM, SGLang, llama.cpp's server), which is how refinement runs
//! on GPUs at scale.

pub mod candle;
pub mod openai;

use crate::program::Generation;

/// ReScraper's defaults (`inference/infer_pool.py`).
pub const MAX_NEW_TOKENS: usize = 3072;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    Greedy,
    /// Sampling over the whole distribution (top-p 1), as ReScraper ran it.
    Temperature(f64),
}

/// One page for the model.
#[derive(Debug, Clone)]
pub struct Request {
    /// The checkpoint's system prompt (the user gives its file).
    pub system: String,
    /// The numbered lines (`<lid:N> ...`).
    pub page: String,
    /// Fixed per page (a hash of its URL), so a run can be repeated.
    pub seed: u64,
    pub max_new_tokens: usize,
    pub sampling: Sampling,
}

#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub generation: Generation,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Time spent on the prompt and on new tokens (in process only).
    pub prefill_s: f64,
    pub decode_s: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The prompt and the token budget do not fit the model's context: the page is skipped.
    #[error(
        "the prompt is {prompt} tokens; with {max_new} new tokens it exceeds the context of {limit}"
    )]
    TooLong {
        prompt: usize,
        max_new: usize,
        limit: usize,
    },
    #[error("model: {0}")]
    Model(String),
    #[error("server answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("request failed after {attempts} attempts: {message}")]
    Unreachable { attempts: u32, message: String },
    #[error("bad response: {0}")]
    BadResponse(String),
}

impl BackendError {
    /// A page-level failure (the page is recorded and the run goes on), not a broken backend.
    pub fn is_page_error(&self) -> bool {
        matches!(
            self,
            BackendError::TooLong { .. }
                | BackendError::Status {
                    status: 400..=499,
                    ..
                }
        )
    }
}

pub trait Backend: Send + Sync {
    /// What the report calls it (`candle:<file>`, `openai:<model>`).
    fn name(&self) -> String;
    fn generate(&self, req: &Request) -> Result<Reply, BackendError>;
}

/// The user turn and the system prompt in ChatML, as Qwen3's template writes them with
/// `enable_thinking=False` (an empty think block opening the answer) or as plain ChatML.
pub fn chatml(system: &str, page: &str, empty_think: bool) -> String {
    let page = defuse(page);
    let page = page.as_str();
    let mut s = String::with_capacity(system.len() + page.len() + 96);
    s.push_str("<|im_start|>system\n");
    s.push_str(system);
    s.push_str("<|im_end|>\n<|im_start|>user\n");
    s.push_str(page);
    s.push_str("<|im_end|>\n<|im_start|>assistant\n");
    if empty_think {
        s.push_str("<think>\n\n</think>\n\n");
    }
    s
}

/// Page text cannot open or close a chat turn: the tokenizer reads `<|im_end|>` in text as
/// the special token, so a page could write its own assistant turn.
pub fn defuse(text: &str) -> String {
    if !text.contains("<|") {
        return text.to_string();
    }
    text.replace("<|", "<\u{200b}|")
}

/// A page's seed: FNV-1a of its URL, so reruns sample the same programs.
pub fn seed_for(url: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in url.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

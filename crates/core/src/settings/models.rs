//! The settings of the models a process calls: the refiner's engine ([`RefineSettings`])
//! and the API's language model ([`LlmSettings`]). Each process has its own (its GPU, its
//! server): not part of the crawl spec.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{SettingsError, redact_url};

/// How a refiner writes its programs: trawl's extractor (`extract`, no model), a model in
/// process (`candle`) or an OpenAI-compatible server (`openai`). Each refiner process has
/// its own (its GPU, its server): not part of the crawl spec.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RefineSettings {
    /// Who writes the edit programs: `extract`, `candle` or `openai`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "ENGINE"))]
    pub refine_engine: String,
    /// candle: a .gguf file (Qwen3 or Llama architecture) or a Qwen3 safetensors directory.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PATH"))]
    pub refine_model: Option<PathBuf>,
    /// openai: the server's base URL (`http://host:8000/v1`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "URL"))]
    pub refine_endpoint: Option<String>,
    /// openai: the served model's name.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME"))]
    pub refine_served_model: String,
    /// openai: the server's API key; better given as `TRAWL_REFINE_API_KEY`.
    #[cfg_attr(feature = "cli", arg(long, hide = true))]
    pub refine_api_key: Option<String>,
    /// The checkpoint's system prompt, a text file (needed with a model).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub refine_system_prompt: Option<PathBuf>,
    /// Tokens a program may take.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub refine_max_new_tokens: usize,
    /// Sampling temperature (0: greedy), seeded per page by its URL.
    #[cfg_attr(feature = "cli", arg(long, value_name = "T"))]
    pub refine_temperature: f64,
    /// The context length pages must fit in with their token budget (0: the model's own;
    /// openai: no check).
    #[cfg_attr(feature = "cli", arg(long, value_name = "TOKENS"))]
    pub refine_context_length: usize,
    /// Pages refined at once by this process (0: the cores for extract, 1 for candle, 8
    /// for openai).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub refine_concurrency: usize,
    /// openai: retries of one request on connection errors, 429 and 5xx.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub refine_retries: u32,
    /// openai: seconds one request may take.
    #[cfg_attr(feature = "cli", arg(long, value_name = "S"))]
    pub refine_timeout_s: u64,
    /// Pages with more markup than this are recorded as skipped (`too_large`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "BYTES"))]
    pub refine_max_html_bytes: usize,
}

impl Default for RefineSettings {
    fn default() -> Self {
        RefineSettings {
            refine_engine: "extract".into(),
            refine_model: None,
            refine_endpoint: None,
            refine_served_model: "default".into(),
            refine_api_key: None,
            refine_system_prompt: None,
            refine_max_new_tokens: 3072,
            refine_temperature: 1.0,
            refine_context_length: 0,
            refine_concurrency: 0,
            refine_retries: 3,
            refine_timeout_s: 600,
            refine_max_html_bytes: 8 << 20,
        }
    }
}

/// The API key stays out of logs.
impl std::fmt::Debug for RefineSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefineSettings")
            .field("refine_engine", &self.refine_engine)
            .field("refine_model", &self.refine_model)
            .field(
                "refine_endpoint",
                &self.refine_endpoint.as_deref().map(redact_url),
            )
            .field("refine_served_model", &self.refine_served_model)
            .field(
                "refine_api_key",
                &self.refine_api_key.as_ref().map(|_| "<hidden>"),
            )
            .field("refine_system_prompt", &self.refine_system_prompt)
            .field("refine_max_new_tokens", &self.refine_max_new_tokens)
            .field("refine_temperature", &self.refine_temperature)
            .field("refine_context_length", &self.refine_context_length)
            .field("refine_concurrency", &self.refine_concurrency)
            .field("refine_retries", &self.refine_retries)
            .field("refine_timeout_s", &self.refine_timeout_s)
            .field("refine_max_html_bytes", &self.refine_max_html_bytes)
            .finish()
    }
}

impl RefineSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        if !["extract", "candle", "openai"].contains(&self.refine_engine.as_str()) {
            return Err(SettingsError::Invalid(format!(
                "refine_engine must be extract, candle or openai (got {:?})",
                self.refine_engine
            )));
        }
        if !(self.refine_temperature.is_finite() && self.refine_temperature >= 0.0) {
            return Err(SettingsError::Invalid(
                "refine_temperature must be 0 or more".into(),
            ));
        }
        Ok(())
    }
}

/// The language model `trawl serve`'s LLM formats call (`json`, `summary`,
/// `/v2/extract`): any OpenAI-compatible chat completions server (vLLM, llama.cpp's
/// server, Ollama, OpenAI). Each server process has its own: not part of the crawl spec.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct LlmSettings {
    /// The server's base URL (`http://127.0.0.1:8080/v1`); none: the LLM formats answer
    /// with an error saying to set it.
    #[cfg_attr(feature = "cli", arg(long, value_name = "URL"))]
    pub llm_endpoint: Option<String>,
    /// The served model's name.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME"))]
    pub llm_model: String,
    /// The server's API key; better given as `TRAWL_LLM_API_KEY`.
    #[cfg_attr(feature = "cli", arg(long, hide = true))]
    pub llm_api_key: Option<String>,
    /// The model's context in tokens: a page's Markdown is cut to fit it with the prompt
    /// and the answer.
    #[cfg_attr(feature = "cli", arg(long, value_name = "TOKENS"))]
    pub llm_context_tokens: usize,
    /// Tokens an answer may take.
    #[cfg_attr(feature = "cli", arg(long, value_name = "TOKENS"))]
    pub llm_max_tokens: usize,
    /// Seconds one request to the server may take.
    #[cfg_attr(feature = "cli", arg(long, value_name = "S"))]
    pub llm_timeout_s: u64,
    /// Retries of one request on connection errors, 429 and 5xx.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub llm_retries: u32,
}

impl Default for LlmSettings {
    fn default() -> Self {
        LlmSettings {
            llm_endpoint: None,
            llm_model: "default".into(),
            llm_api_key: None,
            llm_context_tokens: 8192,
            llm_max_tokens: 1024,
            llm_timeout_s: 120,
            llm_retries: 2,
        }
    }
}

/// The API key stays out of logs.
impl std::fmt::Debug for LlmSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSettings")
            .field(
                "llm_endpoint",
                &self.llm_endpoint.as_deref().map(redact_url),
            )
            .field("llm_model", &self.llm_model)
            .field(
                "llm_api_key",
                &self.llm_api_key.as_ref().map(|_| "<hidden>"),
            )
            .field("llm_context_tokens", &self.llm_context_tokens)
            .field("llm_max_tokens", &self.llm_max_tokens)
            .field("llm_timeout_s", &self.llm_timeout_s)
            .field("llm_retries", &self.llm_retries)
            .finish()
    }
}

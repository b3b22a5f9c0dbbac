//! The LLM formats (`json`, `summary`) and `/v2/extract`, over any OpenAI-compatible chat
//! completions server, through the refiner's client (retries, timeouts, the server's own
//! tokenizer). A page's Markdown is cut to the model's context; the answer is asked for
//! under the schema (`response_format`, in the first form the server takes) and checked
//! against it: an answer that does not fit is an error naming the field, never data.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use trawl_core::settings::LlmSettings;
use trawl_refine::backend::BackendError;
use trawl_refine::backend::openai::{Chat, OpenAi, OpenAiConfig};

use super::api::{ApiError, JsonFormat};

/// The forms of `response_format` tried in turn, the first the server takes kept.
const FORMS: [&str; 3] = ["json_schema", "json_object_schema", "none"];

/// Tokens kept free for the chat template and the separators.
const TEMPLATE_TOKENS: usize = 64;

/// Characters a token holds at least, for a cut made without the server's tokenizer.
const CHARS_PER_TOKEN: usize = 3;

const SUMMARY_SYSTEM: &str = "You summarize web pages. Write a concise summary of the page \
    the user gives, in three to five sentences, in the page's own language. Say only what the \
    page says.";

const JSON_SYSTEM: &str = "You extract structured data from web pages. Answer with one JSON \
    object and nothing else. Use only facts the page states; where the page does not say, \
    use null or leave the field out. Never invent values.";

/// The server the LLM formats call.
pub struct Llm {
    /// Made on first use, on a blocking thread: reqwest's blocking client cannot be made
    /// on the async threads.
    client: std::sync::OnceLock<Result<OpenAi, String>>,
    cfg: OpenAiConfig,
    s: LlmSettings,
    /// The index in [`FORMS`] of the form the server took, plus one (0: not known yet).
    form: AtomicU8,
}

/// The answer to a request for an LLM format when no model is configured.
pub fn unconfigured() -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        Some("LLM_NOT_CONFIGURED"),
        "the json and summary formats and /v2/extract need a language model: set llm_endpoint \
         (TRAWL_LLM_ENDPOINT, or --llm-endpoint of trawl serve) to an OpenAI-compatible server \
         (vLLM, llama.cpp's server, Ollama, OpenAI), with llm_model and llm_api_key as it needs",
    )
}

/// A schema the request gives is a JSON Schema (a 400 naming what is wrong, else). No
/// remote `$ref` is followed: the validator has no resolver but the schema itself.
pub fn check_schema(schema: &Value) -> Result<(), ApiError> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err(ApiError::bad_request(
            "Bad Request: the json format's schema must be a JSON Schema object",
        ));
    }
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| ApiError::bad_request(format!("Bad Request: the schema is not valid: {e}")))
}

impl Llm {
    /// The configured server's client; `None` without an endpoint.
    pub fn new(s: &LlmSettings) -> anyhow::Result<Option<Self>> {
        let Some(endpoint) = s.llm_endpoint.clone().filter(|e| !e.trim().is_empty()) else {
            return Ok(None);
        };
        url::Url::parse(endpoint.trim())
            .map_err(|e| anyhow::anyhow!("llm_endpoint {endpoint:?} is not a URL: {e}"))?;
        let cfg = OpenAiConfig {
            base_url: endpoint,
            model: s.llm_model.clone(),
            api_key: s.llm_api_key.clone(),
            timeout: Duration::from_secs(s.llm_timeout_s.max(1)),
            retries: s.llm_retries,
            context_length: None,
        };
        Ok(Some(Llm {
            client: std::sync::OnceLock::new(),
            cfg,
            s: s.clone(),
            form: AtomicU8::new(0),
        }))
    }

    fn client(&self) -> Result<&OpenAi, ApiError> {
        self.client
            .get_or_init(|| OpenAi::new(self.cfg.clone()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| ApiError::internal(format!("the language model client: {e}")))
    }

    /// The page summed up (blocking: call it off the async threads).
    pub fn summary(&self, url: &str, markdown: &str) -> Result<String, ApiError> {
        let user = self.fit(SUMMARY_SYSTEM, &format!("Page: {url}\n\n"), markdown, "")?;
        let r = self.ask(SUMMARY_SYSTEM, user, None)?;
        Ok(r.trim().to_string())
    }

    /// The pages read into `f`'s schema or prompt, checked against the schema (blocking).
    pub fn json(&self, sources: &str, markdown: &str, f: &JsonFormat) -> Result<Value, ApiError> {
        let mut system = JSON_SYSTEM.to_string();
        if let Some(s) = &f.schema {
            system.push_str("\n\nThe object must fit this JSON Schema:\n");
            system.push_str(&s.to_string());
        }
        let task = match &f.prompt {
            Some(p) => format!("\n\n---\nTask: {p}"),
            None => "\n\n---\nTask: extract the data the schema describes.".into(),
        };
        let user = self.fit(&system, &format!("Source: {sources}\n\n"), markdown, &task)?;
        let text = self.ask(&system, user, Some(f.schema.as_ref()))?;
        let v = parse_object(&text)?;
        if let Some(schema) = &f.schema {
            fits(schema, &v)?;
        }
        Ok(v)
    }

    /// One completion: with the schema in the first `response_format` form the server
    /// takes (`Some(None)`: any JSON object), or plain text (`None`).
    fn ask(
        &self,
        system: &str,
        user: String,
        json: Option<Option<&Value>>,
    ) -> Result<String, ApiError> {
        let first = match json {
            None => FORMS.len() - 1,
            Some(_) => usize::from(self.form.load(Ordering::Relaxed).saturating_sub(1)),
        };
        let mut last = None;
        for (i, form) in FORMS.iter().enumerate().skip(first) {
            let response_format = json.and_then(|schema| response_format(form, schema));
            let chat = Chat {
                system: system.to_string(),
                user: user.clone(),
                max_tokens: self.s.llm_max_tokens.max(16),
                response_format,
            };
            match self.client()?.chat(&chat) {
                Ok(r) => {
                    if json.is_some() {
                        self.form.store(i as u8 + 1, Ordering::Relaxed);
                    }
                    if r.truncated {
                        return Err(invalid(format!(
                            "the model's answer was cut at llm_max_tokens ({}): raise it",
                            self.s.llm_max_tokens
                        )));
                    }
                    return Ok(r.text);
                }
                // A server that does not take this form says so with a 4xx, or (as
                // llama-cpp-python does) with a 500 naming the field: the next form.
                Err(e) if json.is_some() && not_taken(&e) => {
                    tracing::debug!(form, error = %e, "response_format not taken");
                    last = Some(e);
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
        Err(unavailable(last.unwrap_or(BackendError::BadResponse(
            "no response format was taken".into(),
        ))))
    }

    /// `head` + `markdown` + `tail`, the Markdown cut so that the prompt and the answer fit
    /// the model's context (counted by the server's tokenizer where it has one).
    fn fit(
        &self,
        system: &str,
        head: &str,
        markdown: &str,
        tail: &str,
    ) -> Result<String, ApiError> {
        let client = self.client()?;
        let ctx = self.s.llm_context_tokens.max(256);
        let fixed_text = format!("{system}{head}{tail}");
        let fixed = client
            .tokens(&fixed_text)
            .unwrap_or(fixed_text.len() / CHARS_PER_TOKEN + 1);
        let budget = ctx
            .saturating_sub(self.s.llm_max_tokens + TEMPLATE_TOKENS + fixed)
            .max(32);
        let mut page = cut(markdown, budget * 4);
        for _ in 0..4 {
            let Some(n) = client.tokens(page) else {
                page = cut(page, budget * CHARS_PER_TOKEN);
                break;
            };
            if n <= budget {
                break;
            }
            let keep = (page.len() as f64 * budget as f64 / n as f64 * 0.95) as usize;
            page = cut(page, keep);
        }
        Ok(format!("{head}{page}{tail}"))
    }
}

/// The server refused the request's `response_format`, not the request.
/// (A 4xx that does not name it, a key refused, is the request's own error.)
fn not_taken(e: &BackendError) -> bool {
    match e {
        BackendError::Status { message, .. } | BackendError::Unreachable { message, .. } => {
            message.contains("response_format") || message.contains("json_schema")
        }
        _ => false,
    }
}

/// `s` cut to at most `bytes`, on a character boundary.
fn cut(s: &str, bytes: usize) -> &str {
    if s.len() <= bytes {
        return s;
    }
    let mut end = bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn response_format(form: &str, schema: Option<&Value>) -> Option<Value> {
    match (form, schema) {
        ("json_schema", Some(s)) => Some(json!({
            "type": "json_schema",
            "json_schema": {"name": "extract", "schema": s, "strict": true},
        })),
        ("json_schema", None) => Some(json!({"type": "json_object"})),
        ("json_object_schema", Some(s)) => Some(json!({"type": "json_object", "schema": s})),
        ("json_object_schema", None) => Some(json!({"type": "json_object"})),
        _ => None,
    }
}

fn invalid(msg: String) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("LLM_OUTPUT_INVALID"),
        msg,
    )
}

fn unavailable(e: BackendError) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        Some("LLM_UNAVAILABLE"),
        format!("the language model server failed: {e}"),
    )
}

/// The answer's JSON object: the whole text, or the object in it (a fenced block, a
/// sentence around it).
fn parse_object(text: &str) -> Result<Value, ApiError> {
    let t = text.trim();
    let candidates = [
        Some(t),
        t.find('{')
            .zip(t.rfind('}'))
            .filter(|(a, b)| a < b)
            .map(|(a, b)| &t[a..=b]),
    ];
    for c in candidates.into_iter().flatten() {
        if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(c) {
            return Ok(v);
        }
    }
    let shown: String = t.chars().take(200).collect();
    Err(invalid(format!(
        "the model's answer is not a JSON object: {shown:?}"
    )))
}

/// `v` fits `schema`, or an error naming each field that does not (the first five).
fn fits(schema: &Value, v: &Value) -> Result<(), ApiError> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| ApiError::bad_request(format!("Bad Request: the schema is not valid: {e}")))?;
    let errors: Vec<String> = validator
        .iter_errors(v)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            format!("{at}: {e}")
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "the model's answer does not fit the schema: {}",
        errors.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_objects_and_checked_against_the_schema() {
        let schema = json!({"type": "object", "properties": {"price": {"type": "number"}},
            "required": ["price"]});
        let v = parse_object("Here it is:\n```json\n{\"price\": 3.5}\n```").unwrap();
        assert!(fits(&schema, &v).is_ok());
        let e = fits(&schema, &json!({"price": "cheap"})).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(e.message.contains("/price"), "{}", e.message);
        let e = fits(&schema, &json!({})).unwrap_err();
        assert!(e.message.contains("price"), "{}", e.message);
        assert!(parse_object("no json here").is_err());
        assert!(parse_object("[1, 2]").is_err());
    }

    #[test]
    fn schemas_are_checked_before_any_call() {
        assert!(check_schema(&json!({"type": "object"})).is_ok());
        assert!(check_schema(&json!({"type": "objekt"})).is_err());
        assert!(check_schema(&json!("string")).is_err());
        // A remote reference is never fetched: the schema is refused.
        assert!(check_schema(&json!({"$ref": "http://127.0.0.1:9/s.json"})).is_err());
    }

    #[test]
    fn only_a_refused_response_format_tries_the_next_form() {
        let llama = BackendError::Unreachable {
            attempts: 3,
            message: "500: {'loc': ('body', 'response_format', 'type')}".into(),
        };
        assert!(not_taken(&llama));
        let key = BackendError::Status {
            status: 401,
            message: "invalid api key".into(),
        };
        assert!(!not_taken(&key));
    }

    #[test]
    fn cuts_keep_characters_whole() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 10), "abc");
    }

    #[test]
    fn no_endpoint_no_client() {
        assert!(Llm::new(&LlmSettings::default()).unwrap().is_none());
        assert_eq!(unconfigured().code, Some("LLM_NOT_CONFIGURED"));
    }
}

//! An OpenAI-compatible chat completions client (vLLM, SGLang, llama.cpp's server): retries
//! with backoff on connection errors, 429 and 5xx; a per-request timeout; the context check
//! made with the server's own tokenizer before a page is sent, and a context overflow the
//! server reports read as one.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Backend, BackendError, Reply, Request, Sampling};
use crate::program::{Finish, Generation};

#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// `http://host:port` (with or without `/v1`).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub retries: u32,
    /// The served context length: pages that do not fit are skipped before sending.
    pub context_length: Option<usize>,
}

pub struct OpenAi {
    cfg: OpenAiConfig,
    root: String,
    http: reqwest::blocking::Client,
    /// The server has no tokenize endpoint: the context check is left to the server.
    no_tokenizer: AtomicBool,
    /// The system prompt's token count (the same on every page).
    system_tokens: Mutex<Option<(String, usize)>>,
}

impl OpenAi {
    pub fn new(cfg: OpenAiConfig) -> Result<OpenAi, BackendError> {
        let root = cfg
            .base_url
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .to_string();
        let http = reqwest::blocking::Client::builder()
            .timeout(cfg.timeout)
            .build()
            .map_err(|e| BackendError::Model(format!("HTTP client: {e}")))?;
        Ok(OpenAi {
            cfg,
            root,
            http,
            no_tokenizer: AtomicBool::new(false),
            system_tokens: Mutex::new(None),
        })
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, BackendError> {
        let url = format!("{}{path}", self.root);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut rq = self.http.post(&url).json(body);
            if let Some(k) = &self.cfg.api_key {
                rq = rq.bearer_auth(k);
            }
            let retry_msg = match rq.send() {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let text = resp.text().unwrap_or_default();
                    if (200..300).contains(&status) {
                        return serde_json::from_str(&text).map_err(|e| {
                            BackendError::BadResponse(format!("{e}: {}", clip(&text)))
                        });
                    }
                    let message = error_message(&text);
                    if status == 429 || status >= 500 {
                        format!("{status}: {message}")
                    } else {
                        return Err(BackendError::Status { status, message });
                    }
                }
                Err(e) => e.to_string(),
            };
            if attempt > self.cfg.retries {
                return Err(BackendError::Unreachable {
                    attempts: attempt,
                    message: retry_msg,
                });
            }
            std::thread::sleep(Duration::from_millis(200 * 2u64.pow(attempt.min(6))));
        }
    }

    /// Tokens in `text` by the server's tokenizer: vLLM's and llama.cpp's `/tokenize`, or
    /// llama-cpp-python's `/extras/tokenize/count`; `None` when the server has neither.
    fn count_tokens(&self, text: &str) -> Option<usize> {
        if self.no_tokenizer.load(Ordering::Relaxed) {
            return None;
        }
        let n = self.count_tokens_once(text);
        if n.is_none() {
            tracing::warn!(
                "{} has no tokenize endpoint: pages are sent without the context check",
                self.root
            );
            self.no_tokenizer.store(true, Ordering::Relaxed);
        }
        n
    }

    fn system_count(&self, system: &str) -> Option<usize> {
        if let Ok(g) = self.system_tokens.lock()
            && let Some((s, n)) = &*g
            && s == system
        {
            return Some(*n);
        }
        let n = self.count_tokens(system)?;
        if let Ok(mut g) = self.system_tokens.lock() {
            *g = Some((system.to_string(), n));
        }
        Some(n)
    }

    fn count_tokens_once(&self, text: &str) -> Option<usize> {
        let body =
            json!({"model": self.cfg.model, "prompt": text, "content": text, "add_special": false});
        if let Ok(v) = self.post_once("/tokenize", &body) {
            if let Some(n) = v["count"].as_u64() {
                return Some(n as usize);
            }
            if let Some(t) = v["tokens"].as_array() {
                return Some(t.len());
            }
        }
        let v = self
            .post_once(
                "/extras/tokenize/count",
                &json!({"input": text, "model": self.cfg.model}),
            )
            .ok()?;
        v["count"].as_u64().map(|n| n as usize)
    }

    fn post_once(&self, path: &str, body: &Value) -> Result<Value, ()> {
        let resp = self
            .http
            .post(format!("{}{path}", self.root))
            .json(body)
            .send()
            .map_err(|_| ())?;
        if !resp.status().is_success() {
            return Err(());
        }
        resp.json().map_err(|_| ())
    }
}

/// One chat completion for callers other than the refiner (the API's LLM formats).
#[derive(Debug, Clone)]
pub struct Chat {
    pub system: String,
    pub user: String,
    pub max_tokens: usize,
    /// OpenAI's `response_format` (`{"type":"json_schema",...}`), passed as given.
    pub response_format: Option<Value>,
}

/// A chat completion's answer.
#[derive(Debug, Clone)]
pub struct ChatReply {
    pub text: String,
    /// Cut at `max_tokens`.
    pub truncated: bool,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

impl OpenAi {
    /// Sends `chat` greedily (temperature 0), retried as every request is.
    pub fn chat(&self, chat: &Chat) -> Result<ChatReply, BackendError> {
        let mut body = json!({
            "model": self.cfg.model,
            "messages": [
                {"role": "system", "content": chat.system},
                {"role": "user", "content": chat.user},
            ],
            "temperature": 0.0,
            "max_tokens": chat.max_tokens,
            "n": 1,
        });
        if let Some(f) = &chat.response_format {
            body["response_format"] = f.clone();
        }
        let v = self.post("/v1/chat/completions", &body)?;
        let choice = &v["choices"][0];
        let text = choice["message"]["content"].as_str().ok_or_else(|| {
            BackendError::BadResponse(format!(
                "no choices[0].message.content: {}",
                clip(&v.to_string())
            ))
        })?;
        Ok(ChatReply {
            text: text.to_string(),
            truncated: choice["finish_reason"].as_str() == Some("length"),
            prompt_tokens: v["usage"]["prompt_tokens"].as_u64().unwrap_or(0) as usize,
            completion_tokens: v["usage"]["completion_tokens"].as_u64().unwrap_or(0) as usize,
        })
    }

    /// Tokens in `text` by the server's own tokenizer; `None` when it has no tokenize
    /// endpoint.
    pub fn tokens(&self, text: &str) -> Option<usize> {
        self.count_tokens(text)
    }
}

fn clip(s: &str) -> String {
    s.chars().take(300).collect()
}

/// `{"error": {"message"}}` (OpenAI, vLLM), `{"message"}` (older vLLM), or the body.
fn error_message(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    v["error"]["message"]
        .as_str()
        .or_else(|| v["message"].as_str())
        .or_else(|| v["error"].as_str())
        .or_else(|| v["detail"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| clip(body))
}

/// "This model's maximum context length is N tokens": the server's own overflow report.
fn context_overflow(message: &str) -> Option<usize> {
    let m = message.to_lowercase();
    let at = m
        .find("context length is ")
        .map(|i| i + "context length is ".len())
        .or_else(|| {
            m.find("context window of ")
                .map(|i| i + "context window of ".len())
        })?;
    m[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

impl Backend for OpenAi {
    fn name(&self) -> String {
        format!("openai:{}", self.cfg.model)
    }

    fn generate(&self, req: &Request) -> Result<Reply, BackendError> {
        let mut prompt_tokens = 0;
        if let Some(limit) = self.cfg.context_length
            && let Some(a) = self.system_count(&req.system)
            && let Some(b) = self.count_tokens(&req.page)
        {
            // The chat template adds a few tokens around the two turns.
            prompt_tokens = a + b + 16;
            if prompt_tokens + req.max_new_tokens > limit {
                return Err(BackendError::TooLong {
                    prompt: prompt_tokens,
                    max_new: req.max_new_tokens,
                    limit,
                });
            }
        }
        let temperature = match req.sampling {
            Sampling::Greedy => 0.0,
            Sampling::Temperature(t) => t,
        };
        let body = json!({
            "model": self.cfg.model,
            "messages": [
                {"role": "system", "content": req.system},
                {"role": "user", "content": req.page},
            ],
            "temperature": temperature,
            "top_p": 1.0,
            "max_tokens": req.max_new_tokens,
            "seed": req.seed % (1 << 53),
            "n": 1,
            "chat_template_kwargs": {"enable_thinking": false},
            "skip_special_tokens": true,
        });
        let v = self
            .post("/v1/chat/completions", &body)
            .map_err(|e| match e {
                BackendError::Status {
                    status: 400,
                    message,
                } => match context_overflow(&message) {
                    Some(limit) => BackendError::TooLong {
                        prompt: prompt_tokens,
                        max_new: req.max_new_tokens,
                        limit,
                    },
                    None => BackendError::Status {
                        status: 400,
                        message,
                    },
                },
                other => other,
            })?;
        let choice = &v["choices"][0];
        let text = choice["message"]["content"]
            .as_str()
            .ok_or_else(|| {
                BackendError::BadResponse(format!(
                    "no choices[0].message.content: {}",
                    clip(&v.to_string())
                ))
            })?
            .to_string();
        let finish = match choice["finish_reason"].as_str() {
            Some("length") => Finish::Length,
            _ => Finish::Stop,
        };
        Ok(Reply {
            generation: Generation { text, finish },
            prompt_tokens: v["usage"]["prompt_tokens"]
                .as_u64()
                .map_or(prompt_tokens, |n| n as usize),
            completion_tokens: v["usage"]["completion_tokens"].as_u64().unwrap_or(0) as usize,
            prefill_s: 0.0,
            decode_s: 0.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_the_servers_are_read() {
        let vllm = r#"{"error":{"message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.","type":"BadRequestError","param":null,"code":400}}"#;
        assert_eq!(context_overflow(&error_message(vllm)), Some(32768));
        assert_eq!(
            error_message(r#"{"object":"error","message":"bad"}"#),
            "bad"
        );
        assert_eq!(error_message("plain"), "plain");
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
        assert_eq!(context_overflow(&error_message(llama)), None);
    }
}

//! The engine a refiner runs, from its [`RefineSettings`]: checked and loaded once, before
//! the stage takes a page, so a missing model or prompt is an error at start-up.

use std::sync::Arc;
use std::time::Duration;

use trawl_core::settings::RefineSettings;
use trawl_refine::backend::candle::Candle;
use trawl_refine::backend::openai::{OpenAi, OpenAiConfig};
use trawl_refine::backend::{Backend, BackendError, Sampling};
use trawl_refine::page::Engine;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("refine_engine {engine} needs {setting} (TRAWL_{env})")]
    Missing {
        engine: &'static str,
        setting: &'static str,
        env: String,
    },
    #[error("reading the system prompt {path}: {source}")]
    SystemPrompt {
        path: String,
        source: std::io::Error,
    },
    #[error("refine_engine {0:?}: not extract, candle or openai")]
    Unknown(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

fn missing(engine: &'static str, setting: &'static str) -> EngineError {
    EngineError::Missing {
        engine,
        setting,
        env: setting.to_ascii_uppercase(),
    }
}

/// What [`build`] needs, checked without loading anything: the model file and the system
/// prompt are there, the endpoint given.
pub fn check(s: &RefineSettings) -> Result<(), EngineError> {
    let prompt = |engine| {
        let p = s
            .refine_system_prompt
            .as_ref()
            .ok_or_else(|| missing(engine, "refine_system_prompt"))?;
        std::fs::metadata(p)
            .map(drop)
            .map_err(|source| EngineError::SystemPrompt {
                path: p.display().to_string(),
                source,
            })
    };
    match s.refine_engine.as_str() {
        "extract" => Ok(()),
        "candle" => {
            let m = s
                .refine_model
                .as_ref()
                .ok_or_else(|| missing("candle", "refine_model"))?;
            if !m.exists() {
                return Err(EngineError::Backend(BackendError::Model(format!(
                    "{}: no such file or directory",
                    m.display()
                ))));
            }
            prompt("candle")
        }
        "openai" => {
            s.refine_endpoint
                .as_ref()
                .ok_or_else(|| missing("openai", "refine_endpoint"))?;
            prompt("openai")
        }
        other => Err(EngineError::Unknown(other.to_string())),
    }
}

/// The engine the settings name; a model is loaded (candle) or its client made (openai).
pub fn build(s: &RefineSettings) -> Result<Engine, EngineError> {
    let backend: Arc<dyn Backend> = match s.refine_engine.as_str() {
        "extract" => return Ok(Engine::Extract),
        "candle" => {
            let path = s
                .refine_model
                .as_ref()
                .ok_or_else(|| missing("candle", "refine_model"))?;
            let mut c = Candle::load(path)?;
            if s.refine_context_length > 0 {
                c.limit_context(s.refine_context_length);
            }
            Arc::new(c)
        }
        "openai" => {
            let base_url = s
                .refine_endpoint
                .clone()
                .ok_or_else(|| missing("openai", "refine_endpoint"))?;
            Arc::new(OpenAi::new(OpenAiConfig {
                base_url,
                model: s.refine_served_model.clone(),
                api_key: s.refine_api_key.clone(),
                timeout: Duration::from_secs(s.refine_timeout_s.max(1)),
                retries: s.refine_retries,
                context_length: (s.refine_context_length > 0).then_some(s.refine_context_length),
            })?)
        }
        other => return Err(EngineError::Unknown(other.to_string())),
    };
    let path = s
        .refine_system_prompt
        .as_ref()
        .ok_or_else(|| missing("with a model", "refine_system_prompt"))?;
    let system = std::fs::read_to_string(path).map_err(|source| EngineError::SystemPrompt {
        path: path.display().to_string(),
        source,
    })?;
    let sampling = if s.refine_temperature == 0.0 {
        Sampling::Greedy
    } else {
        Sampling::Temperature(s.refine_temperature)
    };
    Ok(Engine::Model {
        backend,
        system,
        max_new_tokens: s.refine_max_new_tokens,
        sampling,
    })
}

/// Pages refined at once: the settings' `refine_concurrency`, else the cores for the
/// extractor, one for a model in process (it uses every core, or the GPU, itself), eight
/// requests in flight to a server (which batches them).
pub fn concurrency(s: &RefineSettings) -> usize {
    if s.refine_concurrency > 0 {
        return s.refine_concurrency;
    }
    match s.refine_engine.as_str() {
        "candle" => 1,
        "openai" => 8,
        _ => std::thread::available_parallelism().map_or(2, |n| n.get()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err<T>(r: Result<T, EngineError>) -> String {
        match r {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_model_engine_without_what_it_needs_is_refused_with_the_setting_named() {
        let s = RefineSettings {
            refine_engine: "candle".into(),
            ..RefineSettings::default()
        };
        let e = err(build(&s));
        assert!(e.contains("TRAWL_REFINE_MODEL"), "{e}");
        let s = RefineSettings {
            refine_engine: "openai".into(),
            refine_endpoint: Some("http://127.0.0.1:9/v1".into()),
            ..RefineSettings::default()
        };
        let e = err(build(&s));
        assert!(e.contains("TRAWL_REFINE_SYSTEM_PROMPT"), "{e}");
        let e = err(check(&s));
        assert!(e.contains("TRAWL_REFINE_SYSTEM_PROMPT"), "{e}");
        assert!(check(&RefineSettings::default()).is_ok());
        assert!(matches!(
            build(&RefineSettings::default()),
            Ok(Engine::Extract)
        ));
        assert_eq!(
            concurrency(&RefineSettings {
                refine_engine: "candle".into(),
                ..RefineSettings::default()
            }),
            1
        );
    }
}

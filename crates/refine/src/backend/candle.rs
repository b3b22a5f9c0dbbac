//! Models in process with candle: a GGUF file (Qwen3 or Llama architecture, quantized) or a
//! Qwen3 safetensors checkpoint directory (`config.json`, `tokenizer.json`, weights). CPU by
//! default; the `cuda` feature runs on the first GPU. The KV cache is cleared before every
//! page; stop tokens are looked up in the tokenizer, never assumed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use candle_core::quantized::gguf_file;
use candle_core::quantized::tokenizer::TokenizerFromGguf;
use candle_core::{DType, Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling as CandleSampling};
use candle_transformers::models::{quantized_llama, quantized_qwen3, qwen3};
use tokenizers::Tokenizer;

use super::{Backend, BackendError, Reply, Request, Sampling, chatml};
use crate::program::{Finish, Generation};

enum Weights {
    Llama(quantized_llama::ModelWeights),
    QQwen3(quantized_qwen3::ModelWeights),
    Qwen3(qwen3::ModelForCausalLM),
}

impl Weights {
    fn clear(&mut self) {
        match self {
            Weights::Llama(m) => m.clear_kv_cache(),
            Weights::QQwen3(m) => m.clear_kv_cache(),
            Weights::Qwen3(m) => m.clear_kv_cache(),
        }
    }

    fn forward(&mut self, x: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        let logits = match self {
            Weights::Llama(m) => m.forward(x, pos)?,
            Weights::QQwen3(m) => m.forward(x, pos)?,
            Weights::Qwen3(m) => m.forward(x, pos)?,
        };
        logits.flatten_all()?.to_dtype(DType::F32)
    }
}

pub struct Candle {
    name: String,
    model: Mutex<Weights>,
    tokenizer: Tokenizer,
    device: Device,
    stops: Vec<u32>,
    context: usize,
    /// Qwen3's template with thinking off opens the answer with an empty think block.
    empty_think: bool,
}

fn model_err(e: impl std::fmt::Display) -> BackendError {
    BackendError::Model(e.to_string())
}

fn device() -> Result<Device, BackendError> {
    #[cfg(feature = "cuda")]
    {
        return Device::new_cuda(0).map_err(model_err);
    }
    #[allow(unreachable_code)]
    Ok(Device::Cpu)
}

impl Candle {
    /// Loads a `.gguf` file or a safetensors checkpoint directory.
    pub fn load(path: &Path) -> Result<Candle, BackendError> {
        if path.is_dir() {
            Candle::load_dir(path)
        } else {
            Candle::load_gguf(path)
        }
    }

    fn load_gguf(path: &Path) -> Result<Candle, BackendError> {
        let device = device()?;
        let mut file =
            std::fs::File::open(path).map_err(|e| model_err(format!("{}: {e}", path.display())))?;
        let ct = gguf_file::Content::read(&mut file)
            .map_err(|e| model_err(format!("{}: {e}", path.display())))?;
        let meta_str = |k: &str| ct.metadata.get(k).and_then(|v| v.to_string().ok()).cloned();
        let meta_u32 = |k: &str| ct.metadata.get(k).and_then(|v| v.to_u32().ok());
        let arch = meta_str("general.architecture").unwrap_or_default();
        let template = meta_str("tokenizer.chat_template").unwrap_or_default();
        let tokenizer = Tokenizer::from_gguf(&ct).map_err(model_err)?;
        let mut context = meta_u32(&format!("{arch}.context_length")).unwrap_or(4096) as usize;
        let eos = meta_u32("tokenizer.ggml.eos_token_id");
        let model = match arch.as_str() {
            "llama" => {
                // Its rotary table is precomputed for this many positions.
                context = context.min(quantized_llama::MAX_SEQ_LEN);
                Weights::Llama(
                    quantized_llama::ModelWeights::from_gguf(ct, &mut file, &device)
                        .map_err(model_err)?,
                )
            }
            "qwen3" => Weights::QQwen3(
                quantized_qwen3::ModelWeights::from_gguf(ct, &mut file, &device)
                    .map_err(model_err)?,
            ),
            other => {
                return Err(model_err(format!(
                    "GGUF architecture {other:?}: only llama and qwen3 are supported"
                )));
            }
        };
        if !template.is_empty() && !template.contains("<|im_start|>") {
            return Err(model_err(
                "the model's chat template is not ChatML (Qwen3, SmolLM2)",
            ));
        }
        let empty_think = template.contains("<think>") || template.contains("enable_thinking");
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(Candle::assemble(
            name,
            model,
            tokenizer,
            device,
            eos,
            context,
            empty_think,
        ))
    }

    fn load_dir(dir: &Path) -> Result<Candle, BackendError> {
        let device = device()?;
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .map_err(|e| model_err(format!("{}: {e}", dir.join(f).display())))
        };
        let cfg: qwen3::Config = serde_json::from_str(&read("config.json")?).map_err(model_err)?;
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(model_err)?;
        let template = read("tokenizer_config.json")
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v["chat_template"].as_str().map(str::to_string))
            .unwrap_or_default();
        let mut weights: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(model_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        weights.sort();
        if weights.is_empty() {
            return Err(model_err(format!("no .safetensors in {}", dir.display())));
        }
        let dtype = if device.is_cuda() {
            DType::BF16
        } else {
            DType::F32
        };
        // SAFETY: the files are memory-mapped read-only for the model's lifetime; trawl does
        // not write them while it runs.
        let vb =
            unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&weights, dtype, &device) }
                .map_err(model_err)?;
        let model = Weights::Qwen3(qwen3::ModelForCausalLM::new(&cfg, vb).map_err(model_err)?);
        let name = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let empty_think = template.is_empty() || template.contains("enable_thinking");
        Ok(Candle::assemble(
            name,
            model,
            tokenizer,
            device,
            None,
            cfg.max_position_embeddings,
            empty_think,
        ))
    }

    fn assemble(
        name: String,
        model: Weights,
        tokenizer: Tokenizer,
        device: Device,
        eos: Option<u32>,
        context: usize,
        empty_think: bool,
    ) -> Candle {
        let mut stops: Vec<u32> = ["<|im_end|>", "<|endoftext|>"]
            .iter()
            .filter_map(|t| tokenizer.token_to_id(t))
            .collect();
        stops.extend(eos);
        stops.sort_unstable();
        stops.dedup();
        Candle {
            name,
            model: Mutex::new(model),
            tokenizer,
            device,
            stops,
            context,
            empty_think,
        }
    }

    pub fn context(&self) -> usize {
        self.context
    }

    /// Pages are refused past `limit` tokens (prompt and budget) even where the model would
    /// take more: long prompts are slow on a CPU.
    pub fn limit_context(&mut self, limit: usize) {
        self.context = self.context.min(limit);
    }

    pub fn stop_tokens(&self) -> &[u32] {
        &self.stops
    }

    /// Tokens of a text as this model reads it.
    pub fn count_tokens(&self, text: &str) -> Result<usize, BackendError> {
        Ok(self.tokenizer.encode(text, false).map_err(model_err)?.len())
    }
}

impl Backend for Candle {
    fn name(&self) -> String {
        format!("candle:{}", self.name)
    }

    fn generate(&self, req: &Request) -> Result<Reply, BackendError> {
        let prompt = chatml(&req.system, &req.page, self.empty_think);
        let ids = self
            .tokenizer
            .encode(prompt, false)
            .map_err(model_err)?
            .get_ids()
            .to_vec();
        if ids.len() + req.max_new_tokens > self.context {
            return Err(BackendError::TooLong {
                prompt: ids.len(),
                max_new: req.max_new_tokens,
                limit: self.context,
            });
        }
        let sampling = match req.sampling {
            Sampling::Greedy => CandleSampling::ArgMax,
            Sampling::Temperature(t) if t <= 0.0 => CandleSampling::ArgMax,
            Sampling::Temperature(t) => CandleSampling::All { temperature: t },
        };
        let mut sampler = LogitsProcessor::from_sampling(req.seed, sampling);
        let mut model = self
            .model
            .lock()
            .map_err(|_| model_err("a generation panicked earlier"))?;
        model.clear();
        let t0 = Instant::now();
        let input = Tensor::new(ids.as_slice(), &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(model_err)?;
        let logits = model.forward(&input, 0).map_err(model_err)?;
        let mut next = sampler.sample(&logits).map_err(model_err)?;
        let prefill_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let mut out: Vec<u32> = Vec::new();
        let finish = loop {
            if self.stops.contains(&next) {
                break Finish::Stop;
            }
            out.push(next);
            if out.len() >= req.max_new_tokens {
                break Finish::Length;
            }
            let x = Tensor::new(&[next], &self.device)
                .and_then(|t| t.unsqueeze(0))
                .map_err(model_err)?;
            let logits = model
                .forward(&x, ids.len() + out.len() - 1)
                .map_err(model_err)?;
            next = sampler.sample(&logits).map_err(model_err)?;
        };
        drop(model);
        let text = self.tokenizer.decode(&out, true).map_err(model_err)?;
        Ok(Reply {
            generation: Generation { text, finish },
            prompt_tokens: ids.len(),
            completion_tokens: out.len(),
            prefill_s,
            decode_s: t1.elapsed().as_secs_f64(),
        })
    }
}

//! Sentence embeddings: BERT, mean pooling over the real tokens, then L2 normalization, as
//! sentence-transformers computes them for all-MiniLM-L6-v2. On the CPU trawl's own forward
//! pass ([`crate::bert`]) runs, with int8 dense layers where the CPU has AVX-512 VNNI
//! ([`crate::quant`]); candle's `BertModel` runs on CUDA devices.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::bert::{Bert, BertConfig};
use crate::{EmbedError, model};

/// The window sentence-transformers uses for this model (`max_seq_length`); the packaged
/// `tokenizer.json` says 128, which would cut long chunks short.
pub const MAX_SEQ_LEN: usize = 256;

/// Which forward pass computes the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// trawl's own CPU forward pass ([`crate::bert`]): packed tokens, no padding.
    Native,
    /// The same pass with int8 dense layers ([`crate::quant`]): cosine >= 0.99 to the f32
    /// vectors, 2.6x faster where the CPU has AVX-512 VNNI (`bench/index`).
    Int8,
    /// candle's `BertModel`, on the CPU or a CUDA device (with the `cuda` feature).
    Candle,
}

enum Forward {
    Native { bert: Bert, int8: bool },
    Candle { model: BertModel, device: Device },
}

pub struct Embedder {
    forward: Forward,
    tokenizer: Tokenizer,
    dim: usize,
}

fn ml(e: candle_core::Error) -> EmbedError {
    EmbedError::Model(e.to_string())
}

impl Embedder {
    /// Loads the model from `dir` in the default [`Precision`].
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Self::load_with(dir, Precision::Auto)
    }

    /// Loads the model from `dir`: onto the first CUDA device when built with the `cuda`
    /// feature and one is present (candle's forward pass, float32 unless `precision` is
    /// `tf32`), else for the CPU (trawl's own, which is the faster one there: int8 where
    /// the CPU has AVX-512 VNNI, f32 elsewhere, unless `precision` says which).
    pub fn load_with(dir: &Path, precision: Precision) -> Result<Self, EmbedError> {
        match pick_device()? {
            Device::Cpu => Self::load_engine(dir, cpu_engine(precision)?),
            device => {
                gpu_precision(precision)?;
                Self::load_on(dir, Engine::Candle, device)
            }
        }
    }

    /// Loads the model for `engine` on the CPU (tests compare the two).
    pub fn load_engine(dir: &Path, engine: Engine) -> Result<Self, EmbedError> {
        Self::load_on(dir, engine, Device::Cpu)
    }

    fn load_on(dir: &Path, engine: Engine, device: Device) -> Result<Self, EmbedError> {
        model::check_dir(dir)?;
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .map_err(|e| EmbedError::Model(format!("{}: {e}", dir.join(f).display())))
        };
        let config = read("config.json")?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| EmbedError::Tokenizer(format!("tokenizer.json: {e}")))?;
        // The native pass packs sequences as they are; candle's takes a padded matrix.
        tokenizer.with_padding((engine == Engine::Candle).then(|| PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_SEQ_LEN,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let weights = dir.join("model.safetensors");
        let (forward, dim) = match engine {
            Engine::Native | Engine::Int8 => {
                let cfg: BertConfig = serde_json::from_str(&config)
                    .map_err(|e| EmbedError::Model(format!("config.json: {e}")))?;
                let int8 = engine == Engine::Int8;
                let bert = Bert::load(&weights, cfg, int8)?;
                let dim = bert.hidden_size();
                (Forward::Native { bert, int8 }, dim)
            }
            Engine::Candle => {
                let cfg: Config = serde_json::from_str(&config)
                    .map_err(|e| EmbedError::Model(format!("config.json: {e}")))?;
                // Safety: the weights file is memory-mapped read-only; trawl never writes
                // it, and the model's documentation asks the operator not to change it
                // while it is in use.
                let vb =
                    unsafe { VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, &device) }
                        .map_err(ml)?;
                let model = BertModel::load(vb, &cfg).map_err(ml)?;
                (Forward::Candle { model, device }, cfg.hidden_size)
            }
        };
        Ok(Self {
            forward,
            tokenizer,
            dim,
        })
    }

    /// The vector length (384 for all-MiniLM-L6-v2).
    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn device_name(&self) -> &'static str {
        match &self.forward {
            Forward::Native { int8: false, .. } => "cpu",
            Forward::Native { int8: true, .. } => "cpu int8",
            Forward::Candle { device, .. } => match device {
                Device::Cpu => "cpu (candle)",
                Device::Cuda(_) if candle_core::cuda::gemm_reduced_precision_f32() => "cuda tf32",
                Device::Cuda(_) => "cuda",
                Device::Metal(_) => "metal",
            },
        }
    }

    /// Embeds `texts` in batches of `batch`, longest first (so a batch pads little), and
    /// returns the vectors in the order of `texts`.
    pub fn embed(&self, texts: &[&str], batch: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let batch = batch.max(1);
        let mut order: Vec<usize> = (0..texts.len()).collect();
        // Bytes stand in for length: tokenizing twice to sort would cost more than it saves.
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        let mut out = vec![Vec::new(); texts.len()];
        for group in order.chunks(batch) {
            let inputs: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            for (v, &i) in self.embed_batch(&inputs)?.into_iter().zip(group) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        match &self.forward {
            Forward::Native { bert, .. } => {
                let seqs: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
                bert.embed(&seqs, rayon::current_num_threads())
            }
            Forward::Candle { model, device } => candle_batch(model, device, &encodings),
        }
    }
}

fn candle_batch(
    model: &BertModel,
    device: &Device,
    encodings: &[tokenizers::Encoding],
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let rows = encodings.len();
    let cols = encodings.first().map_or(0, |e| e.len());
    let mut ids = Vec::with_capacity(rows * cols);
    let mut mask = Vec::with_capacity(rows * cols);
    for e in encodings {
        ids.extend_from_slice(e.get_ids());
        mask.extend_from_slice(e.get_attention_mask());
    }
    let ids = Tensor::from_vec(ids, (rows, cols), device).map_err(ml)?;
    let mask = Tensor::from_vec(mask, (rows, cols), device).map_err(ml)?;
    let types = ids.zeros_like().map_err(ml)?;
    let hidden = model.forward(&ids, &types, Some(&mask)).map_err(ml)?;
    // Mean over the real tokens only: padding must not pull the average.
    let m = mask
        .to_dtype(DType::F32)
        .map_err(ml)?
        .unsqueeze(2)
        .map_err(ml)?;
    let summed = hidden.broadcast_mul(&m).map_err(ml)?.sum(1).map_err(ml)?;
    let counts = m.sum(1).map_err(ml)?.clamp(1e-9, f64::MAX).map_err(ml)?;
    let mean = summed.broadcast_div(&counts).map_err(ml)?;
    let norm = mean
        .sqr()
        .map_err(ml)?
        .sum_keepdim(1)
        .map_err(ml)?
        .sqrt()
        .map_err(ml)?
        .clamp(1e-12, f64::MAX)
        .map_err(ml)?;
    let unit = mean.broadcast_div(&norm).map_err(ml)?;
    unit.to_device(&Device::Cpu)
        .map_err(ml)?
        .to_vec2::<f32>()
        .map_err(ml)
}

/// Whether this CPU runs the int8 pass natively (AVX-512 VNNI), and so picks it by default.
pub fn int8_is_native() -> bool {
    crate::quant::fast()
}

/// The number format of the embedder's pass (the `embed_precision` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// int8 on CPUs with AVX-512 VNNI, else f32; f32 on CUDA.
    #[default]
    Auto,
    F32,
    /// The CPU's int8 pass (cosine >= 0.99 to f32).
    Int8,
    /// CUDA: f32 tensors with TF32 matrix products.
    Tf32,
}

impl std::str::FromStr for Precision {
    type Err = EmbedError;

    fn from_str(s: &str) -> Result<Self, EmbedError> {
        match s {
            "auto" | "" => Ok(Precision::Auto),
            "f32" => Ok(Precision::F32),
            "int8" => Ok(Precision::Int8),
            "tf32" => Ok(Precision::Tf32),
            other => Err(EmbedError::Config(format!(
                "embed precision {other:?}: auto, f32, int8 (CPU) or tf32 (CUDA)"
            ))),
        }
    }
}

/// The CPU engine: the precision asked for, else int8 where it is fast.
fn cpu_engine(precision: Precision) -> Result<Engine, EmbedError> {
    match precision {
        Precision::F32 => Ok(Engine::Native),
        Precision::Int8 => Ok(Engine::Int8),
        Precision::Tf32 => Err(EmbedError::Config(
            "embed precision tf32 is for CUDA devices: auto, f32 or int8 on the CPU".into(),
        )),
        Precision::Auto if crate::quant::fast() => Ok(Engine::Int8),
        Precision::Auto => Ok(Engine::Native),
    }
}

/// The CUDA pass's precision: f32 by default (what
/// sentence-transformers computes, and so what the index's vectors are compared to);
/// `tf32` keeps f32 tensors with TF32 matrix products (a process-wide cuBLAS setting).
/// No f16 or bf16: candle's BERT masks padding with `f32::MIN`, which rounds to -inf in
/// both, and `0 * -inf` made every vector NaN (measured on an H200, `bench/index`).
fn gpu_precision(precision: Precision) -> Result<(), EmbedError> {
    match precision {
        Precision::Auto | Precision::F32 => Ok(()),
        Precision::Tf32 => {
            candle_core::cuda::set_gemm_reduced_precision_f32(true);
            Ok(())
        }
        Precision::Int8 => Err(EmbedError::Config(
            "embed precision int8 is the CPU's pass; on a CUDA device: f32 or tf32 (candle's \
             BERT overflows its attention mask in f16 and bf16)"
                .into(),
        )),
    }
}

#[cfg(feature = "cuda")]
fn pick_device() -> Result<Device, EmbedError> {
    match Device::cuda_if_available(0) {
        Ok(d) => Ok(d),
        Err(e) => {
            tracing::warn!(error = %e, "no CUDA device; embedding on the CPU");
            Ok(Device::Cpu)
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn pick_device() -> Result<Device, EmbedError> {
    Ok(Device::Cpu)
}

//! BERT's forward pass on the CPU, for sentence embeddings: what candle's `BertModel`
//! computes, without its padding and copies. Tokens of all sequences of a batch are packed
//! into one matrix (no padding: the dense layers are per token), each dense layer is one
//! `gemm` call with its bias (and residual) already in the destination, attention reads
//! queries, keys and values in place from the packed QKV matrix (one per sequence and head,
//! over that sequence's real length, so no mask), and GELU, softmax and layer norm are the
//! vectorized kernels of [`crate::kernels`].

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use gemm::Parallelism;
use rayon::prelude::*;

use crate::EmbedError;
use crate::kernels::{bias_gelu, layer_norm_rows, softmax_rows};
use crate::quant::QuantDense;

/// The shape of the model, from its `config.json`.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
pub struct BertConfig {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_act")]
    pub hidden_act: Activation,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_act() -> Activation {
    Activation::Gelu
}

/// The activations this forward pass implements (BERT checkpoints use exact GELU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum Activation {
    #[serde(rename = "gelu")]
    Gelu,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// A dense layer: `weight` is `[out, in]`, row-major, as stored; once quantized it lives in
/// `int8` instead and `weight` is empty.
struct Dense {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    int8: Option<QuantDense>,
}

impl Dense {
    fn new(weight: Vec<f32>, bias: Vec<f32>) -> Self {
        let inputs = weight.len() / bias.len().max(1);
        Self {
            weight,
            bias,
            inputs,
            int8: None,
        }
    }

    fn quantized(self) -> Self {
        let int8 = QuantDense::new(&self.weight, self.bias.len(), self.inputs);
        Self {
            weight: Vec::new(),
            int8: Some(int8),
            ..self
        }
    }
}

struct Layer {
    /// Query, key and value stacked into one `[3 * hidden, hidden]` weight.
    qkv: Dense,
    attn_out: Dense,
    attn_norm: Norm,
    up: Dense,
    down: Dense,
    out_norm: Norm,
}

pub struct Bert {
    cfg: BertConfig,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_norm: Norm,
    layers: Vec<Layer>,
}

fn model_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(e.to_string())
}

struct Weights {
    tensors: HashMap<String, Tensor>,
    prefix: &'static str,
}

impl Weights {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let key = format!("{}{name}", self.prefix);
        let t = self
            .tensors
            .get(&key)
            .ok_or_else(|| model_err(format!("model.safetensors has no tensor {key}")))?;
        if t.dims() != shape {
            return Err(model_err(format!(
                "tensor {key} has shape {:?}, the config says {shape:?}",
                t.dims()
            )));
        }
        t.to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(model_err)
    }

    fn dense(&self, name: &str, out: usize, inputs: usize) -> Result<Dense, EmbedError> {
        Ok(Dense::new(
            self.get(&format!("{name}.weight"), &[out, inputs])?,
            self.get(&format!("{name}.bias"), &[out])?,
        ))
    }

    fn norm(&self, name: &str, width: usize) -> Result<Norm, EmbedError> {
        Ok(Norm {
            gamma: self.get(&format!("{name}.weight"), &[width])?,
            beta: self.get(&format!("{name}.bias"), &[width])?,
        })
    }
}

impl Bert {
    /// Loads `model.safetensors` (tensor names as Hugging Face's `BertModel` saves them,
    /// with or without a `bert.` prefix); with `int8` the dense layers are quantized
    /// ([`crate::quant`]), the embeddings, norms and attention stay f32.
    pub fn load(weights: &Path, cfg: BertConfig, int8: bool) -> Result<Self, EmbedError> {
        // The activation is read from config.json so that a model with another one is
        // refused there instead of computed wrongly; GELU is the only one implemented.
        match cfg.hidden_act {
            Activation::Gelu => {}
        }
        if cfg.num_attention_heads == 0 || !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads)
        {
            return Err(model_err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                cfg.hidden_size, cfg.num_attention_heads
            )));
        }
        let tensors = candle_core::safetensors::load(weights, &Device::Cpu)
            .map_err(|e| model_err(format!("{}: {e}", weights.display())))?;
        let prefix = if tensors.contains_key("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        };
        let w = Weights { tensors, prefix };
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let (q, k, v) = (
                w.dense(&format!("{p}.attention.self.query"), h, h)?,
                w.dense(&format!("{p}.attention.self.key"), h, h)?,
                w.dense(&format!("{p}.attention.self.value"), h, h)?,
            );
            let qkv = Dense::new(
                [q.weight, k.weight, v.weight].concat(),
                [q.bias, k.bias, v.bias].concat(),
            );
            let prec = |d: Dense| if int8 { d.quantized() } else { d };
            layers.push(Layer {
                qkv: prec(qkv),
                attn_out: prec(w.dense(&format!("{p}.attention.output.dense"), h, h)?),
                attn_norm: w.norm(&format!("{p}.attention.output.LayerNorm"), h)?,
                up: prec(w.dense(&format!("{p}.intermediate.dense"), i, h)?),
                down: prec(w.dense(&format!("{p}.output.dense"), h, i)?),
                out_norm: w.norm(&format!("{p}.output.LayerNorm"), h)?,
            });
        }
        Ok(Self {
            word: w.get("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?,
            position: w.get(
                "embeddings.position_embeddings.weight",
                &[cfg.max_position_embeddings, h],
            )?,
            token_type: w.get("embeddings.token_type_embeddings.weight", &[2, h])?,
            emb_norm: w.norm("embeddings.LayerNorm", h)?,
            layers,
            cfg,
        })
    }

    pub fn hidden_size(&self) -> usize {
        self.cfg.hidden_size
    }

    /// Mean-pooled, L2-normalized embeddings of token sequences (each `[CLS] ... [SEP]`).
    /// `threads` > 1 splits the matrix products and the attention over rayon's pool.
    pub fn embed(&self, seqs: &[&[u32]], threads: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let h = self.cfg.hidden_size;
        let mut spans = Vec::with_capacity(seqs.len());
        let mut total = 0;
        for s in seqs {
            if s.len() > self.cfg.max_position_embeddings {
                return Err(model_err(format!(
                    "a sequence of {} tokens is longer than the model's {} positions",
                    s.len(),
                    self.cfg.max_position_embeddings
                )));
            }
            if let Some(bad) = s.iter().find(|&&t| t as usize >= self.cfg.vocab_size) {
                return Err(model_err(format!(
                    "token id {bad} is outside the vocabulary ({})",
                    self.cfg.vocab_size
                )));
            }
            spans.push((total, s.len()));
            total += s.len();
        }
        let mut x = vec![0f32; total * h];
        for (s, &(start, _)) in seqs.iter().zip(&spans) {
            for (p, &tok) in s.iter().enumerate() {
                let row = &mut x[(start + p) * h..(start + p + 1) * h];
                let word = &self.word[tok as usize * h..(tok as usize + 1) * h];
                let pos = &self.position[p * h..(p + 1) * h];
                for (((o, w), q), t) in row.iter_mut().zip(word).zip(pos).zip(&self.token_type) {
                    *o = w + q + t;
                }
            }
        }
        let eps = self.cfg.layer_norm_eps as f32;
        let norm = |x: &mut [f32], n: &Norm| {
            rows(x, h, threads, |r| {
                layer_norm_rows(r, &n.gamma, &n.beta, eps)
            })
        };
        norm(&mut x, &self.emb_norm);
        let mut qkv = vec![0f32; total * 3 * h];
        let mut ctx = vec![0f32; total * h];
        let mut up = vec![0f32; total * self.cfg.intermediate_size];
        for layer in &self.layers {
            fill_rows(&mut qkv, &layer.qkv.bias);
            dense(&mut qkv, &x, &layer.qkv, threads, true);
            self.attention(&qkv, &mut ctx, &spans, threads);
            // The residual is the destination: x + bias + ctx W^T.
            add_rows(&mut x, &layer.attn_out.bias);
            dense(&mut x, &ctx, &layer.attn_out, threads, true);
            norm(&mut x, &layer.attn_norm);
            let width = layer.up.bias.len();
            dense(&mut up, &x, &layer.up, threads, false);
            rows(&mut up, width, threads, |r| bias_gelu(r, &layer.up.bias));
            add_rows(&mut x, &layer.down.bias);
            dense(&mut x, &up, &layer.down, threads, true);
            norm(&mut x, &layer.out_norm);
        }
        Ok(spans
            .iter()
            .map(|&(start, len)| {
                let mut v = vec![0f32; h];
                for r in x[start * h..(start + len) * h].chunks_exact(h) {
                    v.iter_mut().zip(r).for_each(|(a, b)| *a += b);
                }
                let n = len.max(1) as f32;
                v.iter_mut().for_each(|a| *a /= n);
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|a| *a /= norm);
                v
            })
            .collect())
    }

    /// Self-attention of every sequence and head, written into `ctx` (`[tokens, hidden]`).
    fn attention(&self, qkv: &[f32], ctx: &mut [f32], spans: &[(usize, usize)], threads: usize) {
        let h = self.cfg.hidden_size;
        let heads = self.cfg.num_attention_heads;
        let d = h / heads;
        let scale = 1.0 / (d as f32).sqrt();
        let one = |(start, len): (usize, usize), out: &mut [f32]| {
            let mut scores = vec![0f32; len * len];
            let rs = 3 * h as isize;
            for head in 0..heads {
                let q = &qkv[start * 3 * h + head * d..];
                let k = &qkv[start * 3 * h + h + head * d..];
                let v = &qkv[start * 3 * h + 2 * h + head * d..];
                // Safety: every index the strides reach is inside the slices: row r < len of
                // the sequence's rows in `qkv` (3h wide) and `out` (h wide), column < d.
                unsafe {
                    // scores = scale * Q K^T: K^T's (row i, column j) is K[j][i].
                    gemm::gemm(
                        len,
                        len,
                        d,
                        scores.as_mut_ptr(),
                        1,
                        len as isize,
                        false,
                        q.as_ptr(),
                        1,
                        rs,
                        k.as_ptr(),
                        rs,
                        1,
                        0.0,
                        scale,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
                softmax_rows(&mut scores, len);
                unsafe {
                    gemm::gemm(
                        len,
                        d,
                        len,
                        out[head * d..].as_mut_ptr(),
                        1,
                        h as isize,
                        false,
                        scores.as_ptr(),
                        1,
                        len as isize,
                        v.as_ptr(),
                        1,
                        rs,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
            }
        };
        // Each sequence writes its own rows of `ctx`.
        let mut parts = Vec::with_capacity(spans.len());
        let mut rest = ctx;
        for &(_, len) in spans {
            let (mine, tail) = rest.split_at_mut(len * h);
            parts.push(mine);
            rest = tail;
        }
        if threads > 1 {
            parts
                .into_par_iter()
                .zip(spans.par_iter())
                .for_each(|(out, &span)| one(span, out));
        } else {
            for (out, &span) in parts.into_iter().zip(spans) {
                one(span, out);
            }
        }
    }
}

/// `dst = src W^T`, or `dst += src W^T` when `accumulate`, for a dense layer (`src` is
/// `[rows, inputs]`, `dst` `[rows, out]`); the bias is the caller's.
fn dense(dst: &mut [f32], src: &[f32], layer: &Dense, threads: usize, accumulate: bool) {
    if let Some(q) = &layer.int8 {
        q.matmul(dst, src, threads, accumulate);
        return;
    }
    let (out, inputs) = (layer.bias.len(), layer.inputs);
    let rows = src.len() / inputs;
    assert_eq!(src.len(), rows * inputs, "dense layer source");
    assert_eq!(dst.len(), rows * out, "dense layer destination");
    let par = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    // Safety: the asserts above bound every index: dst is rows x out (row stride out),
    // src rows x inputs, and W^T's (row k, column n) is weight[n * inputs + k].
    unsafe {
        gemm::gemm(
            rows,
            out,
            inputs,
            dst.as_mut_ptr(),
            1,
            out as isize,
            accumulate,
            src.as_ptr(),
            1,
            inputs as isize,
            layer.weight.as_ptr(),
            inputs as isize,
            1,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

fn fill_rows(dst: &mut [f32], row: &[f32]) {
    for r in dst.chunks_exact_mut(row.len()) {
        r.copy_from_slice(row);
    }
}

fn add_rows(dst: &mut [f32], row: &[f32]) {
    for r in dst.chunks_exact_mut(row.len()) {
        r.iter_mut().zip(row).for_each(|(a, b)| *a += b);
    }
}

/// Runs `f` over `xs` in blocks of whole rows, on rayon's pool when `threads` > 1.
fn rows(xs: &mut [f32], width: usize, threads: usize, f: impl Fn(&mut [f32]) + Sync + Send) {
    if threads > 1 {
        let block = width * (xs.len() / width).div_ceil(threads * 4).max(1);
        xs.par_chunks_mut(block).for_each(f);
    } else {
        f(xs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small model with deterministic pseudo-random weights.
    fn tiny() -> Bert {
        let cfg = BertConfig {
            hidden_size: 8,
            num_attention_heads: 2,
            num_hidden_layers: 2,
            intermediate_size: 16,
            max_position_embeddings: 12,
            vocab_size: 20,
            layer_norm_eps: 1e-12,
            hidden_act: Activation::Gelu,
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            crate::quant::noise(n, seed)
        };
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let mut dense = |out: usize, inputs: usize| Dense::new(next(out * inputs), next(out));
        let mut layers = Vec::new();
        for _ in 0..cfg.num_hidden_layers {
            layers.push(Layer {
                qkv: dense(3 * h, h),
                attn_out: dense(h, h),
                attn_norm: Norm {
                    gamma: vec![1.0; h],
                    beta: vec![0.0; h],
                },
                up: dense(i, h),
                down: dense(h, i),
                out_norm: Norm {
                    gamma: vec![1.0; h],
                    beta: vec![0.1; h],
                },
            });
        }
        Bert {
            word: next(cfg.vocab_size * h),
            position: next(cfg.max_position_embeddings * h),
            token_type: next(2 * h),
            emb_norm: Norm {
                gamma: vec![1.0; h],
                beta: vec![0.0; h],
            },
            layers,
            cfg,
        }
    }

    #[test]
    fn packing_sequences_changes_no_vector() {
        let bert = tiny();
        let seqs: [&[u32]; 3] = [
            &[1, 5, 7, 9, 2],
            &[1, 3, 2],
            &[1, 4, 4, 4, 4, 4, 4, 4, 8, 2],
        ];
        let alone: Vec<Vec<f32>> = seqs
            .iter()
            .map(|s| bert.embed(&[s], 1).unwrap().remove(0))
            .collect();
        for threads in [1, 2] {
            let packed = bert.embed(&seqs, threads).unwrap();
            for (p, a) in packed.iter().zip(&alone) {
                assert_eq!(p.len(), 8);
                for (x, y) in p.iter().zip(a) {
                    assert!((x - y).abs() < 1e-5, "{x} vs {y} with {threads} threads");
                }
                let norm: f32 = p.iter().map(|x| x * x).sum::<f32>().sqrt();
                assert!((norm - 1.0).abs() < 1e-5);
            }
        }
        // Different inputs, different vectors.
        assert!(
            alone[0]
                .iter()
                .zip(&alone[1])
                .any(|(x, y)| (x - y).abs() > 1e-3)
        );
    }

    #[test]
    fn int8_dense_layers_keep_the_vectors() {
        let bert = tiny();
        let mut q = tiny();
        for l in &mut q.layers {
            for d in [&mut l.qkv, &mut l.attn_out, &mut l.up, &mut l.down] {
                let f = std::mem::replace(d, Dense::new(Vec::new(), Vec::new()));
                *d = f.quantized();
            }
        }
        let seqs: [&[u32]; 2] = [&[1, 5, 7, 9, 2], &[1, 4, 4, 4, 4, 4, 4, 4, 8, 2]];
        let (f, i) = (bert.embed(&seqs, 1).unwrap(), q.embed(&seqs, 2).unwrap());
        for (a, b) in f.iter().zip(&i) {
            let cos: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            assert!(cos > 0.99, "cosine {cos}");
            assert!(
                a.iter().zip(b).any(|(x, y)| x != y),
                "int8 must be a different pass"
            );
        }
    }

    #[test]
    fn bad_sequences_are_errors() {
        let bert = tiny();
        let e = bert.embed(&[&[1, 25, 2]], 1).unwrap_err().to_string();
        assert!(e.contains("token id 25"), "{e}");
        let long = vec![1u32; 13];
        let e = bert.embed(&[&long], 1).unwrap_err().to_string();
        assert!(e.contains("13 tokens"), "{e}");
        assert!(bert.embed(&[], 1).unwrap().is_empty());
    }
}

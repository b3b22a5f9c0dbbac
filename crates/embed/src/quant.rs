//! int8 dense layers for the CPU forward pass: weights quantized once per output channel
//! (symmetric, scale = max |w| / 127), activations per token when the layer runs (the same
//! rule), products summed exactly in 32-bit integers, then scaled back to f32. Where the
//! CPU has AVX-512 VNNI, `vpdpbusd` does four of those multiply-adds per 32-bit lane, four
//! times the multiply-adds per instruction of an f32 FMA; elsewhere a portable loop computes
//! the same integers (correct, not fast: [`fast`] tells the embedder which to prefer).
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, so an activation `q` (in -127..=127) is
//! stored as `q + 128`; the extra `128 * sum(w)` of each output is a per-channel constant
//! taken off after the sum.

use rayon::prelude::*;

use crate::kernels::quantize_row;

/// Outputs per block: one 512-bit register of 32-bit sums.
const LANES: usize = 16;
/// Rows of a tile: 6 rows x 4 blocks = 24 accumulators, inside the 32 vector registers.
const MR: usize = 6;
/// Blocks of a tile.
const NB: usize = 4;
/// Rows a rayon task takes: enough work per task to pay for the split.
const ROWS_PER_TASK: usize = MR * 8;

/// Whether this CPU runs the int8 kernel natively (AVX-512 with VNNI).
pub fn fast() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A dense layer's weight (`[out, in]` as stored) in int8, laid out for the kernel: for each
/// block of 16 outputs and each group of 4 inputs, 64 bytes holding the 4 weights of each of
/// the 16 outputs. Inputs are padded to a multiple of 4 and outputs to one of 16 with zeros.
pub struct QuantDense {
    out: usize,
    inputs: usize,
    /// Input groups of 4 (the padded input width / 4).
    groups: usize,
    packed: Vec<i8>,
    /// Per output (padded): the weight scale.
    scale: Vec<f32>,
    /// Per output (padded): `128 * sum of its int8 weights`, the shift to take off.
    shift: Vec<i32>,
}

impl QuantDense {
    /// Quantizes a row-major `[out, inputs]` weight.
    pub fn new(weight: &[f32], out: usize, inputs: usize) -> Self {
        assert!(out > 0 && inputs > 0, "an empty dense layer");
        assert_eq!(weight.len(), out * inputs, "weight shape");
        let groups = inputs.div_ceil(4);
        let blocks = out.div_ceil(LANES);
        let mut packed = vec![0i8; blocks * groups * LANES * 4];
        let mut scale = vec![0f32; blocks * LANES];
        let mut shift = vec![0i32; blocks * LANES];
        for n in 0..out {
            let row = &weight[n * inputs..(n + 1) * inputs];
            let s = row_scale(row);
            scale[n] = s;
            let (block, lane) = (n / LANES, n % LANES);
            let mut sum = 0i32;
            for (k, &w) in row.iter().enumerate() {
                let q = quantize(w, s);
                sum += q as i32;
                let at = ((block * groups + k / 4) * LANES + lane) * 4 + k % 4;
                packed[at] = q;
            }
            shift[n] = 128 * sum;
        }
        Self {
            out,
            inputs,
            groups,
            packed,
            scale,
            shift,
        }
    }

    /// `dst = src W^T`, or `dst += src W^T` when `accumulate` (`src` is `[rows, inputs]`,
    /// `dst` `[rows, out]`), over rayon's pool when `threads` > 1.
    pub fn matmul(&self, dst: &mut [f32], src: &[f32], threads: usize, accumulate: bool) {
        let rows = src.len() / self.inputs.max(1);
        assert_eq!(src.len(), rows * self.inputs, "int8 dense source");
        assert_eq!(dst.len(), rows * self.out, "int8 dense destination");
        let width = self.groups * 4;
        let mut acts = vec![128u8; rows * width];
        let mut scales = vec![0f32; rows];
        let quantize_rows = |(a, (s, x)): (&mut [u8], (&mut f32, &[f32]))| {
            *s = quantize_row(x, a);
        };
        if threads > 1 {
            acts.par_chunks_mut(width)
                .zip(scales.par_iter_mut().zip(src.par_chunks_exact(self.inputs)))
                .for_each(quantize_rows);
        } else {
            acts.chunks_mut(width)
                .zip(scales.iter_mut().zip(src.chunks_exact(self.inputs)))
                .for_each(quantize_rows);
        }
        let run = |(t, out): (usize, &mut [f32])| {
            let r0 = t * ROWS_PER_TASK;
            let n = out.len() / self.out;
            let a = &acts[r0 * width..(r0 + n) * width];
            self.rows(out, a, &scales[r0..r0 + n], accumulate);
        };
        if threads > 1 {
            dst.par_chunks_mut(ROWS_PER_TASK * self.out)
                .enumerate()
                .for_each(run);
        } else {
            dst.chunks_mut(ROWS_PER_TASK * self.out)
                .enumerate()
                .for_each(run);
        }
    }

    /// The rows of `dst` for quantized activations `acts` (rows of `groups * 4` bytes).
    fn rows(&self, dst: &mut [f32], acts: &[u8], scales: &[f32], accumulate: bool) {
        #[cfg(target_arch = "x86_64")]
        if fast() {
            // Safety: the CPU has the features the kernel is compiled for (checked above),
            // and `acts`, `scales` and `dst` hold the same number of rows.
            unsafe { vnni::rows(self, dst, acts, scales, accumulate) };
            return;
        }
        self.rows_portable(dst, acts, scales, accumulate);
    }

    /// The same integer sums and the same scaling as the VNNI kernel, in plain Rust.
    fn rows_portable(&self, dst: &mut [f32], acts: &[u8], scales: &[f32], accumulate: bool) {
        let width = self.groups * 4;
        for (r, (out, &sa)) in dst.chunks_exact_mut(self.out).zip(scales).enumerate() {
            let a = &acts[r * width..(r + 1) * width];
            for block in 0..self.out.div_ceil(LANES) {
                let mut acc = [0i32; LANES];
                let w = &self.packed[block * self.groups * LANES * 4..];
                for (g, a4) in a.chunks_exact(4).enumerate() {
                    let w = &w[g * LANES * 4..(g + 1) * LANES * 4];
                    for (lane, w4) in acc.iter_mut().zip(w.chunks_exact(4)) {
                        for (&x, &y) in a4.iter().zip(w4) {
                            *lane += x as i32 * y as i32;
                        }
                    }
                }
                for (lane, &sum) in acc.iter().enumerate() {
                    let n = block * LANES + lane;
                    if n >= self.out {
                        break;
                    }
                    let v = (sum - self.shift[n]) as f32 * sa * self.scale[n];
                    out[n] = if accumulate { out[n] + v } else { v };
                }
            }
        }
    }
}

/// The symmetric int8 scale of a weight row: its largest magnitude maps to 127 (the rule
/// [`quantize_row`] applies to activations).
fn row_scale(xs: &[f32]) -> f32 {
    let m = xs.iter().fold(0f32, |m, &x| m.max(x.abs()));
    if m > 0.0 && m.is_finite() {
        m / 127.0
    } else {
        1.0
    }
}

fn quantize(x: f32, scale: f32) -> i8 {
    (x / scale).round().clamp(-127.0, 127.0) as i8
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::*;

    use super::{LANES, MR, NB, QuantDense};

    /// The tiles of `dst`: `MR` rows by `NB` blocks where they fit, smaller at the edges.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn rows(
        q: &QuantDense,
        dst: &mut [f32],
        acts: &[u8],
        scales: &[f32],
        accumulate: bool,
    ) {
        let rows = scales.len();
        let blocks = q.out.div_ceil(LANES);
        let mut r = 0;
        while r < rows {
            let m = (rows - r).min(MR);
            let mut b = 0;
            while b < blocks {
                let n = if blocks - b >= NB { NB } else { 1 };
                // Safety: the tile's rows and blocks are inside `dst`, `acts` and `q`.
                unsafe {
                    match (m, n) {
                        (6, NB) => tile::<6, NB>(q, dst, acts, scales, r, b, accumulate),
                        (5, NB) => tile::<5, NB>(q, dst, acts, scales, r, b, accumulate),
                        (4, NB) => tile::<4, NB>(q, dst, acts, scales, r, b, accumulate),
                        (3, NB) => tile::<3, NB>(q, dst, acts, scales, r, b, accumulate),
                        (2, NB) => tile::<2, NB>(q, dst, acts, scales, r, b, accumulate),
                        (1, NB) => tile::<1, NB>(q, dst, acts, scales, r, b, accumulate),
                        (6, _) => tile::<6, 1>(q, dst, acts, scales, r, b, accumulate),
                        (5, _) => tile::<5, 1>(q, dst, acts, scales, r, b, accumulate),
                        (4, _) => tile::<4, 1>(q, dst, acts, scales, r, b, accumulate),
                        (3, _) => tile::<3, 1>(q, dst, acts, scales, r, b, accumulate),
                        (2, _) => tile::<2, 1>(q, dst, acts, scales, r, b, accumulate),
                        _ => tile::<1, 1>(q, dst, acts, scales, r, b, accumulate),
                    }
                }
                b += n;
            }
            r += m;
        }
    }

    /// `M` rows from `r0` by `N` blocks from `b0`: every sum in a register for the whole
    /// input width, each activation word broadcast once per row and group.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const M: usize, const N: usize>(
        q: &QuantDense,
        dst: &mut [f32],
        acts: &[u8],
        scales: &[f32],
        r0: usize,
        b0: usize,
        accumulate: bool,
    ) {
        let width = q.groups * 4;
        let block_bytes = q.groups * LANES * 4;
        let mut acc = [[_mm512_setzero_si512(); N]; M];
        let w = q.packed.as_ptr();
        let a = acts.as_ptr();
        for g in 0..q.groups {
            let mut wv = [_mm512_setzero_si512(); N];
            for (j, v) in wv.iter_mut().enumerate() {
                // Safety: block b0 + j < blocks and group g < groups: inside `packed`.
                *v = unsafe {
                    _mm512_loadu_si512(w.add((b0 + j) * block_bytes + g * LANES * 4).cast())
                };
            }
            for (i, row) in acc.iter_mut().enumerate() {
                // Safety: row r0 + i < rows, group g < groups: inside `acts`.
                let word =
                    unsafe { std::ptr::read_unaligned(a.add((r0 + i) * width + g * 4).cast()) };
                let av = _mm512_set1_epi32(word);
                for (s, v) in row.iter_mut().zip(&wv) {
                    *s = _mm512_dpbusd_epi32(*s, av, *v);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            let sa = _mm512_set1_ps(scales[r0 + i]);
            let out = &mut dst[(r0 + i) * q.out..(r0 + i + 1) * q.out];
            for (j, s) in row.iter().enumerate() {
                let n0 = (b0 + j) * LANES;
                // Safety: `shift` and `scale` are padded to whole blocks.
                let (shift, scale) = unsafe {
                    (
                        _mm512_loadu_si512(q.shift.as_ptr().add(n0).cast()),
                        _mm512_loadu_ps(q.scale.as_ptr().add(n0)),
                    )
                };
                let v = _mm512_mul_ps(
                    _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(*s, shift)), sa),
                    scale,
                );
                let live = (q.out - n0).min(LANES);
                let mask: __mmask16 = if live == LANES {
                    0xffff
                } else {
                    (1u16 << live) - 1
                };
                let p = out[n0..].as_mut_ptr();
                // Safety: the mask keeps the loads and stores to the `live` outputs of the row.
                unsafe {
                    let v = if accumulate {
                        _mm512_add_ps(_mm512_maskz_loadu_ps(mask, p), v)
                    } else {
                        v
                    };
                    _mm512_mask_storeu_ps(p, mask, v);
                }
            }
        }
    }
}

/// `n` deterministic values in [-0.5, 0.5) (xorshift), for the tests' weights and inputs.
#[cfg(test)]
pub(crate) fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(w: &[f32], x: &[f32], out: usize, inputs: usize) -> Vec<f32> {
        let rows = x.len() / inputs;
        let mut y = vec![0f32; rows * out];
        for r in 0..rows {
            for n in 0..out {
                y[r * out + n] = (0..inputs)
                    .map(|k| x[r * inputs + k] as f64 * w[n * inputs + k] as f64)
                    .sum::<f64>() as f32;
            }
        }
        y
    }

    /// Odd shapes cover every edge: rows past a tile, outputs past a block and a group of
    /// blocks, inputs not a multiple of 4.
    #[test]
    fn int8_products_are_close_to_f32_and_both_kernels_agree() {
        for (rows, out, inputs) in [(1, 1, 1), (7, 17, 5), (13, 70, 33), (50, 96, 384)] {
            let w = noise(out * inputs, 7 + out as u64);
            let x = noise(rows * inputs, 11 + rows as u64);
            let q = QuantDense::new(&w, out, inputs);
            let want = reference(&w, &x, out, inputs);
            for threads in [1, 2] {
                let mut got = vec![0f32; rows * out];
                q.matmul(&mut got, &x, threads, false);
                let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (g, e) in got.iter().zip(&want) {
                    assert!(
                        (g - e).abs() <= 0.02 * scale + 1e-6,
                        "{rows}x{out}x{inputs}: {g} vs {e} (scale {scale})"
                    );
                }
                // Accumulating adds the same product to what is there.
                let mut acc = vec![1f32; rows * out];
                q.matmul(&mut acc, &x, threads, true);
                for (a, g) in acc.iter().zip(&got) {
                    assert!((a - (g + 1.0)).abs() < 1e-5, "{a} vs {g} + 1");
                }
            }
            // The portable loop computes the same numbers as the kernel the CPU picks.
            let width = q.groups * 4;
            let mut acts = vec![128u8; rows * width];
            let scales: Vec<f32> = x
                .chunks(inputs)
                .zip(acts.chunks_mut(width))
                .map(|(row, a)| quantize_row(row, a))
                .collect();
            let (mut a, mut b) = (vec![0f32; rows * out], vec![0f32; rows * out]);
            q.rows(&mut a, &acts, &scales, false);
            q.rows_portable(&mut b, &acts, &scales, false);
            assert_eq!(a, b, "{rows}x{out}x{inputs}");
        }
    }

    #[test]
    fn zero_and_extreme_rows_stay_finite() {
        let w = vec![0.0, 0.0, 1e30, -1e30, 0.5, 0.25];
        let q = QuantDense::new(&w, 3, 2);
        let x = vec![0.0, 0.0, 1.0, -1.0];
        let mut y = vec![0f32; 6];
        q.matmul(&mut y, &x, 1, false);
        assert_eq!(&y[..3], &[0.0, 0.0, 0.0]);
        assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
        assert!((y[5] - 0.25).abs() < 0.01, "{y:?}");
    }
}

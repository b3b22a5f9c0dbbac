//! The element-wise steps of the BERT forward pass (GELU, softmax, layer norm), written so
//! the compiler vectorizes them: `exp` and `erf` are branch-free polynomials instead of
//! libm calls (scalar, and slow on the underflow path), and each kernel is compiled twice,
//! for AVX2+FMA and for the baseline, picked at run time.

/// Compiles `$body` for the baseline and for AVX2+FMA, and calls the second when the CPU
/// has those features.
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn generic($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    generic($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // Safety: the CPU has the features `avx2` is compiled for.
                    return unsafe { avx2($($arg),*) };
                }
            }
            generic($($arg),*)
        }
    };
}

const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in two so that `n * LN2_HI` is exact for the `n` that occur (Cephes' expf).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer, and leaves that
/// integer in the low bits of the sum's representation.
const ROUND: f32 = 12_582_912.0;

/// `exp(x)` for `x <= 0` (relative error about 2e-7; below -87.3 it returns 2^-126 instead
/// of a subnormal or 0, which no caller can tell from 0 after a sum of at least 1).
#[inline(always)]
fn exp_neg(x: f32) -> f32 {
    let x = x.clamp(-87.3, 0.0);
    let t = x * LOG2_E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let e = p * r * r + r + 1.0;
    // The low bits of `t + 127` hold `n + 127`, the biased exponent of 2^n.
    e * f32::from_bits((t + 127.0).to_bits() << 23)
}

/// `erf(x)` by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_7) * t - 0.284_496_72) * t
        + 0.254_829_6)
        * t;
    let y = 1.0 - poly * exp_neg(-a * a);
    y.copysign(x)
}

dispatch! {
    /// `xs[i] = gelu(xs[i] + bias[i % bias.len()])`, the exact (erf) GELU BERT uses.
    pub fn bias_gelu(xs: &mut [f32], bias: &[f32]) {
        for row in xs.chunks_exact_mut(bias.len()) {
            for (x, b) in row.iter_mut().zip(bias) {
                let v = *x + b;
                *x = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
            }
        }
    }
}

/// Lanes of the reductions below: a sum or maximum folded one element at a time is a chain
/// of dependent operations the compiler may not reorder (float addition is not
/// associative), so it runs scalar; sixteen independent partial results vectorize.
const LANES: usize = 16;

/// The sum of `f(x)` over `xs`, in [`LANES`] partial sums.
#[inline(always)]
fn lanes_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut blocks = xs.chunks_exact(LANES);
    for b in &mut blocks {
        for (a, &x) in acc.iter_mut().zip(b) {
            *a += f(x);
        }
    }
    let tail: f32 = blocks.remainder().iter().map(|&x| f(x)).sum();
    acc.iter().sum::<f32>() + tail
}

/// The largest `f(x)` over `xs` (NEG_INFINITY for none), in [`LANES`] partial maxima.
#[inline(always)]
fn lanes_max(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut blocks = xs.chunks_exact(LANES);
    for b in &mut blocks {
        for (a, &x) in acc.iter_mut().zip(b) {
            let v = f(x);
            *a = if v > *a { v } else { *a };
        }
    }
    let tail = blocks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| m.max(f(x)));
    acc.iter().fold(tail, |m, &v| m.max(v))
}

/// 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer (ties to even).
const ROUND_INT: f32 = 12_582_912.0;

dispatch! {
    /// Quantizes a row of activations to int8 with the symmetric scale its largest
    /// magnitude gives (127), stored as `q + 128` for `vpdpbusd`; returns the scale (1 for
    /// a row of zeros or with a non-finite maximum). Rounds by the magic constant, not
    /// `round` (a libm call without SSE4.1).
    pub fn quantize_row(x: &[f32], out: &mut [u8]) -> f32 {
        let m = lanes_max(x, f32::abs);
        let scale = if m > 0.0 && m.is_finite() { m / 127.0 } else { 1.0 };
        let inv = 1.0 / scale;
        for (q, &v) in out.iter_mut().zip(x) {
            // max/min, not clamp: they also turn a NaN into a bound, which the unchecked
            // cast below needs.
            #[allow(clippy::manual_clamp)]
            let r = ((v * inv).max(-127.0).min(127.0) + ROUND_INT) - ROUND_INT;
            // Safety: r is a whole number in -127..=127, so the cast is exact. (The checked
            // `as` cast, saturating and NaN-aware, does not vectorize.)
            let i: i32 = unsafe { r.to_int_unchecked() };
            *q = (i + 128) as u8;
        }
        scale
    }
}

dispatch! {
    /// Softmax of each row of `xs` (rows of `width`) in place.
    pub fn softmax_rows(xs: &mut [f32], width: usize) {
        for row in xs.chunks_exact_mut(width) {
            let max = lanes_max(row, |v| v);
            for v in row.iter_mut() {
                *v = exp_neg(*v - max);
            }
            let sum = lanes_sum(row, |v| v);
            let inv = 1.0 / sum;
            for v in row.iter_mut() {
                *v *= inv;
            }
        }
    }
}

dispatch! {
    /// Layer normalization of each row of `xs` (rows as long as `gamma`) in place.
    pub fn layer_norm_rows(xs: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let width = gamma.len();
        for row in xs.chunks_exact_mut(width) {
            let mean = lanes_sum(row, |v| v) / width as f32;
            let var = lanes_sum(row, |v| (v - mean) * (v - mean)) / width as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_libm() {
        let mut worst: f32 = 0.0;
        for i in 0..=87_000 {
            let x = -(i as f32) / 1000.0;
            let (fast, exact) = (exp_neg(x), x.exp());
            worst = worst.max(((fast - exact) / exact).abs());
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
        assert_eq!(exp_neg(0.0), 1.0);
        assert!(exp_neg(-1e30) < 1e-37 && exp_neg(f32::MIN) < 1e-37);
        assert!(exp_neg(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn gelu_matches_the_exact_definition() {
        let xs: Vec<f32> = (-2000..=2000).map(|i| i as f32 / 100.0).collect();
        let mut got = xs.clone();
        bias_gelu(&mut got, &[0.0]);
        for (x, g) in xs.iter().zip(&got) {
            let x = *x as f64;
            // erf by its Taylor series, which converges well in f64 for |x| <= 3.
            if x.abs() > 3.0 {
                continue;
            }
            let z = x / std::f64::consts::SQRT_2;
            let mut term = z;
            let mut sum = z;
            for n in 1..200 {
                term *= -z * z / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            let erf = sum * 2.0 / std::f64::consts::PI.sqrt();
            let exact = 0.5 * x * (1.0 + erf);
            assert!(
                (*g as f64 - exact).abs() < 1e-6,
                "gelu({x}) = {g}, want {exact}"
            );
        }
        // Far out: the identity and zero.
        assert!((got[4000] - 20.0).abs() < 1e-5 && got[0].abs() < 1e-5);
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_order() {
        let mut xs = vec![1.0, 2.0, 3.0, -1e30, 0.0, 0.0, 0.0, 0.0];
        softmax_rows(&mut xs, 4);
        let s: f32 = xs[..4].iter().sum();
        assert!((s - 1.0).abs() < 1e-6);
        assert!(xs[2] > xs[1] && xs[1] > xs[0] && xs[3] < 1e-30);
        let want = [1.0f32.exp(), 2.0f32.exp(), 3.0f32.exp()];
        let total: f32 = want.iter().sum();
        for (g, w) in xs.iter().zip(want) {
            assert!((g - w / total).abs() < 1e-6);
        }
        assert!(xs[4..].iter().all(|v| (v - 0.25).abs() < 1e-7));
    }

    #[test]
    fn quantize_row_keeps_every_value_within_half_a_step() {
        let mut out = [0u8; 5];
        assert_eq!(quantize_row(&[127.0, -64.0, 0.0, 0.4, 0.6], &mut out), 1.0);
        assert_eq!(out, [255, 64, 128, 128, 129]);
        // Past the lanes, with the largest magnitude in the tail.
        let x: Vec<f32> = (0..37).map(|i| (i as f32 * 0.731).sin() * 3.0).collect();
        let mut out = vec![0u8; 37];
        let scale = quantize_row(&x, &mut out);
        let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!((scale - max / 127.0).abs() < 1e-7);
        for (q, v) in out.iter().zip(&x) {
            let back = (*q as f32 - 128.0) * scale;
            assert!(
                (back - v).abs() <= scale * 0.5 + 1e-6,
                "{v} came back as {back}"
            );
        }
        assert_eq!(quantize_row(&[0.0; 3], &mut out[..3]), 1.0);
        assert_eq!(&out[..3], &[128, 128, 128]);
        // A NaN or an infinity is clamped, not undefined behaviour.
        quantize_row(&[f32::NAN, f32::INFINITY, -1.0], &mut out[..3]);
        assert_eq!(&out[..3], &[1, 255, 127]);
    }

    #[test]
    fn layer_norm_centres_and_scales() {
        let mut xs = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm_rows(&mut xs, &[1.0, 1.0, 2.0, 2.0], &[0.0, 0.0, 0.0, 1.0], 1e-12);
        let sd = 1.25f32.sqrt();
        let want = [-1.5 / sd, -0.5 / sd, 2.0 * 0.5 / sd, 2.0 * 1.5 / sd + 1.0];
        for (g, w) in xs.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{g} vs {w}");
        }
    }
}

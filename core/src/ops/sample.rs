//! Picking the next token from a decoder's logits on the GPU (`shaders/sample.wgsl`): a
//! repetition penalty over the recent tokens, then greedy, or temperature, top-k, top-p and a
//! seeded draw, in one dispatch of one workgroup, the token left on the GPU.
//!
//! [`sample_token_host`] is the definition and the CPU reference: the kernel computes exactly
//! it, bit for bit, on every conforming device. What makes that possible: the float work is
//! a handful of IEEE operations that Vulkan requires correctly rounded (subtraction,
//! multiplication, comparisons; no division, no `exp`, no multiply followed by an add that a
//! driver could fuse), subnormals are flushed to +0 explicitly on both sides (drivers may flush
//! them, or not), no float operation can produce an infinity or NaN on the GPU (WGSL leaves
//! those undefined), and everything after that is integer: each kept token's weight
//! `2^B · 2^(-x)` (x its scaled logit distance below the largest, in 2^-16 steps, through two
//! 256-entry tables built here and compiled into the kernel) is an integer, so sums are exact
//! in any order, and top-k, top-p and the draw are radix selections over the same
//! order — logit descending, the lower index first among equals — that the host sorts by.

use crate::dtype::DType;
use crate::exec::{check_indexable, check_same_device, Launch, Params};
use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::fmt::Write;

const SAMPLE: &str = include_str!("../../../shaders/sample.wgsl");
const MULHILO: &str = include_str!("../../../shaders/mulhilo.wgsl");

/// Fractional bits of a weight's exponent: weights are `2^B · 2^(-n / 2^EXP_FRAC_BITS)`.
const EXP_FRAC_BITS: u32 = 16;
/// The most weight bits: the largest logit's weight is `2^B`, B chosen so that a whole
/// vocabulary's weights sum within a u32 (the kernel's histograms), at most this.
const MAX_WEIGHT_BITS: u32 = 24;
/// Finite logits are clamped to ±2^100 for the weights (not for the order), so that a
/// difference of two never overflows.
const WEIGHT_CLAMP: f32 = 1.267_650_6e30;
/// top-p as a fraction of 2^24.
const TOP_P_ONE: u32 = 1 << 24;
/// The kernel's single workgroup (shaders/sample.wgsl's `WGS`).
const THREADS: usize = 256;

/// How the token is picked; see [`sample_token_host`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleParams {
    /// `<= 0` or NaN: greedy (the largest penalised logit).
    pub temperature: f32,
    /// Keep the k most likely (0: all).
    pub top_k: usize,
    /// Keep the shortest most-likely prefix whose weight reaches this share (`>= 1` or NaN: all).
    pub top_p: f32,
    /// llama.cpp's repetition penalty; active when finite, > 0 and != 1.
    pub repetition_penalty: f32,
    /// The draw: a uniform number in [0, 1) as a 32-bit fraction (`r / 2^32`).
    pub random: u32,
}

/// Everything the host derives from [`SampleParams`] and the vocabulary size, once, for both
/// the kernel and the reference.
#[derive(Debug, Clone, Copy)]
struct Derived {
    greedy: bool,
    penalty: bool,
    /// The factor a positive logit is multiplied by (1 / penalty) and a negative one's.
    inv_pen: f32,
    pen: f32,
    /// Positive logits above this (negative ones below minus `lim_neg`) become ±inf: the
    /// product would overflow.
    lim_pos: f32,
    lim_neg: f32,
    /// log2(e) / temperature.
    c: f32,
    /// A distance below the largest logit past which the weight is 0 (and `d · c` stays small).
    lim_d: f32,
    top_k: u32,
    /// top-p in 2^-24 units; `TOP_P_ONE` or more: off.
    top_p: u32,
    random: u32,
    /// B: the largest logit's weight is 2^B.
    b: u32,
}

/// `x`, with a subnormal or -0 made +0 (both sides flush explicitly: a GPU may or may not).
fn flush(x: f32) -> f32 {
    if x.to_bits() & 0x7f80_0000 == 0 {
        0.0
    } else {
        x
    }
}

/// The largest f32 `l` with `l · f <= f32::MAX` exactly (`f` >= 0 and normal or 0).
fn mul_limit(f: f32) -> f32 {
    if f <= 1.0 {
        return f32::MAX;
    }
    let mut l = (f32::MAX as f64 / f as f64) as f32;
    // f64 holds the product of two f32s exactly.
    while l as f64 * f as f64 > f32::MAX as f64 {
        l = f32::from_bits(l.to_bits() - 1);
    }
    l
}

/// Weight bits for a vocabulary of `vocab`: `vocab · 2^B` fits a u32.
pub fn weight_bits(vocab: usize) -> u32 {
    let per = u32::MAX as u64 / vocab.max(1) as u64;
    (63 - per.max(1).leading_zeros()).min(MAX_WEIGHT_BITS)
}

impl Derived {
    fn new(p: &SampleParams, vocab: usize) -> Derived {
        let rp = p.repetition_penalty;
        let penalty = rp.is_finite() && rp > 0.0 && rp != 1.0;
        let (inv_pen, pen) = if penalty { (flush((1.0 / rp).min(f32::MAX)), flush(rp)) } else { (1.0, 1.0) };
        let t = p.temperature;
        let greedy = t.is_nan() || t <= 0.0;
        let b = weight_bits(vocab);
        let c = if greedy { 0.0 } else { flush((std::f64::consts::LOG2_E / t as f64).min(f32::MAX as f64) as f32) };
        // |d| <= lim_d keeps |d · c| <= 2 (B + 1) (a little more after rounding): no overflow,
        // and anything further is below 2^-(B+1) of the largest weight anyway.
        let lim_d =
            if c == 0.0 { f32::MAX } else { flush((2.0 * (b + 1) as f64 / c as f64).min(f32::MAX as f64) as f32) };
        let top_p = if p.top_p.is_nan() || p.top_p >= 1.0 {
            TOP_P_ONE
        } else {
            (p.top_p.max(0.0) as f64 * TOP_P_ONE as f64).round() as u32
        };
        Derived {
            greedy,
            penalty,
            inv_pen,
            pen,
            lim_pos: mul_limit(inv_pen),
            lim_neg: mul_limit(pen),
            c,
            lim_d,
            top_k: p.top_k.min(u32::MAX as usize) as u32,
            top_p,
            random: p.random,
            b,
        }
    }

    fn penalize(&self, x: f32) -> f32 {
        if !x.is_finite() {
            x
        } else if x > 0.0 {
            if x > self.lim_pos {
                f32::INFINITY
            } else {
                flush(x * self.inv_pen)
            }
        } else if -x > self.lim_neg {
            f32::NEG_INFINITY
        } else {
            flush(x * self.pen)
        }
    }

    /// The integer weight of a finite logit `z` below the largest, `zmax`.
    fn weight(&self, z: f32, zmax: f32, tables: &Tables) -> u32 {
        let d = flush(z.clamp(-WEIGHT_CLAMP, WEIGHT_CLAMP) - zmax.clamp(-WEIGHT_CLAMP, WEIGHT_CLAMP));
        if d == 0.0 {
            return 1 << self.b;
        }
        if -d > self.lim_d {
            return 0;
        }
        let s = d * self.c;
        let n = (-s * 65536.0) as u32;
        let q = n >> EXP_FRAC_BITS;
        if q > self.b {
            return 0;
        }
        let f = n & 0xffff;
        let frac = ((tables.hi[(f >> 8) as usize] as u64 * tables.lo[(f & 255) as usize] as u64) >> 31) as u32;
        frac >> (31 - self.b + q)
    }
}

/// `2^31 · 2^(-j/256)` and `2^31 · 2^(-j/65536)`, j < 256: a weight's fraction is their
/// product's top bits.
struct Tables {
    hi: [u32; 256],
    lo: [u32; 256],
}

fn tables() -> &'static Tables {
    static T: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = Tables { hi: [0; 256], lo: [0; 256] };
        for j in 0..256 {
            t.hi[j] = ((1u64 << 31) as f64 * (-(j as f64) / 256.0).exp2()).round() as u32;
            t.lo[j] = ((1u64 << 31) as f64 * (-(j as f64) / 65536.0).exp2()).round() as u32;
        }
        t
    })
}

/// The order key: larger logit, larger key (as u32); -0 and +0 never both occur (flushed).
fn order_key(x: f32) -> u32 {
    let u = x.to_bits();
    if u & 0x8000_0000 != 0 {
        !u
    } else {
        u | 0x8000_0000
    }
}

/// The token for `logits` (a vocabulary's f32s), `recent` being the tokens the repetition
/// penalty looks at (any order, repeats and ids past the vocabulary ignored). The definition:
///
/// 1. Every logit is flushed (subnormal or -0 to +0). With a penalty `r` active (finite, > 0,
///    != 1), each distinct recent token's finite logit `x` becomes `x · (1/r)` if `x > 0`,
///    else `x · r` (1/r rounded to f32 once; a product that would overflow is ±inf), flushed.
/// 2. Greedy (temperature <= 0 or NaN): the largest logit that is not NaN, the lowest index
///    among equals; all NaN: 0. Otherwise the same when no logit is finite.
/// 3. The finite logits in order: larger first, the lower index first among equals. Top-k
///    (k > 0) keeps the first k. Each kept logit `z` gets the integer weight
///    `floor(2^B · 2^(-n/65536))`, `n = trunc(-((z' - zmax') · c) · 65536)` with `z'` clamped
///    to ±2^100, `c = f32(log2(e) / temperature)` and `zmax` the first (largest) logit, B =
///    [`weight_bits`] (16 for a 49,152 vocabulary, 24 at most): `exp((z - zmax) / T)` to about
///    1e-5 relative, the largest 2^B, tokens below 2^-B of it 0 (never drawn).
/// 4. Top-p (< 1): the shortest prefix whose weight reaches `ceil(total · round(p · 2^24) /
///    2^24)` (at least 1).
/// 5. The draw: `u = floor(random · total / 2^32)` over the kept weights' total; the first
///    kept token whose running weight exceeds `u`.
pub fn sample_token_host(logits: &[f32], recent: &[u32], p: &SampleParams) -> u32 {
    let v = logits.len();
    let d = Derived::new(p, v);
    let mut z: Vec<f32> = logits.iter().map(|&x| flush(x)).collect();
    if d.penalty {
        let mut seen: Vec<u32> = recent.to_vec();
        seen.sort_unstable();
        seen.dedup();
        for t in seen {
            if let Some(x) = z.get_mut(t as usize) {
                *x = d.penalize(*x);
            }
        }
    }
    // Greedy: NaN never wins, the lowest index among equals.
    let mut best: Option<usize> = None;
    for (i, &x) in z.iter().enumerate() {
        if !x.is_nan() && best.is_none_or(|b| order_key(x) > order_key(z[b])) {
            best = Some(i);
        }
    }
    let argmax = best.unwrap_or(0) as u32;
    if d.greedy {
        return argmax;
    }
    let mut idx: Vec<usize> = (0..v).filter(|&i| z[i].is_finite()).collect();
    if idx.is_empty() {
        return argmax;
    }
    idx.sort_unstable_by(|&a, &b| order_key(z[b]).cmp(&order_key(z[a])).then(a.cmp(&b)));
    if d.top_k > 0 {
        idx.truncate(d.top_k as usize);
    }
    let tables = tables();
    let zmax = z[idx[0]];
    let w: Vec<u32> = idx.iter().map(|&i| d.weight(z[i], zmax, tables)).collect();
    let mut keep = idx.len();
    if d.top_p < TOP_P_ONE {
        let total: u64 = w.iter().map(|&x| x as u64).sum();
        let target = ((total * d.top_p as u64).div_ceil(TOP_P_ONE as u64)).max(1);
        let mut acc = 0u64;
        for (j, &x) in w.iter().enumerate() {
            acc += x as u64;
            if acc >= target {
                keep = j + 1;
                break;
            }
        }
    }
    let total: u64 = w[..keep].iter().map(|&x| x as u64).sum();
    let u = (d.random as u64 * total) >> 32;
    let mut acc = 0u64;
    for j in 0..keep {
        acc += w[j] as u64;
        if acc > u {
            return idx[j] as u32;
        }
    }
    idx[keep - 1] as u32
}

/// The most recent ids [`sample_token`]'s ring may hold; a longer ring is refused, not run. Its
/// kernel applies each distinct id's penalty once by having every occurrence write the same
/// value, penalised from the logit (a pass linear in the ring's length). It used to check the
/// ring's earlier slots instead, a pass quadratic in the length that llvmpipe's loop limiter
/// cut short on lavapipe past ~5000 ids (core/src/loop_budget.rs).
pub const SAMPLE_MAX_RECENT: usize = 8192;

/// [`sample_token_host`] on the GPU: `logits` f32 of `vocab` elements (any shape), `recent` a
/// u32 (or i32) ring of the last tokens (ids >= vocab, e.g. u32::MAX, are empty slots). The
/// token comes back as an i32 tensor of shape [1] and, when `ring_slot` is given, is also
/// written into `recent[ring_slot]` after the penalty has read it, so a decode loop keeps the
/// ring on the GPU. One dispatch (one workgroup); a scratch of 2 · vocab u32s. A ring of more
/// than [`SAMPLE_MAX_RECENT`] ids is InvalidArgument.
pub fn sample_token(logits: &Tensor, recent: &Tensor, p: &SampleParams, ring_slot: Option<usize>) -> Result<Tensor> {
    let device = check_same_device(&[logits, recent])?;
    if logits.dtype() != DType::F32 {
        return Err(Error::DTypeMismatch(format!("sample_token: logits must be f32, got {}", logits.dtype())));
    }
    if !matches!(recent.dtype(), DType::U32 | DType::I32) {
        return Err(Error::DTypeMismatch(format!("sample_token: recent must be u32 or i32, got {}", recent.dtype())));
    }
    let v = logits.numel();
    if v == 0 {
        return Err(Error::InvalidArgument("sample_token: empty logits".into()));
    }
    check_indexable(2 * v)?;
    if v > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!("sample_token: {v} logits are past i32 token ids")));
    }
    let n_recent = recent.numel();
    if n_recent > SAMPLE_MAX_RECENT {
        return Err(Error::InvalidArgument(format!(
            "sample_token: a ring of {n_recent} recent ids is over the limit of {SAMPLE_MAX_RECENT} (a shorter \
             repetition window, or the host sampler)"
        )));
    }
    let slot = match ring_slot {
        Some(s) if s >= n_recent => {
            return Err(Error::InvalidArgument(format!("sample_token: ring slot {s} of a ring of {n_recent}")));
        }
        Some(s) => s as u32,
        None => u32::MAX,
    };
    let d = Derived::new(p, v);
    let out = Tensor::empty_on(&device, &[1], DType::I32)?;
    let scratch = Tensor::empty_on(&device, &[2 * v], DType::U32)?;
    // A ring can't be bound empty: an empty one is replaced by a slot no token matches.
    let dummy;
    let ring = if n_recent == 0 {
        dummy = Tensor::from_slice_on(&device, &[u32::MAX], &[1])?;
        &dummy
    } else {
        recent
    };
    let flags = d.greedy as u32 | (d.penalty as u32) << 1;
    let params = Params::new()
        .u32(v)
        .u32(if d.penalty { n_recent } else { 0 })
        .u32(slot)
        .u32(flags)
        .u32(d.top_k)
        .u32(d.top_p)
        .u32(d.random)
        .u32(d.b)
        .f32(d.inv_pen)
        .f32(d.pen)
        .f32(d.lim_pos)
        .f32(d.lim_neg)
        .f32(d.c)
        .f32(d.lim_d)
        .f32(WEIGHT_CLAMP)
        .u32(0u32);
    Launch {
        key: crate::pipeline::PipelineKey::new("sample_token", &[]),
        source: Box::new(|| render(SAMPLE, &[("TABLES", &table_stores())]) + MULHILO),
        tensors: &[logits, ring, &scratch, &out],
        params: Some(params),
        groups: [1, 1, 1],
    }
    .run(&device)?;
    Ok(out)
}

/// WGSL statements filling the kernel's workgroup tables from [`tables`] (a runtime-indexed
/// const array would be copied per access by some compilers).
fn table_stores() -> String {
    let t = tables();
    let mut s = String::new();
    for j in 0..256 {
        let _ = writeln!(s, "        exp_hi[{j}] = {}u; exp_lo[{j}] = {}u;", t.hi[j], t.lo[j]);
    }
    s
}

const _: () = assert!(THREADS == 256);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_follow_exp_to_about_1e_5() {
        let p = SampleParams { temperature: 0.7, top_k: 0, top_p: 1.0, repetition_penalty: 1.0, random: 0 };
        let d = Derived::new(&p, 49152);
        assert_eq!(d.b, 16);
        let t = tables();
        for i in 0..2000 {
            let z = -(i as f32) * 0.003;
            let w = d.weight(z, 0.0, t) as f64;
            let want = (1u64 << 16) as f64 * ((z as f64) / 0.7).exp();
            assert!((w - want).abs() <= 1.0 + want * 2e-5, "{z}: {w} vs {want}");
        }
        assert_eq!(d.weight(5.0, 5.0, t), 1 << 16);
        assert_eq!(d.weight(-1e30, 3e38, t), 0);
        assert_eq!(weight_bits(1), 24);
        assert_eq!(weight_bits(255), 24);
        assert_eq!(weight_bits(257), 23);
        assert_eq!(weight_bits(49152), 16);
        assert!((49152u64 << 16) <= u32::MAX as u64);
    }

    #[test]
    fn penalty_limits_never_overflow() {
        for f in [1.0f32, 1.1, 2.0, 1e10, 3.4e38, 1e-30] {
            let l = mul_limit(f);
            assert!((l * f).is_finite(), "{f}");
            assert!((f32::from_bits(l.to_bits() + 1) as f64 * f as f64) > f32::MAX as f64 || l == f32::MAX);
        }
    }
}

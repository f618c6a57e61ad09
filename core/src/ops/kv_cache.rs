//! A decoder's KV cache written in place (`shaders/rope_kv_cache.wgsl`): the fused QKV
//! projection of new positions is split into heads, RoPE'd, and its keys and values stored into
//! caches allocated once for many positions, so that a decode step neither copies the cache
//! (as concatenation would, O(len) bytes per token) nor spends dispatches on splits and
//! transposes. [`crate::ops::attention_prefix`] then reads the filled prefix in place.

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, check_same_device, enables, groups_1d, Launch, Params};
use crate::ops::attention::decode_fusion;
use crate::ops::elementwise::with_special;
use crate::ops::quant::{check_fused, matvec, matvec_takes};
use crate::ops::quant_rope::{rope_pair_source, RopeToCache, ROPE_COMMON};
use crate::ops::{QuantFormat, QuantFusion};
use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};

const ROPE_KV_CACHE: &str = include_str!("../../../shaders/rope_kv_cache.wgsl");
const ROPE_KV_CACHE_ROWS: &str = include_str!("../../../shaders/rope_kv_cache_rows.wgsl");

/// Splits `qkv` [L, (H + 2·Hkv)·D] — per position the H query heads, then the Hkv key heads,
/// then the Hkv value heads, D values each — applies [`crate::ops::rope`]'s rotation (positions
/// `pos .. pos + L`, `base`) to queries and keys, writes keys and values **into** `k_cache` and
/// `v_cache` ([Hkv, Lmax, D] each) at rows `pos .. pos + L`, and returns the queries [H, L, D].
/// Rows of the caches outside that range are left as they are. Float dtypes; all of one dtype.
pub fn rope_qkv_to_cache(
    qkv: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    pos: usize,
    base: f32,
) -> Result<Tensor> {
    rope_qkv_to_cache_scaled(qkv, k_cache, v_cache, n_heads, pos, base, None)
}

/// [`rope_qkv_to_cache`] with RoPE frequency factors (Llama 3.1+'s `rope_freqs`, as llama.cpp
/// applies them): pair i turns by pos · base^(-i / half) / `freq_factors[i]`. `freq_factors`
/// is an f32 tensor of D/2 values. None is [`rope_qkv_to_cache`] exactly (the same kernel).
pub fn rope_qkv_to_cache_scaled(
    qkv: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    pos: usize,
    base: f32,
    freq_factors: Option<&Tensor>,
) -> Result<Tensor> {
    let mut all = vec![qkv, k_cache, v_cache];
    all.extend(freq_factors);
    let device = check_same_device(&all)?;
    let dtype = qkv.dtype();
    let (nkv, cap, d) = check_caches("rope_qkv_to_cache", dtype, k_cache, v_cache, &[qkv], pos, base)?;
    check_freq_factors("rope_qkv_to_cache", freq_factors, d)?;
    let width = (n_heads + 2 * nkv) * d;
    if qkv.ndim() != 2 || qkv.shape()[1] != width {
        return Err(Error::ShapeMismatch(format!(
            "rope_qkv_to_cache: qkv must be [L, {width}] for {n_heads} heads and {nkv} KV heads of {d}, got {:?}",
            qkv.shape()
        )));
    }
    let len = qkv.shape()[0];
    check_rows("rope_qkv_to_cache", pos, len, cap)?;
    check_indexable(qkv.numel())?;
    let q = Tensor::empty_on(&device, &[n_heads, len, d], dtype)?;
    let half = d / 2;
    let pairs = len * (n_heads + 2 * nkv) * half;
    if pairs == 0 {
        return Ok(q);
    }
    let params = Params::new().u32(pairs).u32(half).u32(len);
    let pos_word = params.len();
    let params = params
        .u32(pos)
        .f32((base as f64).log2() as f32)
        .f32((1.0 / half as f64) as f32)
        .u32(n_heads)
        .u32(nkv)
        .u32(cap)
        .u32(0u32)
        .u32(0u32)
        .u32(0u32);
    let enable = enables(&[dtype]);
    let mut tensors = vec![qkv, &q, k_cache, v_cache];
    tensors.extend(freq_factors);
    let (factors, slot) = (freq_factors.is_some(), tensors.len());
    let groups = groups_1d(&device, pairs)?;
    if crate::device::capture::capturing(&device) {
        // A plan moves the rows written on with the position (`plan.rs`).
        crate::device::capture::follow(
            &device,
            Box::new(move |delta, w| {
                let p = pos.checked_add(delta).filter(|p| p + len <= cap)?;
                w[pos_word] = p as u32;
                Some(groups)
            }),
        );
    }
    Launch {
        key: crate::pipeline::PipelineKey::new("rope_kv_cache", &[dtype as u32, factors as u32]),
        source: Box::new(move || {
            let (ff, params) = rope_pair_source(factors, slot);
            with_special(
                render(
                    ROPE_KV_CACHE,
                    &[("ENABLE", enable), ("T", dtype.wgsl()), ("FREQ_FACTORS", &ff), ("PARAMS", &params)],
                ) + ROPE_COMMON,
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups,
    }
    .run(&device)?;
    Ok(q)
}

/// Batched decode's [`rope_qkv_to_cache`]: row b of `qkv` [B, (H + 2·Hkv)·D] is one token of
/// sequence b at position `positions[b]`; its queries are RoPE'd into the result [B, H, D], its
/// keys RoPE'd and its values copied **into** sequence b's caches, `k_cache[b]` and `v_cache[b]`
/// of [B, Hkv, Lmax, D], at row `positions[b]` (every other row kept). Row b gets the bits
/// `rope_qkv_to_cache(qkv[b..b+1], k_cache[b], v_cache[b], n_heads, positions[b], base)` gives
/// (the same rotation). The positions are uploaded here (B words a step) and checked against
/// Lmax. Float dtypes; all of one dtype.
pub fn rope_qkv_rows_to_cache(
    qkv: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    positions: &[usize],
    base: f32,
) -> Result<Tensor> {
    rope_qkv_rows_to_cache_scaled(qkv, k_cache, v_cache, n_heads, positions, base, None)
}

/// [`rope_qkv_rows_to_cache`] with RoPE frequency factors, as [`rope_qkv_to_cache_scaled`].
pub fn rope_qkv_rows_to_cache_scaled(
    qkv: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    positions: &[usize],
    base: f32,
    freq_factors: Option<&Tensor>,
) -> Result<Tensor> {
    const WHAT: &str = "rope_qkv_rows_to_cache";
    let mut all = vec![qkv, k_cache, v_cache];
    all.extend(freq_factors);
    let device = check_same_device(&all)?;
    let dtype = qkv.dtype();
    let cs = k_cache.shape();
    let rows = positions.len();
    if cs.len() != 4 || cs[0] != rows {
        return Err(Error::ShapeMismatch(format!(
            "{WHAT}: caches must be [B, Hkv, Lmax, D] for {rows} positions, got {cs:?}"
        )));
    }
    if v_cache.shape() != cs {
        return Err(Error::ShapeMismatch(format!(
            "{WHAT}: caches must both be [B, Hkv, Lmax, D], got {cs:?} and {:?}",
            v_cache.shape()
        )));
    }
    // `rope_qkv_to_cache`'s checks, on the caches seen as [B·Hkv, Lmax, D] (views).
    let view = |c: &Tensor| c.reshape(&[-1, cs[2] as isize, cs[3] as isize]);
    let (_, cap, d) = check_caches(WHAT, dtype, &view(k_cache)?, &view(v_cache)?, &[qkv], 0, base)?;
    check_freq_factors(WHAT, freq_factors, d)?;
    let nkv = cs[1];
    let width = (n_heads + 2 * nkv) * d;
    if qkv.ndim() != 2 || qkv.shape() != [rows, width] {
        return Err(Error::ShapeMismatch(format!(
            "{WHAT}: qkv must be [{rows}, {width}] for {n_heads} heads and {nkv} KV heads of {d}, got {:?}",
            qkv.shape()
        )));
    }
    for (b, &pos) in positions.iter().enumerate() {
        check_rows(WHAT, pos, 1, cap).map_err(|e| Error::InvalidArgument(format!("sequence {b}: {e}")))?;
    }
    check_indexable(qkv.numel())?;
    let q = Tensor::empty_on(&device, &[rows, n_heads, d], dtype)?;
    let half = d / 2;
    let pairs = rows * (n_heads + 2 * nkv) * half;
    if pairs == 0 {
        return Ok(q);
    }
    let pos: Vec<u32> = positions.iter().map(|&p| p as u32).collect();
    let pos = Tensor::from_slice_on(&device, &pos, &[rows])?;
    let params = Params::new()
        .u32(pairs)
        .u32(half)
        .f32((base as f64).log2() as f32)
        .f32((1.0 / half as f64) as f32)
        .u32(n_heads)
        .u32(nkv)
        .u32(cap)
        .u32(0u32);
    let enable = enables(&[dtype]);
    let mut tensors = vec![qkv, &pos, &q, k_cache, v_cache];
    tensors.extend(freq_factors);
    let (factors, slot) = (freq_factors.is_some(), tensors.len());
    Launch {
        key: format!("rope_kv_cache_rows:{dtype}:{factors}"),
        source: Box::new(move || {
            let (ff, params) = rope_pair_source(factors, slot);
            with_special(
                render(
                    ROPE_KV_CACHE_ROWS,
                    &[("ENABLE", enable), ("T", dtype.wgsl()), ("FREQ_FACTORS", &ff), ("PARAMS", &params)],
                ) + ROPE_COMMON,
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups: groups_1d(&device, pairs)?,
    }
    .run(&device)?;
    Ok(q)
}

/// The checks `rope_qkv_to_cache` and `quant_qkv_rope_to_cache` share: float caches [Hkv, Lmax,
/// D] of `dtype` (D even), distinct from each other and from `others`, a positive finite
/// `base`. Returns (Hkv, Lmax, D).
fn check_caches(
    what: &str,
    dtype: DType,
    k_cache: &Tensor,
    v_cache: &Tensor,
    others: &[&Tensor],
    pos: usize,
    base: f32,
) -> Result<(usize, usize, usize)> {
    if !dtype.is_float() || k_cache.dtype() != dtype || v_cache.dtype() != dtype {
        return Err(Error::DTypeMismatch(format!(
            "{what}: input {dtype}, caches {} and {}: one float dtype",
            k_cache.dtype(),
            v_cache.dtype()
        )));
    }
    check_f16(k_cache.device(), &[dtype])?;
    let cs = k_cache.shape();
    if cs.len() != 3 || v_cache.shape() != cs {
        return Err(Error::ShapeMismatch(format!(
            "{what}: caches must both be [Hkv, Lmax, D], got {cs:?} and {:?}",
            v_cache.shape()
        )));
    }
    let (nkv, cap, d) = (cs[0], cs[1], cs[2]);
    if d == 0 || d % 2 != 0 {
        return Err(Error::InvalidArgument(format!("{what}: head dimension {d} must be even and > 0")));
    }
    if pos > cap {
        return Err(Error::InvalidArgument(format!("{what}: position {pos} is past a cache of {cap} rows")));
    }
    if !(base.is_finite() && base > 0.0) {
        return Err(Error::InvalidArgument(format!("{what}: base must be positive and finite, got {base}")));
    }
    if k_cache.shares_buffer(v_cache) || others.iter().any(|t| k_cache.shares_buffer(t) || v_cache.shares_buffer(t)) {
        return Err(Error::InvalidArgument(format!("{what}: the input and the two caches must be distinct tensors")));
    }
    for t in [k_cache, v_cache] {
        check_indexable(t.numel())?;
    }
    Ok((nkv, cap, d))
}

/// The rope kernels' `rope_pair(pos, i)` (pair i's (cos, sin) at `pos`) and their parameter
/// block's binding: with frequency factors, the factors are bound at `slot - 1` and divide each
/// pair's turn, the parameters at `slot`; without, `rope_cos_sin` as `ops::rope` turns.
/// RoPE frequency factors: an f32 vector of `d / 2` values. Their values are not read back (a
/// decode step must not wait on the GPU): a zero or NaN factor gives NaN outputs, as any NaN
/// operand does; kiln-models checks a model's factors when it loads them.
fn check_freq_factors(what: &str, factors: Option<&Tensor>, d: usize) -> Result<()> {
    let Some(f) = factors else { return Ok(()) };
    if f.dtype() != DType::F32 || f.shape() != [d / 2] {
        return Err(Error::ShapeMismatch(format!(
            "{what}: frequency factors must be f32 [{}] for heads of {d}, got {} {:?}",
            d / 2,
            f.dtype(),
            f.shape()
        )));
    }
    Ok(())
}

/// Rows pos .. pos + len must fit a cache of `cap`.
fn check_rows(what: &str, pos: usize, len: usize, cap: usize) -> Result<()> {
    if pos.checked_add(len).is_none_or(|end| end > cap) {
        return Err(Error::InvalidArgument(format!(
            "{what}: rows {pos}..{pos}+{len} do not fit a cache of {cap} rows"
        )));
    }
    Ok(())
}

/// A decoder layer's QKV projection, RoPE and KV-cache write in one: what
/// `rope_qkv_to_cache(&quant_matmul_fused(x, w, format, (H + 2·Hkv)·D, {rms_norm}), k_cache,
/// v_cache, n_heads, pos, base)` gives, for x [L, K] and W quantized [(H + 2·Hkv)·D, K] (the
/// query, key and value rows stacked). For decode (L up to the matrix-vector kernel's rows) it
/// is one dispatch, the rotation and the stores folded into the matvec's epilogue
/// (`shaders/quant_matvec_rope.wgsl`): the same operations in the same order on the same
/// rounded sums, hence the same bits (up to the driver contracting the rotation's multiply-adds
/// differently in the two kernels: one rounding of the f32 rotation). Longer L, and
/// `KILN_DECODE_FUSE=0`, run the two ops.
#[allow(clippy::too_many_arguments)]
pub fn quant_qkv_rope_to_cache(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    rms_norm: Option<(&Tensor, f32)>,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    pos: usize,
    base: f32,
) -> Result<Tensor> {
    quant_qkv_rope_to_cache_scaled(x, w, format, rms_norm, k_cache, v_cache, n_heads, pos, base, None)
}

/// [`quant_qkv_rope_to_cache`] with RoPE frequency factors (Llama 3.1+'s `rope_freqs`), as
/// [`rope_qkv_to_cache_scaled`] takes them: the same bits as the matmul and that op.
#[allow(clippy::too_many_arguments)]
pub fn quant_qkv_rope_to_cache_scaled(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    rms_norm: Option<(&Tensor, f32)>,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    pos: usize,
    base: f32,
    freq_factors: Option<&Tensor>,
) -> Result<Tensor> {
    // W's rows are the whole stack; the stack op checks the caches (a malformed cache is refused
    // there before the rows are looked at, so 0 stands in for them).
    let rows = match k_cache.shape() {
        [nkv, _, d] => (n_heads + 2 * nkv) * d,
        _ => 0,
    };
    let part = QuantRows { w, format, rows };
    quant_qkv_stack_rope_to_cache(x, &[part], rms_norm, k_cache, v_cache, n_heads, pos, base, freq_factors)
}

/// Rows of a stacked matrix held in one quantized tensor: `w` is quantized [rows, K] in `format`.
#[derive(Clone, Copy, Debug)]
pub struct QuantRows<'a> {
    pub w: &'a Tensor,
    pub format: QuantFormat,
    pub rows: usize,
}

/// [`quant_qkv_rope_to_cache_scaled`] for a QKV stack held in several quantized tensors, in
/// order (e.g. a Q4_K_M layer: Q and K rows in Q4_K, V rows in Q6_K), each whole heads of D
/// rows: what the products side by side, then [`rope_qkv_to_cache_scaled`], give. For decode
/// it is one dispatch per part, each RoPE-ing and storing its own heads in its epilogue (no
/// concatenation, no separate rotation); longer L, and `KILN_DECODE_FUSE=0`, run the products,
/// their concatenation and the rotation.
#[allow(clippy::too_many_arguments)]
pub fn quant_qkv_stack_rope_to_cache(
    x: &Tensor,
    parts: &[QuantRows],
    rms_norm: Option<(&Tensor, f32)>,
    k_cache: &Tensor,
    v_cache: &Tensor,
    n_heads: usize,
    pos: usize,
    base: f32,
    freq_factors: Option<&Tensor>,
) -> Result<Tensor> {
    const WHAT: &str = "quant_qkv_rope_to_cache";
    let dtype = x.dtype();
    let mut others = vec![x];
    others.extend(parts.iter().map(|p| p.w));
    others.extend(rms_norm.map(|(g, _)| g));
    let (nkv, cap, d) = check_caches(WHAT, dtype, k_cache, v_cache, &others, pos, base)?;
    check_freq_factors(WHAT, freq_factors, d)?;
    others.extend([k_cache, v_cache]);
    others.extend(freq_factors);
    check_same_device(&others)?;
    let width = (n_heads + 2 * nkv) * d;
    if parts.is_empty() || parts.iter().any(|p| p.rows == 0 || !p.rows.is_multiple_of(d)) {
        return Err(Error::InvalidArgument(format!(
            "{WHAT}: every part of the stack must be whole heads of {d} rows, got {:?}",
            parts.iter().map(|p| p.rows).collect::<Vec<_>>()
        )));
    }
    let total: usize = parts.iter().map(|p| p.rows).sum();
    if total != width {
        return Err(Error::ShapeMismatch(format!(
            "{WHAT}: the parts hold {total} rows, {n_heads} + 2 x {nkv} heads of {d} are {width}"
        )));
    }
    let fusion = QuantFusion { rms_norm, ..Default::default() };
    if x.ndim() != 2 {
        return Err(Error::ShapeMismatch(format!("{WHAT}: x must be [L, K], got {:?}", x.shape())));
    }
    let (len, k) = (x.shape()[0], x.shape()[1]);
    check_rows(WHAT, pos, len, cap)?;
    for p in parts {
        check_fused(x, p.w, p.format, p.rows, &fusion)?;
    }
    if !decode_fusion() || !matvec_takes(len, k) || len == 0 || n_heads == 0 {
        // The ops, each checking (and charging a session for) its own work.
        let ys = parts
            .iter()
            .map(|p| crate::ops::quant_matmul_fused(x, p.w, p.format, p.rows, fusion))
            .collect::<Result<Vec<_>>>()?;
        let qkv = if ys.len() == 1 {
            ys.into_iter().next().expect("one part")
        } else {
            crate::ops::concat(&ys.iter().collect::<Vec<_>>(), 1)?
        };
        return rope_qkv_to_cache_scaled(&qkv, k_cache, v_cache, n_heads, pos, base, freq_factors);
    }
    let q = Tensor::empty_on(x.device(), &[n_heads, len, d], dtype)?;
    let kernel = crate::ops::MatvecKernel::Auto;
    let mut row0 = 0;
    for p in parts {
        let rope = RopeToCache {
            k_cache,
            v_cache,
            n_heads,
            n_kv_heads: nkv,
            half: d / 2,
            cap,
            pos,
            base,
            factors: freq_factors,
            row0,
        };
        let (w, f, n) = (p.w, p.format, p.rows);
        if !crate::ops::quant_matvec_k::run(x, w, &q, f, n, k, len, &fusion, kernel, Some(&rope))?
            && !crate::ops::quant_matvec_wide::run(x, w, &q, f, n, k, len, &fusion, kernel, Some(&rope))?
        {
            matvec(x, w, f, n, fusion, &q, Some(&rope))?;
        }
        row0 += n;
    }
    Ok(q)
}

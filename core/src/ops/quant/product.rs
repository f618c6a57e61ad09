//! The quantized product's kernels and their choice: the fused matrix-vector kernels for few rows
//! of x (decode; `quant_matvec_wide`, `quant_matvec_k`, `quant_matvec.wgsl`), and for more rows
//! the tiled or cooperative product (`quant_coop`) composed with the fusions' separate ops.

use super::check_weight;
use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, check_same_device, enables, grid, groups_1d, Launch, Params};
use crate::ops::quant_format::MATVEC_MAX_ROWS;
use crate::ops::quant_matvec_wide::{self, strided_tpr};
use crate::ops::quant_rope::{rope_part, RopeToCache, ROPE_COMMON};
use crate::ops::{quant_coop, quant_matvec_k};
use crate::ops::{EpilogueFusion, MatvecKernel, ProductKernel, QuantFormat, QuantFusion};
use crate::pipeline::{render, Checks, PipelineKey};
use crate::shape::check_rank;
use crate::tensor::Tensor;
use crate::{Error, Result};

const MATVEC: &str = include_str!("../../../../shaders/quant_matvec.wgsl");
const TILED: &str = include_str!("../../../../shaders/quant_tiled.wgsl");
const SWIGLU_ROWS: &str = include_str!("../../../../shaders/quant_swiglu_rows.wgsl");

/// Rows of x one matrix-vector workgroup handles at once (the shader's MT at most).
const MATVEC_MT: usize = 4;
/// The tiled kernel's output tile (the shader's TS).
const TILE: usize = 64;

/// [`quant_matmul`](super::quant_matmul) with the fusions of `fusion`: what `rms_norm`, `quant_matmul`, `silu`, `mul`
/// and `add` give in sequence, to f32 rounding (the norm's scale is applied to the f32 sum, not
/// to a rounded normalised x). Few rows of x (decode) run as one kernel; more rows compose the
/// separate ops (their matmul dominates).
pub fn quant_matmul_fused(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
) -> Result<Tensor> {
    quant_matmul_fused_kernel(x, w, format, n, fusion, MatvecKernel::Auto)
}

/// [`quant_matmul_fused`] on the matrix-vector kernel `kernel` picks (tests and A/B timing;
/// `Auto` is what [`quant_matmul_fused`] does).
pub fn quant_matmul_fused_kernel(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    kernel: MatvecKernel,
) -> Result<Tensor> {
    let (k, m, shape) = check_fused(x, w, format, n, &fusion)?;
    if k == 0 || (m > MATVEC_MAX_ROWS && kernel != MatvecKernel::Strided) {
        return composed(x, w, format, n, fusion, ProductKernel::Auto, EpilogueFusion::Auto);
    }
    let out = Tensor::empty_on(x.device(), &shape, x.dtype())?;
    if out.numel() == 0 {
        return Ok(out);
    }
    // The K formats' own kernel (Q4_K, Q5_K, Q6_K), then the wide one (Q4_0, Q4_1, Q8_0).
    if quant_matvec_k::run(x, w, &out, format, n, k, m, &fusion, kernel, None)? {
        return Ok(out);
    }
    if quant_matvec_wide::run(x, w, &out, format, n, k, m, &fusion, kernel, None)? {
        return Ok(out);
    }
    matvec(x, w, format, n, fusion, &out, None)?;
    Ok(out)
}

/// `quant_matmul_fused`'s checks of its operands; returns K, the rows of x and the result's
/// shape.
pub(crate) fn check_fused(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: &QuantFusion,
) -> Result<(usize, usize, Vec<usize>)> {
    let mut all = vec![x, w];
    all.extend(fusion.rms_norm.map(|(g, _)| g));
    all.extend(fusion.residual);
    let device = check_same_device(&all)?;
    let dtype = x.dtype();
    if !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("quant_matmul needs float x (f32 or f16), got {dtype}")));
    }
    if x.ndim() == 0 {
        return Err(Error::ShapeMismatch("quant_matmul: x must be [..., K], got a scalar".into()));
    }
    let k = *x.shape().last().unwrap_or(&0);
    let rows =
        if fusion.swiglu { n.checked_mul(2).ok_or_else(|| Error::InvalidArgument(format!("{n} rows")))? } else { n };
    check_weight("quant_matmul", w, format, rows, k)?;
    // Its real work: every row of x against every row of W (K multiply-adds each).
    let x_rows = x.numel().checked_div(k).unwrap_or(0);
    crate::exec::charge_work("quant_matmul", crate::exec::work_of(&[x_rows, rows, k]))?;
    check_f16(&device, &[dtype])?;
    let mut shape = x.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n;
    check_rank(&shape)?;
    if let Some((g, eps)) = fusion.rms_norm {
        if g.shape() != [k] || g.dtype() != dtype {
            return Err(Error::ShapeMismatch(format!(
                "quant_matmul: the norm weight must be [{k}] {dtype}, got {:?} {}",
                g.shape(),
                g.dtype()
            )));
        }
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidArgument(format!(
                "quant_matmul: the norm's eps must be finite and >= 0, got {eps}"
            )));
        }
    }
    if let Some(r) = fusion.residual {
        if r.shape() != shape.as_slice() || r.dtype() != dtype {
            return Err(Error::ShapeMismatch(format!(
                "quant_matmul: the residual must be {shape:?} {dtype}, got {:?} {}",
                r.shape(),
                r.dtype()
            )));
        }
    }
    Ok((k, x_rows, shape))
}

/// Whether [`matvec`] takes `m` rows of x of `k` values (else the tiled kernel, composed).
pub(crate) fn matvec_takes(m: usize, k: usize) -> bool {
    k > 0 && m <= MATVEC_MAX_ROWS
}

/// The matrix-vector kernel into `out` (operands checked by the caller, `matvec_takes` true,
/// `out` not empty); with `rope`, `fusion` may hold only the norm.
pub(crate) fn matvec(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    out: &Tensor,
    rope: Option<&RopeToCache>,
) -> Result<()> {
    let device = x.device().clone();
    let dtype = x.dtype();
    let k = *x.shape().last().unwrap_or(&0);
    let m = x.numel() / k;
    let (blocks, row_h, enable, max_dim) = launch_sizes(x, out, format, k)?;
    let mt = m.min(MATVEC_MT);
    // Enough threads per row to cover a short row in one or two strides, few enough that a
    // workgroup does several rows (N = 576 then still makes dozens of workgroups).
    let tpr = strided_tpr(blocks);
    let rows_per_wg = 256 / tpr;
    let mut groups = grid(n.div_ceil(rows_per_wg) as u64, max_dim)?;
    groups[2] = m.div_ceil(mt) as u32;
    let eps = fusion.rms_norm.map_or(0.0, |(_, e)| e);
    let mut params = Params::new().u32(m).u32(n).u32(k).u32(blocks).u32(row_h).f32(eps).u32(0u32).u32(0u32);
    let (norm, glu, res) = (fusion.rms_norm.is_some(), fusion.swiglu, fusion.residual.is_some());
    let acc = mt * if glu { 2 } else { 1 };
    let g = fusion.rms_norm.map_or(x, |(g, _)| g);
    let r = fusion.residual.unwrap_or(x);
    let mut tensors = vec![w, x, out, g, r];
    if let Some(rp) = rope {
        if glu || res || !n.is_multiple_of(2 * rp.half) {
            return Err(Error::Internal("quant matvec: RoPE takes whole heads and no SwiGLU or residual".into()));
        }
        let pos_word;
        (params, pos_word) = rp.push_params(params);
        tensors.extend([rp.k_cache, rp.v_cache]);
        tensors.extend(rp.factors);
        // Slots 2j and 2j + 1 take pair j: rows_per_wg / 2 of the n / 2 pairs per workgroup.
        let mut g = grid((n / 2).div_ceil(rows_per_wg / 2) as u64, max_dim)?;
        g[2] = groups[2];
        groups = g;
        rp.follow_in_plan(&device, pos_word, m, groups);
    }
    let with_rope = rope.is_some();
    let factors = rope.is_some_and(|r| r.factors.is_some());
    Launch {
        key: PipelineKey::new(
            "quant_matvec",
            &[
                format as u32,
                dtype as u32,
                tpr as u32,
                mt as u32,
                norm as u32,
                glu as u32,
                res as u32,
                with_rope as u32,
                factors as u32,
            ],
        ),
        source: Box::new(move || {
            let t = dtype.wgsl();
            let (fields, part, slot) = rope_part(with_rope, factors, t);
            let src = enable.to_string()
                + &format.common_wgsl()
                + &render(
                    MATVEC,
                    &[
                        ("T", t),
                        ("TPR", &tpr.to_string()),
                        ("MT", &mt.to_string()),
                        ("ACC", &acc.to_string()),
                        ("RED", &(256 * acc).to_string()),
                        ("NORM", &norm.to_string()),
                        ("GLU", &glu.to_string()),
                        ("RES", &res.to_string()),
                        ("ROPE", &with_rope.to_string()),
                        ("ROPE_FIELDS", &fields),
                        ("P_SLOT", &slot),
                        ("ROPE_PART", &part),
                    ],
                );
            if with_rope {
                crate::ops::elementwise::with_special(src + ROPE_COMMON)
            } else {
                src
            }
        }),
        tensors: &tensors,
        params: Some(params),
        groups,
    }
    .run_with(&device, Checks::Unchecked)
}

/// What both product kernels take: blocks per row, halfwords per W row, the WGSL `enable` line
/// and the per-dimension workgroup limit (after checking that x and out are indexable).
fn launch_sizes(x: &Tensor, out: &Tensor, format: QuantFormat, k: usize) -> Result<(usize, usize, &'static str, u32)> {
    check_indexable(x.numel())?;
    check_indexable(out.numel())?;
    let max_dim = x.device().limits().max_compute_workgroups_per_dimension;
    Ok((k / QuantFormat::BLOCK_LEN, format.row_bytes(k)? / 2, enables(&[x.dtype()]), max_dim))
}

/// `quant_matmul_fused` for many rows of x: the separate ops in sequence.
fn composed(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    kernel: ProductKernel,
    epilogue: EpilogueFusion,
) -> Result<Tensor> {
    let normed;
    let x = match fusion.rms_norm {
        Some((g, eps)) => {
            normed = crate::ops::rms_norm(x, Some(g), eps)?;
            &normed
        }
        None => x,
    };
    // On cooperative matrices the SwiGLU and the residual can be the kernel's epilogue.
    let k = *x.shape().last().unwrap_or(&0);
    let m = x.numel().checked_div(k).unwrap_or(0);
    let rows = if fusion.swiglu { 2 * n } else { n };
    let epi = quant_coop::Epilogue { swiglu: fusion.swiglu, residual: fusion.residual };
    // The native tier's product has no epilogue: SwiGLU and the residual follow it.
    let native = native_product_takes(x.device(), (m, rows, k), kernel, x.dtype() == DType::F32);
    if !native && m > 0 && n > 0 && k > 0 && quant_coop::fuses(x.device(), format, (m, rows, k), kernel, epi, epilogue)
    {
        let mut shape = x.shape().to_vec();
        *shape.last_mut().unwrap_or(&mut 0) = n;
        let out = Tensor::empty_on(x.device(), &shape, x.dtype())?;
        check_indexable(x.numel())?;
        check_indexable(out.numel())?;
        if quant_coop::run(x, w, &out, format, (m, rows, k), kernel, epi)? {
            return Ok(out);
        }
    }
    // Else the residual folds into the product's store (tiled or cooperative) unless SwiGLU
    // comes between or the separate ops were asked for.
    let folded = fusion.residual.filter(|_| !fusion.swiglu && epilogue != EpilogueFusion::Separate);
    let mut y = product(x, w, format, rows, kernel, folded)?;
    if fusion.swiglu && y.dtype() == DType::F32 && epilogue != EpilogueFusion::Separate {
        y = swiglu_rows(&y, n)?;
    } else if fusion.swiglu {
        let axis = y.ndim() as isize - 1;
        let gate = crate::ops::slice(&y, axis, 0, n as isize, 1)?;
        let up = crate::ops::slice(&y, axis, n as isize, 2 * n as isize, 1)?;
        y = crate::ops::mul(&crate::ops::silu(&gate)?, &up)?;
    }
    match fusion.residual {
        Some(r) if folded.is_none() => crate::ops::add(&y, r),
        _ => Ok(y),
    }
}

/// [`quant_matmul_fused`] for many rows of x on the product kernel `kernel`, with its SwiGLU and
/// residual in the cooperative kernel's epilogue or as separate ops as `epilogue` says (A/B
/// timing and tests).
pub fn quant_matmul_fused_product(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    fusion: QuantFusion,
    kernel: ProductKernel,
    epilogue: EpilogueFusion,
) -> Result<Tensor> {
    check_fused(x, w, format, n, &fusion)?;
    composed(x, w, format, n, fusion, kernel, epilogue)
}

/// x [..., K] times Wᵀ (W quantized [N, K]) on the many-rows product kernel `kernel` picks,
/// whatever the rows of x (tests and A/B timing: [`quant_matmul`](super::quant_matmul) takes the matrix-vector
/// kernels for few rows and `ProductKernel::Auto` for more).
pub fn quant_product(x: &Tensor, w: &Tensor, format: QuantFormat, n: usize, kernel: ProductKernel) -> Result<Tensor> {
    check_fused(x, w, format, n, &QuantFusion::default())?;
    product(x, w, format, n, kernel, None)
}

/// Where `Auto` takes the native tier's product (where the device has it): from one 128-row tile
/// of x, for W of at least 2048 x 2048. Measured on the H200 (2026-11-29, 512-token prefill,
/// against the cooperative kernel): Llama-3.2-1B's shapes (K and N of 2048-16384) +15% (Q4_0),
/// +19% (Q8_0), +34% (Q4_K_M), its 128-token first token 8.2 -> 7.5 ms (Q4_0); SmolLM2-135M's
/// (K 576 and 1536, N up to 3072) -7.5%: its products are too small for the decode pass and the
/// 128 x 128 tiles to pay.
const NATIVE_MIN_ROWS: usize = 128;
const NATIVE_MIN_W: usize = 2048;

/// The native tier's tiling for the product of x [m, k] by W [n, k] under `kernel`, the result
/// f32 where `out_f32`: `Auto` (or `KILN_QUANT_PRODUCT`) where [`NATIVE_MIN_ROWS`] and
/// [`NATIVE_MIN_W`] say, `Native` for any shape.
fn native_tiling(
    device: &crate::device::Device,
    (m, n, k): (usize, usize, usize),
    kernel: ProductKernel,
    out_f32: bool,
) -> Option<crate::ops::matmul::NativeTiles> {
    let kernel = if kernel == ProductKernel::Auto { ProductKernel::from_env() } else { kernel };
    let wanted = match kernel {
        ProductKernel::Auto => m >= NATIVE_MIN_ROWS && n >= NATIVE_MIN_W && k >= NATIVE_MIN_W,
        ProductKernel::Native => true,
        _ => false,
    };
    if !wanted {
        return None;
    }
    crate::ops::matmul::native_quant_pick(device, (m, n, k), out_f32)
}

/// Whether the product of `m` rows of x by a quantized W of `n` rows in `format` runs on
/// cooperative matrices on `device`, the cooperative kernel's or the native tier's (tests: their
/// tolerance is f16's; the same roundings, the hardware's summation order).
pub fn quant_product_uses_coop(device: &crate::device::Device, format: QuantFormat, m: usize, n: usize) -> bool {
    quant_coop::coop_takes(device, format, m, n)
        || m > MATVEC_MAX_ROWS && native_product_takes(device, (m, n, 32), ProductKernel::Auto, true)
}

/// Whether the product of x [m, k] by W [n, k] runs on the native tier under `kernel` (f32 x
/// where `out_f32`).
fn native_product_takes(
    device: &crate::device::Device,
    mnk: (usize, usize, usize),
    kernel: ProductKernel,
    out_f32: bool,
) -> bool {
    native_tiling(device, mnk, kernel, out_f32).is_some()
}

/// The product on the native tier where it takes it (else false, nothing run): W's rows
/// dequantized to f16 (the cooperative kernel's rounding of its decoded tiles), x rounded to f16
/// (the same), then NV cooperative matrix 2's product with f32 sums, stored in `out`'s dtype.
/// The whole W is decoded per call (scratch of n * k halves, freed after): on the H200's 1B
/// prefills of 512 rows it costs 15-25% of the product's time and still wins (BENCHMARKS.md),
/// as an in-kernel decode needs buffer references this tier does not enable. A module the driver
/// refused, or scratch the device or a session's quota refused, is passed over (false: the next
/// kernel runs).
fn native_product(
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    format: QuantFormat,
    (m, n, k): (usize, usize, usize),
    kernel: ProductKernel,
) -> Result<bool> {
    let device = x.device().clone();
    let Some(t) = native_tiling(&device, (m, n, k), kernel, out.dtype() == DType::F32) else {
        return Ok(false);
    };
    // The scratch (W's and x's f16 copies) is this path's own: where the device or the session's
    // quota refuses it, the cooperative kernel, which needs none, runs instead.
    let scratch = (|| -> Result<(Tensor, Tensor)> {
        let x16 = if x.dtype() == DType::F16 { x.clone() } else { crate::ops::cast(x, DType::F16)? };
        Ok((x16, super::dequantize_f16(w, format, n, k)?))
    })();
    let (x16, w16) = match scratch {
        Ok(s) => s,
        Err(Error::OutOfMemory(_) | Error::QuotaExceeded(_)) => return Ok(false),
        Err(e) => return Err(e),
    };
    match crate::ops::matmul::native_quant_product(&x16, &w16, out, t, (m, n, k)) {
        Ok(()) => Ok(true),
        Err(_) if native_tiling(&device, (m, n, k), kernel, out.dtype() == DType::F32).is_none() => Ok(false),
        Err(e) => Err(e),
    }
}

/// silu(gate) * up of y [..., 2n] (each row's gate values, then its up values), f32: one
/// dispatch for the slice, slice, silu and mul of the f16 path, the same bits.
fn swiglu_rows(y: &Tensor, n: usize) -> Result<Tensor> {
    let device = y.device().clone();
    let mut shape = y.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n;
    let out = Tensor::empty_on(&device, &shape, DType::F32)?;
    let total = out.numel();
    check_indexable(y.numel())?;
    if total == 0 {
        return Ok(out);
    }
    Launch {
        key: PipelineKey::new("quant_swiglu_rows", &[]),
        source: Box::new(|| crate::ops::elementwise::with_special(SWIGLU_ROWS.to_string())),
        tensors: &[y, &out],
        params: Some(Params::new().u32(total).u32(n).u32(0u32).u32(0u32)),
        groups: groups_1d(&device, total)?,
    }
    .run(&device)?;
    Ok(out)
}

/// The plain product for many rows of x (checked by the caller), plus `residual` (x's shape
/// with n last, x's dtype: checked by the caller) if given: on cooperative matrices where
/// `kernel` and the device allow (`quant_coop`), else through the tiled kernel.
fn product(
    x: &Tensor,
    w: &Tensor,
    format: QuantFormat,
    n: usize,
    kernel: ProductKernel,
    residual: Option<&Tensor>,
) -> Result<Tensor> {
    let device = x.device().clone();
    let dtype = x.dtype();
    let k = *x.shape().last().unwrap_or(&0);
    let mut shape = x.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n;
    if k == 0 {
        let zeros = crate::ops::full_on(&device, &shape, dtype, 0.0)?;
        return match residual {
            Some(r) => crate::ops::add(&zeros, r),
            None => Ok(zeros),
        };
    }
    let m = x.numel() / k;
    let out = Tensor::empty_on(&device, &shape, dtype)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    check_indexable(x.numel())?;
    check_indexable(out.numel())?;
    if native_product(x, w, &out, format, (m, n, k), kernel)? {
        return match residual {
            Some(r) => crate::ops::add(&out, r),
            None => Ok(out),
        };
    }
    if quant_coop::run(x, w, &out, format, (m, n, k), kernel, quant_coop::Epilogue { swiglu: false, residual })? {
        return Ok(out);
    }
    let (blocks, row_h, enable, max_dim) = launch_sizes(x, &out, format, k)?;
    // Loop passes (core/src/loop_budget.rs) per block of K, generously: lavapipe runs 1024
    // blocks right and 4096 wrong, so a block makes at most 64 (its loop's own, the k steps').
    let max_blocks = crate::loop_budget::steps_per_dispatch(&device, 64, 64);
    let branges = crate::loop_budget::chunks(blocks, 1, max_blocks);
    if branges.len() > 1 && dtype == DType::F16 {
        // Split K carries the sums in `out`: in f16 they would be rounded between dispatches,
        // so the product runs in f32 and is rounded once, the residual added after the
        // rounding as the fused kernel (and ops::add) does.
        let y = product(&crate::ops::cast(x, DType::F32)?, w, format, n, kernel, None)?;
        let y = crate::ops::cast(&y, DType::F16)?;
        return match residual {
            Some(r) => crate::ops::add(&y, r),
            None => Ok(y),
        };
    }
    let tiles_n = n.div_ceil(TILE);
    let tiles = (tiles_n as u64) * (m.div_ceil(TILE) as u64);
    let res = residual.is_some();
    let source = move || {
        enable.to_string()
            + &format.common_wgsl()
            + &render(TILED, &[("T", dtype.wgsl()), ("RES", if res { "true" } else { "false" })])
    };
    for (bbegin, bend) in branges {
        let params = Params::new().u32(m).u32(n).u32(k).u32(blocks).u32(row_h).u32(tiles_n).u32(bbegin).u32(bend);
        Launch {
            key: PipelineKey::new("quant_tiled", &[format as u32, dtype as u32, res as u32]),
            source: Box::new(source),
            // Without a residual x stands in at its slot (the layout stays one).
            tensors: &[w, x, &out, residual.unwrap_or(x)],
            params: Some(params),
            groups: grid(tiles, max_dim)?,
        }
        .run_with(&device, Checks::Unchecked)?;
    }
    Ok(out)
}

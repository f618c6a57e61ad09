//! The quantized product for many rows of x (prefill) on cooperative matrices (tensor cores):
//! `shaders/quant_coop.wgsl` decodes W's blocks (every GGUF format Kiln reads; a K super-block
//! as 8 groups of 32 values, each unit's scale decoded once) into f16 tiles in workgroup
//! memory, rounds x's tile to f16 and multiplies them with f32 accumulation. Taken by
//! `ops::quant`'s product where the device has wgpu's cooperative-matrix feature with 16x16x16
//! f16 x f16 -> f32 matrices and x has at least [`COOP_MIN_ROWS`] rows (unless the native tier's
//! product takes it first: ops/quant/product.rs `native_product`); the tiled kernel
//! (`quant_tiled.wgsl`, f32 products) everywhere else. `KILN_QUANT_PRODUCT=tiled|coop` forces
//! one (A/B timing).
//!
//! Numerics against the tiled kernel: x and the decoded weights are rounded to f16 (relative
//! error 2^-11 each, values past 65504 become infinities; llama.cpp's MMQ rounds x coarser, to
//! q8_1), the products are exact in f32 and summed in f32: |y - y_f32| <= about 2^-10 *
//! sum_k |x_k w_k| plus the f32 summation's (K + 2) 2^-23 * sum_k |x_k w_k|.

mod wgsl;

use wgsl::{fetch_unpack, source, split_sum_source};
pub use wgsl::{quant_coop_source_for_tests, quant_coop_split_sources_for_tests};

use super::matmul::coop::{coop_accumulator, CoopTiles};
use super::quant_format::QuantFormat;
use crate::device::Device;
use crate::exec::{grid, Launch, Params};
use crate::pipeline::Checks;
use crate::tensor::Tensor;
use crate::Result;

/// Rows of x from which the product runs on cooperative matrices (where the device has them; the
/// matrix-vector kernels take up to 8). Measured on the H200 at Llama-3.2-1B's QKV shape (K 2048,
/// 3072 W rows): 16, 32, 64, 128 rows take 42-44 µs against the tiled kernel's 139-151 µs, so
/// from the smallest row count measured.
pub const COOP_MIN_ROWS: usize = 16;
/// Workgroups a tiling should give before a larger one is taken (2 per SM of a 132-SM H100):
/// m = 512 makes only 4 rows of 128-row tiles, so most of Llama-3.2-1B's products need the
/// 64 x 64 tiles to fill the GPU.
const TARGET_GROUPS: usize = 256;

/// Which kernel `ops::quant`'s product (many rows of x) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProductKernel {
    /// `KILN_QUANT_PRODUCT` if set, else cooperative matrices where the device has them and x
    /// has at least [`COOP_MIN_ROWS`] rows, the tiled kernel otherwise.
    #[default]
    Auto,
    /// The tiled kernel (`quant_tiled.wgsl`, f32 products), every device.
    Tiled,
    /// Cooperative matrices wherever the device has them (the tiled kernel elsewhere), any rows.
    Coop,
    /// Cooperative matrices with a given tiling `[warps_m, warps_n, tm, tn, blocks per K step]`
    /// (tuning; the tiled kernel where the device lacks them or the tiling does not fit).
    CoopTiles([u32; 5]),
    /// The native tier (W dequantized to f16, then NV cooperative matrix 2's product:
    /// ops/quant/product.rs) for any shape; cooperative matrices or the tiled kernel where the
    /// device lacks it.
    Native,
}

impl ProductKernel {
    /// The `KILN_QUANT_PRODUCT` override: `tiled`, `coop` or `native` (anything else: Auto).
    pub(crate) fn from_env() -> ProductKernel {
        static ENV: std::sync::OnceLock<ProductKernel> = std::sync::OnceLock::new();
        *ENV.get_or_init(|| match crate::platform::env_var("KILN_QUANT_PRODUCT").as_deref().map(str::trim) {
            Some("tiled") => ProductKernel::Tiled,
            Some("coop") => ProductKernel::Coop,
            Some("native") => ProductKernel::Native,
            _ => ProductKernel::Auto,
        })
    }
}

/// What the kernel folds into its store (`QuantFusion`'s SwiGLU and residual): W holds 2N rows
/// (gate then up) under `swiglu`, and `residual` [m, N] of x's dtype is added.
#[derive(Clone, Copy, Default)]
pub(crate) struct Epilogue<'a> {
    pub swiglu: bool,
    pub residual: Option<&'a Tensor>,
}

/// A tiling of `quant_coop.wgsl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tiling {
    /// Subgroups, their 16x16 accumulators and the subgroup size; `bk` is 32 * blocks per step.
    coop: CoopTiles,
}

impl Tiling {
    fn new([warps_m, warps_n, tm, tn, bps]: [u32; 5], sg: u32) -> Tiling {
        Tiling { coop: CoopTiles { warps_m, warps_n, tm, tn, bk: 32 * bps, sg, acc: "f32" } }
    }
    fn bps(self) -> u32 {
        self.coop.bk / 32
    }
    /// Whether the shader's staging divides evenly over the invocations and fits the device.
    fn fits(self, limits: &wgpu::Limits) -> bool {
        let t = self.coop;
        let nt = t.threads();
        let shared = (t.bm() + t.bn()) * (t.bk + 8) * 2 + t.warps_m * t.warps_n * 256 * 4;
        nt > 0
            && t.bk > 0
            && (t.bm() * t.bk / 4).is_multiple_of(nt)
            && (t.bn() * self.bps() * 4).is_multiple_of(nt)
            && nt.is_multiple_of(4)
            && nt <= limits.max_compute_workgroup_size_x
            && nt <= limits.max_compute_invocations_per_workgroup
            && shared <= limits.max_compute_workgroup_storage_size
    }
}

/// The tilings `Auto` chooses from, largest first: 128 x 128, 64 x 128 and 64 x 64 output tiles
/// of 2 x 2 subgroups, one block of K per step.
const TILINGS: [[u32; 5]; 3] = [[2, 2, 4, 4, 1], [2, 2, 2, 4, 1], [2, 2, 2, 2, 1]];

/// The 64 x 64 tiling with two blocks per K step, and the K from which `Auto` takes it instead
/// of one block per step. Measured on the H200 (µs, one / two blocks per step): Llama-3.2-1B's
/// down projection (512 x 8192 by 2048 x 8192) 233 / 190, at K = 2048 (QKV) 73 / 97, at K =
/// 1536 (SmolLM2's down) 35.0 / 36.3.
const DEEP: [u32; 5] = [2, 2, 2, 2, 2];
const DEEP_MIN_K: usize = 4096;

/// One-band tilings (one subgroup row of 16-row accumulators: bm = 16), largest first, for x of
/// at most 16 rows (batched decode's B = 16), where the 64-row tiles would stay three quarters
/// empty. Measured on the H200 (2026-11-28, 16 rows of x by Llama-3.2-1B's Q4_0 matrices, µs,
/// 64 x 64 tiles / [1, 4, 1, 1, 2] / [1, 2, 1, 1, 2]): gate/up 16384 x 2048 52.8 / 36.8 / 38.2,
/// down 2048 x 8192 163 / 122 / 115, QKV 3072 x 2048 42.2 / 33.4 / 32.2, the 128,256-row head
/// 441 / 251 / 280. One accumulator column a subgroup cannot pair SwiGLU's gate and up columns,
/// and the band tilings of two were slower than the 64 x 64 tiles (gate/up 55-58 µs): a product
/// with SwiGLU keeps the [`TILINGS`].
const BANDS: [[u32; 5]; 2] = [[1, 4, 1, 1, 2], [1, 2, 1, 1, 2]];

/// The tiling the product of `m` x `k` by W [n, k] runs with on cooperative matrices under
/// `kernel`, or None where the tiled kernel runs it.
fn pick(device: &Device, m: usize, n: usize, k: usize, kernel: ProductKernel) -> Option<Tiling> {
    pick_for(device, m, n, k, kernel, false)
}

/// [`pick`] for a product whose store folds SwiGLU where `swiglu`.
fn pick_for(device: &Device, m: usize, n: usize, k: usize, kernel: ProductKernel, swiglu: bool) -> Option<Tiling> {
    let kernel = if kernel == ProductKernel::Auto { ProductKernel::from_env() } else { kernel };
    if kernel == ProductKernel::Tiled || coop_accumulator(device) != Some("f32") {
        return None;
    }
    let sg = device.subgroup_size.filter(|s| (8..=128).contains(s) && s.is_power_of_two())?;
    let limits = device.limits();
    if let ProductKernel::CoopTiles(t) = kernel {
        return Some(Tiling::new(t, sg)).filter(|t| t.fits(limits));
    }
    if kernel == ProductKernel::Auto && m < COOP_MIN_ROWS {
        return None;
    }
    let groups = |t: &Tiling| m.div_ceil(t.coop.bm() as usize) * n.div_ceil(t.coop.bn() as usize);
    if !swiglu {
        let mut band =
            BANDS.iter().map(|&t| Tiling::new(t, sg)).filter(|t| t.fits(limits) && m <= t.coop.bm() as usize);
        if let Some(first) = band.next() {
            return Some(if groups(&first) >= TARGET_GROUPS { first } else { band.next_back().unwrap_or(first) });
        }
    }
    let fitting = TILINGS.iter().map(|&t| Tiling::new(t, sg)).filter(|t| t.fits(limits));
    let mut last = None;
    for t in fitting {
        if groups(&t) >= TARGET_GROUPS {
            return Some(t);
        }
        last = Some(t);
    }
    // Deep products on the smallest tiles take two blocks per K step (half the barriers).
    let deep = Tiling::new(DEEP, last?.coop.sg);
    if k >= DEEP_MIN_K
        && last.is_some_and(|t| t.coop.bm() == deep.coop.bm() && t.coop.bn() == deep.coop.bn())
        && deep.fits(limits)
    {
        return Some(deep);
    }
    last
}

/// Whether the product of `m` rows of x by a quantized W of `n` rows in `format` runs on
/// cooperative matrices on `device` (ops/quant/product.rs's `quant_product_uses_coop` adds the
/// native tier's product).
pub(crate) fn coop_takes(device: &Device, format: QuantFormat, m: usize, n: usize) -> bool {
    m > super::quant_format::MATVEC_MAX_ROWS
        && QUANT_COOP_FORMATS.contains(&format)
        && pick(device, m, n, 0, ProductKernel::Auto).is_some()
}

/// The formats this kernel decodes, and `Auto` takes it for: every one. Q4_0, Q4_1, Q8_0, Q4_K,
/// Q5_K and Q6_K (a Q4_K_M or Q5_K_M file's) fetch their raw words a K step ahead into registers
/// ([`fetch_unpack`](wgsl::fetch_unpack)); Q5_0, Q5_1, Q2_K and Q3_K decode where the store reads them
/// (quant_common's `decode_at`). Each was checked on a GPU with cooperative matrices (the H200,
/// 2026-11-28: core/tests/quant_coop.rs runs every format under `ProductKernel::Coop` against the
/// reference; models/tests/arch_models.rs holds a Q4_K_M's logits to llama.cpp's distance from
/// float64) and measured faster than the tiled kernel there (512 x 2048 by 16384 x 2048, TFLOP/s
/// tiled / cooperative: Q4_0 19.2 / 148, Q4_K 17.7 / 117, Q5_K 17.3 / 92.7, Q5_0 18.3 / 90.8, Q5_1
/// 18.2 / 87.6, Q2_K 19.1 / 94.3, Q3_K 18.3 / 87.3; Q6_K's 512 x 8192 by 2048 x 8192 17.0 / 63.9).
/// lavapipe, where CI runs, has no cooperative matrices: there only the kernel's decode is checked
/// (bit for bit), so a new format's product needs a GPU run before it joins.
pub const QUANT_COOP_FORMATS: [QuantFormat; 10] = QuantFormat::ALL;

/// Whether [`run`] takes the product of `m` x `k` by W [n, k] (with SwiGLU where `swiglu`)
/// under `kernel` on `device`.
pub(crate) fn takes(device: &Device, (m, n, k): (usize, usize, usize), kernel: ProductKernel, swiglu: bool) -> bool {
    pick_for(device, m, n, k, kernel, swiglu)
        .is_some_and(|t| !swiglu || (t.coop.tn.is_multiple_of(2) && n.is_multiple_of(2)))
}

/// Whether many-row `quant_matmul_fused` folds its SwiGLU and residual into the cooperative
/// kernel's store or runs them as separate ops after the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EpilogueFusion {
    /// Folded where measured faster: SwiGLU on tilings of at most 2 x 2 accumulators per
    /// subgroup (H200, GPU ms per 512-token prefill: SmolLM2's gate/up 1.60 -> 1.37, while on
    /// the 128 x 128 tiles Llama-3.2-1B's went 5.40 -> 6.23, measured before the store was
    /// unrolled) except for x of at most 16 rows (a one-band product with split K, then SwiGLU),
    /// the residual everywhere (SmolLM2 down 1.36 -> 1.27, o 0.78 -> 0.72).
    #[default]
    Auto,
    /// Folded wherever the kernel takes the product.
    Fused,
    /// Separate ops (slice, silu, mul, add) after the product.
    Separate,
}

/// Whether the product of `m` x `k` by W [n, k] runs on cooperative matrices with `epi` in its
/// store under `kernel` and `policy`.
pub(crate) fn fuses(
    device: &Device,
    format: QuantFormat,
    (m, n, k): (usize, usize, usize),
    kernel: ProductKernel,
    epi: Epilogue,
    policy: EpilogueFusion,
) -> bool {
    if policy == EpilogueFusion::Separate
        || !QUANT_COOP_FORMATS.contains(&format)
        || !takes(device, (m, n, k), kernel, epi.swiglu)
    {
        return false;
    }
    if policy == EpilogueFusion::Fused || !epi.swiglu {
        return true;
    }
    // x of at most one band's rows (batched decode): the product on a one-band tiling (with
    // split K) and SwiGLU after it beat SwiGLU folded into the 64 x 64 tiles it needs (measured
    // on the H200, 16 rows by Llama-3.2-1B's gate/up: 52.8 us folded; 36.8 us for the band
    // product alone before split K).
    let band = pick_for(device, m, n, k, kernel, false).is_some_and(|t| t.coop.bm() == 16);
    let small = pick_for(device, m, n, k, kernel, true).is_some_and(|t| t.coop.tm * t.coop.tn <= 4);
    small && !band
}

/// Runs the product of x [m, k] by W [n, k] into `out` on cooperative matrices, with `epi`
/// folded in (`out` is [m, n / 2] under SwiGLU, else [m, n]), if `kernel` and the device allow
/// it (operands checked by the caller, nothing empty); false where the tiled kernel must run.
pub(crate) fn run(
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    format: QuantFormat,
    (m, n, k): (usize, usize, usize),
    kernel: ProductKernel,
    epi: Epilogue,
) -> Result<bool> {
    let device = x.device().clone();
    if !QUANT_COOP_FORMATS.contains(&format) {
        return Ok(false);
    }
    // SwiGLU pairs 16-column accumulators within a subgroup.
    let Some(t) =
        pick_for(&device, m, n, k, kernel, epi.swiglu).filter(|_| takes(&device, (m, n, k), kernel, epi.swiglu))
    else {
        return Ok(false);
    };
    let (bm, out_bn) = (t.coop.bm() as usize, t.coop.bn() as usize / if epi.swiglu { 2 } else { 1 });
    let n_out = if epi.swiglu { n / 2 } else { n };
    let tiles_m = m.div_ceil(bm);
    let groups = tiles_m as u64 * n_out.div_ceil(out_bn) as u64;
    let blocks = k / QuantFormat::BLOCK_LEN;
    // K split where the tiles are few: one-band tilings (batched decode) without SwiGLU.
    let (splits, kb_per) =
        if !epi.swiglu && bm == 16 { splits_for(groups as usize, blocks, t.bps() as usize) } else { (1, blocks) };
    let split = splits > 1;
    if groups * splits as u64 > u32::MAX as u64 {
        return Ok(false);
    }
    let dtype = x.dtype();
    let part =
        if split { Some(Tensor::empty_on(&device, &[splits, m, n_out], crate::dtype::DType::F32)?) } else { None };
    let params = Params::new()
        .u32(m)
        .u32(n)
        .u32(k)
        .u32(blocks)
        .u32(format.row_bytes(k)? / 2)
        .u32(tiles_m)
        .u32(groups as u32)
        .u32(w.numel() - 1)
        .u32(n_out)
        .u32(kb_per)
        .u32(splits)
        .u32(0u32);
    let c = t.coop;
    let (glu, with_res) = (epi.swiglu, epi.residual.is_some() && !split);
    let key = format!(
        "quant_coop:{format}:{dtype}:{}x{}:{}x{}:{}:{}:{glu}:{with_res}:{split}",
        c.warps_m, c.warps_n, c.tm, c.tn, c.bk, c.sg
    );
    let target = part.as_ref().unwrap_or(out);
    let residual = if with_res { epi.residual } else { None };
    Launch {
        key,
        source: Box::new(move || source(format, dtype.wgsl(), t, glu, with_res, split)),
        tensors: &[&[w, x, target][..], residual.as_slice()].concat(),
        params: Some(params),
        groups: grid(groups * splits as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run_with(&device, Checks::Unchecked)?;
    if let Some(part) = part {
        let total = m * n_out;
        let res = epi.residual.is_some();
        Launch {
            key: format!("quant_coop_split_sum:{dtype}:{res}"),
            source: Box::new(move || split_sum_source(dtype.wgsl(), res)),
            tensors: &[&[&part, out][..], epi.residual.as_slice()].concat(),
            params: Some(Params::new().u32(total).u32(splits).u32(0u32).u32(0u32)),
            groups: crate::exec::groups_1d(&device, total)?,
        }
        .run_with(&device, Checks::Unchecked)?;
    }
    Ok(true)
}

/// Splits of K for a product of `groups` workgroup tiles over `blocks` blocks of K, `bps` a
/// step: (splits, blocks per split). Few tiles (batched decode's 16 rows by the 1B shape's
/// 2,048-row down projection: 32 tiles, each walking K = 8,192 alone) leave most of the GPU idle;
/// splitting K gives ~TARGET_GROUPS workgroups, each at least SPLIT_MIN_BLOCKS blocks deep (the
/// partial sums then cost one f32 slice of y each to write and to add).
fn splits_for(groups: usize, blocks: usize, bps: usize) -> (usize, usize) {
    let cap = split_cap().unwrap_or(usize::MAX);
    let want = TARGET_GROUPS.div_ceil(groups.max(1)).min(blocks / SPLIT_MIN_BLOCKS).min(cap).max(1);
    if want == 1 {
        return (1, blocks);
    }
    let kb_per = blocks.div_ceil(want).next_multiple_of(bps);
    (blocks.div_ceil(kb_per), kb_per)
}

/// Blocks of K a split walks at least.
const SPLIT_MIN_BLOCKS: usize = 16;

/// `KILN_COOP_SPLIT=N` (measurement only): at most N splits of K (1: none) instead of the rule's.
fn split_cap() -> Option<usize> {
    static ENV: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| crate::platform::env_var("KILN_COOP_SPLIT")?.trim().parse::<usize>().ok().filter(|&n| n >= 1))
}

/// A whole quantized [rows, cols] matrix decoded to f32 through this kernel's `fetch` and
/// `unpack` (tests: on an adapter without cooperative matrices the product never runs, and this
/// checks its decode of every format against `dequantize`'s bits).
#[doc(hidden)]
pub fn quant_coop_decode_for_tests(w: &Tensor, format: QuantFormat, rows: usize, cols: usize) -> Result<Tensor> {
    let device = w.device().clone();
    let out = Tensor::empty_on(&device, &[rows, cols], crate::dtype::DType::F32)?;
    let units = rows * cols / 8;
    if units == 0 {
        return Ok(out);
    }
    let params = Params::new().u32(units).u32(cols).u32(format.row_bytes(cols)? / 2).u32(w.numel() - 1);
    let (fetch, unpack) = fetch_unpack(format);
    let src = format.common_wgsl()
        + "struct Params {
    units: u32,
    cols: u32,
    row_h: u32,
    last: u32,
}
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
" + fetch
        + "\n"
        + unpack
        + "
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.units) {
        return;
    }
    let upr = p.cols / 8u;
    let r = t / upr;
    let gb = (t % upr) / 4u;
    let u = t % 4u;
    let hrow = r * p.row_h;
    let un = unpack(fetch(hrow, gb, u, true), hrow, gb, u);
    let o = r * p.cols + gb * 32u;
    for (var i = 0u; i < 4u; i++) {
        out[o + un.pa + i] = un.a[i];
        out[o + un.pb + i] = un.b[i];
    }
}
";
    Launch {
        key: format!("quant_coop_decode_for_tests:{format}"),
        source: Box::new(move || src),
        tensors: &[w, &out],
        params: Some(params),
        groups: crate::exec::groups_1d(&device, units)?,
    }
    .run(&device)?;
    Ok(out)
}

/// The tilings `Auto` chooses from (tests).
#[doc(hidden)]
pub fn quant_coop_tilings() -> [[u32; 5]; 3] {
    TILINGS
}

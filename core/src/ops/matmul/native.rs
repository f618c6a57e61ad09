//! f16 matmul on the native tier (shaders/native/matmul_f16.comp on KHR cooperative matrices, and
//! shaders/native/matmul_f16_cm2.comp on NV cooperative matrix 2, through `crate::native_kernels`):
//! the hook that picks its variant and launches it. Same parameter block and workgroup numbering as
//! the WGSL kernels (shaders/matmul_common.wgsl), so batched and broadcast products run too.

use super::Problem;
use crate::device::{Binding, Device};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::OnceLock;

/// Which kernel a tiling runs: shaders/native/matmul_f16.comp on KHR cooperative matrices
/// (subgroup scope, staged by hand), or shaders/native/matmul_f16_cm2.comp on NV cooperative
/// matrix 2 (one workgroup-scope accumulator, tensor-addressed loads and stores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Khr,
    /// K steps of `bk`, `invocations` per workgroup (kernels.txt's BK and WG).
    Cm2 {
        bk: u32,
        invocations: u32,
    },
}

/// One tiling of the native kernels (kernels.txt's variants): its name, output tile BM x BN
/// (KHR: warps_m * tm * 16 by warps_n * tn * 16), and kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NativeTiles {
    name: &'static str,
    bm: u32,
    bn: u32,
    kernel: Kernel,
}

/// 128x128, 4 subgroups of 64x64 (2x2 of 4x4 accumulators), K steps of 32, tiles
/// double-buffered in workgroup memory.
const L: NativeTiles = NativeTiles { name: "l", bm: 128, bn: 128, kernel: Kernel::Khr };
/// `L` with one tile buffer and two barriers per K step (the WGSL kernel's schedule).
const L1: NativeTiles = NativeTiles { name: "l1", bm: 128, bn: 128, kernel: Kernel::Khr };
/// `L1` unrolled and scalar-replaced by spirv-opt.
const L1O: NativeTiles = NativeTiles { name: "l1o", bm: 128, bn: 128, kernel: Kernel::Khr };
/// `L1` reading the next K step without a branch around the reads.
const L1U: NativeTiles = NativeTiles { name: "l1u", bm: 128, bn: 128, kernel: Kernel::Khr };
/// 64x64, 4 subgroups of 32x32, K steps of 32 (small products).
const S: NativeTiles = NativeTiles { name: "s", bm: 64, bn: 64, kernel: Kernel::Khr };
/// NV cooperative matrix 2: 128x256 output tiles of 256 invocations (8 subgroups), K steps of
/// 64 (llama.cpp's large cm2 tile for the same driver).
const CM2_L: NativeTiles =
    NativeTiles { name: "cm2_l", bm: 128, bn: 256, kernel: Kernel::Cm2 { bk: 64, invocations: 256 } };
/// `CM2_L` transposed: 256x128.
const CM2_LT: NativeTiles =
    NativeTiles { name: "cm2_lt", bm: 256, bn: 128, kernel: Kernel::Cm2 { bk: 64, invocations: 256 } };
/// `CM2_L` with K steps of 32 (half the operand staging per step).
const CM2_L32: NativeTiles =
    NativeTiles { name: "cm2_l32", bm: 128, bn: 256, kernel: Kernel::Cm2 { bk: 32, invocations: 256 } };
/// 128x128 of 256 invocations, K steps of 64 (more workgroups for mid-sized products).
const CM2_M: NativeTiles =
    NativeTiles { name: "cm2_m", bm: 128, bn: 128, kernel: Kernel::Cm2 { bk: 64, invocations: 256 } };
/// `CM2_L` without the unclamped interior path (every tile through clamped layouts): the A/B of
/// that path.
const CM2_LC: NativeTiles =
    NativeTiles { name: "cm2_lc", bm: 128, bn: 256, kernel: Kernel::Cm2 { bk: 64, invocations: 256 } };
const ALL: [NativeTiles; 10] = [L, L1, L1O, L1U, S, CM2_L, CM2_LT, CM2_L32, CM2_M, CM2_LC];

/// The tiling `matmul` picks by default on adapters with the tier: `L1` for products of at least
/// 512x512 whose K and N are multiples of 8 (the 16-byte variant), where it was measured ahead
/// of the WGSL tier's cooperative-matrix kernel (same tile shape and schedule); the WGSL tier
/// everywhere else (unmeasured there). H100, one run (TFLOP/s, 4096³ / 32x1024³): WGSL 255.5 /
/// 197.2, l1 265.0 / 208.4, l1u 261.3 / 203.2, l1o 197.0 / 165.4, l 154.5 / 133.6. Dropped
/// earlier (4096³): 256x128 tiles of 8 subgroups 140-163, 128x128 of 8 subgroups 130-170,
/// BK 64 118, bands of 8 tile rows (L2 order) no change. `KILN_NATIVE_TILES` forces one.
const DEFAULT_LARGE: NativeTiles = L1;
/// Where the device has NV cooperative matrix 2 and the probe admits this tile: the default for
/// products of at least 512x512, any K and N (the tensor layouts clamp ragged edges, so no
/// alignment class). H200, one run (2026-11-29, TFLOP/s, 4096³ / 32x1024³): cm2_l32 280.3 /
/// 238.3, cm2_m 230.3 / 216.3, cm2_l 219.1 / 203.7, cm2_lt 124.4 / 114.9, cm2_lc (every tile
/// clamped) 16.0 / 15.4; l1 266.1 / 208.8, WGSL 256-258 / 197-199.
const DEFAULT_CM2: NativeTiles = CM2_L32;
/// With NV cooperative matrix 2, products of at least 128x128 below `DEFAULT_CM2`'s class: more
/// workgroups for mid-sized M or N. H200, one run (2026-11-29): conv2d 1x1 f16 (w [256, 64] @
/// x [32, 64, 3136]) 37.3 TFLOP/s on the WGSL tier, cm2_l32 46.9, cm2_m 54.4.
const MID_CM2: NativeTiles = CM2_M;

/// `KILN_NATIVE_TILES=l|l1|l1o|l1u|s|cm2_l|cm2_lt|cm2_l32|cm2_m|cm2_lc` (tuning), read once.
fn env_tiles() -> Option<NativeTiles> {
    static T: OnceLock<Option<NativeTiles>> = OnceLock::new();
    *T.get_or_init(|| {
        let v = crate::platform::env_var("KILN_NATIVE_TILES")?;
        ALL.into_iter().find(|t| t.name == v.trim())
    })
}

/// Whether `device` can run tiling `t`: the KHR kernel where the probe found 16x16x16 f16
/// cooperative matrices, a cm2 kernel where NV cooperative matrix 2 is on and has a
/// configuration for its tile and workgroup size.
fn runs_on(device: &Device, t: NativeTiles) -> bool {
    match t.kernel {
        Kernel::Khr => device.native.matmul_f16(),
        Kernel::Cm2 { bk, invocations } => device.native.matmul_f16_cm2(t.bm, t.bn, bk, invocations),
    }
}

/// The native variant for an f16 `m` x `k` by `k` x `n` product on `device`, or None where the
/// WGSL tier runs it: no native tier, a product below one 16x16x16 step (tensor-core tiles of
/// mostly padding), or one outside the measured class of [`DEFAULT_LARGE`] (or, with NV
/// cooperative matrix 2, below [`MID_CM2`]'s 128x128) unless `KILN_NATIVE_TILES` forces a
/// tiling this device can run.
/// A cm2 tiling whose module the driver refused here (`native_kernels::refused`) is passed over:
/// the next choice runs instead.
pub(super) fn pick(device: &Device, m: usize, n: usize, k: usize) -> Option<NativeTiles> {
    if m < 16 || n < 16 || k < 16 {
        return None;
    }
    let usable = |t: NativeTiles| runs_on(device, t) && !crate::native_kernels::refused(device, &module_name(t, k, n));
    if let Some(t) = env_tiles() {
        return usable(t).then_some(t);
    }
    let large = m >= 512 && n >= 512;
    if large && usable(DEFAULT_CM2) {
        return Some(DEFAULT_CM2);
    }
    if m >= 128 && n >= 128 && usable(MID_CM2) {
        return Some(MID_CM2);
    }
    (large && k.is_multiple_of(8) && n.is_multiple_of(8) && usable(DEFAULT_LARGE)).then_some(DEFAULT_LARGE)
}

/// Whether the driver refused the module tiling `t` runs `problem` on.
pub(super) fn refused(device: &Device, t: NativeTiles, problem: &Problem<'_>) -> bool {
    crate::native_kernels::refused(device, &module_name(t, problem.k, problem.n))
}

/// The module tiling `t` runs a product with K = `k`, N = `n` on.
fn module_name(t: NativeTiles, k: usize, n: usize) -> String {
    match t.kernel {
        Kernel::Khr => {
            // 16-byte reads and direct output stores need K and N multiples of 8 (and so every
            // row and batch offset of A, B and C); otherwise the variant that reads one half at
            // a time.
            let aligned = k.is_multiple_of(8) && n.is_multiple_of(8);
            format!("matmul_f16_{}{}", t.name, if aligned { "_aligned" } else { "" })
        }
        // One module for every shape: the tensor layouts clamp whatever is ragged.
        Kernel::Cm2 { .. } => format!("matmul_f16_{}", t.name),
    }
}

/// Whether the native kernel runs `matmul` of f16 `m` x `k` by `k` x `n` on `device`.
pub fn uses_native(device: &Device, m: usize, n: usize, k: usize) -> bool {
    pick(device, m, n, k).is_some()
}

/// The name of the native tiling `matmul` runs that product with (None: the WGSL tier), for
/// the benchmark's rows.
pub fn native_tiling_for(device: &Device, m: usize, n: usize, k: usize) -> Option<&'static str> {
    pick(device, m, n, k).map(|t| t.name)
}

/// The tilings' names, for tests that force each one ([`super::matmul_native_with`]).
pub fn native_tilings() -> Vec<&'static str> {
    ALL.iter().map(|t| t.name).collect()
}

/// Whether `device` can run the native tiling named `name` (false for unknown names).
pub fn native_tiling_available(device: &Device, name: &str) -> bool {
    ALL.into_iter().find(|t| t.name == name).is_some_and(|t| runs_on(device, t))
}

/// The tiling named `name`, where `device` can run it.
pub(super) fn by_name(device: &Device, name: &str) -> Result<NativeTiles> {
    let t = ALL
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no native matmul tiling named {name}")))?;
    if !runs_on(device, t) {
        return Err(Error::Unsupported(format!("this device cannot run the native matmul tiling {name}")));
    }
    Ok(t)
}

pub(super) fn run(
    device: &Device,
    a: &Tensor,
    b: &Tensor,
    out: Tensor,
    t: NativeTiles,
    problem: &Problem<'_>,
) -> Result<Tensor> {
    let module = module_name(t, problem.k, problem.n);
    dispatch(device, [a, b, &out], t, problem, &format!("matmul_native:f16:{module}"), &module)?;
    Ok(out)
}

/// One product of `problem` on module `module` (pipeline key `key`) with tiling `t`'s output
/// tiles: A, B and C at bindings 0-2, matmul_common's parameter block at 3.
fn dispatch(
    device: &Device,
    [a, b, c]: [&Tensor; 3],
    t: NativeTiles,
    problem: &Problem<'_>,
    key: &str,
    module: &str,
) -> Result<()> {
    let (params, groups) = problem.launch(device, t.bm, t.bn)?;
    let pipe = crate::native_kernels::pipeline(device, key, module)?;
    let bindings = [
        Binding { slot: 0, buffer: a.raw(), size: None },
        Binding { slot: 1, buffer: b.raw(), size: None },
        Binding { slot: 2, buffer: c.raw(), size: None },
    ];
    device.dispatch(&pipe, &bindings, Some((3, params.bytes())), groups, None)
}

/// The quantized product's tiling (kernels.txt's `matmul_f16_cm2_q*` lines): x [m, k] f16 times
/// Wᵀ for W's rows [n, k] dequantized to f16 (read through a transposed view), the result f16 or
/// f32 (`_f32`); 128 x 128, K steps of 64. The 128 x 256 tiling of plain products (K steps of
/// 32), measured on the same prefills (H200, 2026-11-29), was 15-20% slower: 512 rows make too
/// few of its tiles.
const QUANT_TILES: NativeTiles =
    NativeTiles { name: "cm2_qm", bm: 128, bn: 128, kernel: Kernel::Cm2 { bk: 64, invocations: 256 } };

/// The module the quantized product runs with a result of f32 (`out_f32`) or f16.
fn quant_module(out_f32: bool) -> String {
    format!("matmul_f16_{}{}", QUANT_TILES.name, if out_f32 { "_f32" } else { "" })
}

/// The native tiling for the quantized product of x [m, k] by W [n, k] dequantized to f16
/// (`ops::quant`'s product), the result f32 where `out_f32`, else f16; None where the device
/// has no NV cooperative matrix 2 configuration for it, the driver refused the module, or K or N
/// is not a multiple of 8 (the kernel's 2-D layouts need 16-byte rows).
pub(crate) fn quant_pick(device: &Device, (m, n, k): (usize, usize, usize), out_f32: bool) -> Option<NativeTiles> {
    let fits = m > 0 && k > 0 && k.is_multiple_of(8) && n.is_multiple_of(8);
    (fits && runs_on(device, QUANT_TILES) && !crate::native_kernels::refused(device, &quant_module(out_f32)))
        .then_some(QUANT_TILES)
}

/// x [m, k] f16 times Wᵀ for `w` [n, k] f16 into `out` [m, n] (f16 or f32, as `quant_pick` was
/// asked), on tiling `t` from [`quant_pick`]. Operands checked by the caller.
pub(crate) fn quant_product(
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    t: NativeTiles,
    (m, n, k): (usize, usize, usize),
) -> Result<()> {
    let problem = Problem { m, n, k, batch_shape: &[], ab: &[], bb: &[] };
    let module = quant_module(out.dtype() == crate::dtype::DType::F32);
    dispatch(x.device(), [x, w, out], t, &problem, &format!("matmul_native:quant:{module}"), &module)
}

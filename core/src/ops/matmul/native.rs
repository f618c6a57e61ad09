//! f16 matmul on the native tier (shaders/native/matmul_f16.comp through `crate::native_kernels`): the
//! hook that picks its variant and launches it. Same parameter block and workgroup numbering as
//! the WGSL kernels (shaders/matmul_common.wgsl), so batched and broadcast products run too.

use super::Problem;
use crate::device::{Binding, Device};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::OnceLock;

/// One tiling of the native kernel (kernels.txt's variants): (name, warps_m, warps_n, tm, tn).
/// Block rows BM = warps_m * tm * 16, columns BN = warps_n * tn * 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NativeTiles {
    name: &'static str,
    bm: u32,
    bn: u32,
}

/// 128x128, 4 subgroups of 64x64 (2x2 of 4x4 accumulators), K steps of 32, tiles
/// double-buffered in workgroup memory.
const L: NativeTiles = NativeTiles { name: "l", bm: 128, bn: 128 };
/// `L` with one tile buffer and two barriers per K step (the WGSL kernel's schedule).
const L1: NativeTiles = NativeTiles { name: "l1", bm: 128, bn: 128 };
/// `L1` unrolled and scalar-replaced by spirv-opt.
const L1O: NativeTiles = NativeTiles { name: "l1o", bm: 128, bn: 128 };
/// `L1` reading the next K step without a branch around the reads.
const L1U: NativeTiles = NativeTiles { name: "l1u", bm: 128, bn: 128 };
/// 64x64, 4 subgroups of 32x32, K steps of 32 (small products).
const S: NativeTiles = NativeTiles { name: "s", bm: 64, bn: 64 };
const ALL: [NativeTiles; 5] = [L, L1, L1O, L1U, S];

/// The tiling `matmul` picks by default on adapters with the tier: `L1` for products of at least
/// 512x512 whose K and N are multiples of 8 (the 16-byte variant), where it was measured ahead
/// of the WGSL tier's cooperative-matrix kernel (same tile shape and schedule); the WGSL tier
/// everywhere else (unmeasured there). H100, one run (TFLOP/s, 4096³ / 32x1024³): WGSL 255.5 /
/// 197.2, l1 265.0 / 208.4, l1u 261.3 / 203.2, l1o 197.0 / 165.4, l 154.5 / 133.6. Dropped
/// earlier (4096³): 256x128 tiles of 8 subgroups 140-163, 128x128 of 8 subgroups 130-170,
/// BK 64 118, bands of 8 tile rows (L2 order) no change. `KILN_NATIVE_TILES` forces one.
const DEFAULT_LARGE: NativeTiles = L1;

/// `KILN_NATIVE_TILES=l|l1|l1o|l1u|s` (tuning), read once.
fn env_tiles() -> Option<NativeTiles> {
    static T: OnceLock<Option<NativeTiles>> = OnceLock::new();
    *T.get_or_init(|| {
        let v = crate::platform::env_var("KILN_NATIVE_TILES")?;
        ALL.into_iter().find(|t| t.name == v.trim())
    })
}

/// The native variant for an f16 `m` x `k` by `k` x `n` product on `device`, or None where the
/// WGSL tier runs it: no native tier, a product below one 16x16x16 step (tensor-core tiles of
/// mostly padding), or one outside [`DEFAULT_LARGE`]'s measured class unless
/// `KILN_NATIVE_TILES` forces a tiling.
pub(super) fn pick(device: &Device, m: usize, n: usize, k: usize) -> Option<NativeTiles> {
    if !device.native.matmul_f16() || m < 16 || n < 16 || k < 16 {
        return None;
    }
    if let Some(t) = env_tiles() {
        return Some(t);
    }
    (m >= 512 && n >= 512 && k.is_multiple_of(8) && n.is_multiple_of(8)).then_some(DEFAULT_LARGE)
}

/// Whether the native kernel runs `matmul` of f16 `m` x `k` by `k` x `n` on `device`.
pub fn uses_native(device: &Device, m: usize, n: usize, k: usize) -> bool {
    pick(device, m, n, k).is_some()
}

/// The tilings' names, for tests that force each one ([`super::matmul_native_with`]).
pub fn native_tilings() -> Vec<&'static str> {
    ALL.iter().map(|t| t.name).collect()
}

pub(super) fn by_name(name: &str) -> Result<NativeTiles> {
    ALL.into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no native matmul tiling named {name}")))
}

pub(super) fn run(
    device: &Device,
    a: &Tensor,
    b: &Tensor,
    out: Tensor,
    t: NativeTiles,
    problem: &Problem<'_>,
) -> Result<Tensor> {
    let (params, groups) = problem.launch(device, t.bm, t.bn)?;
    // 16-byte reads and direct output stores need K and N multiples of 8 (and so every row and
    // batch offset of A, B and C); otherwise the variant that reads one half at a time.
    let aligned = problem.k.is_multiple_of(8) && problem.n.is_multiple_of(8);
    let module = format!("matmul_f16_{}{}", t.name, if aligned { "_aligned" } else { "" });
    let key = format!("matmul_native:f16:{module}");
    let pipe = crate::native_kernels::pipeline(device, &key, &module)?;
    let bindings = [
        Binding { slot: 0, buffer: a.raw(), size: None },
        Binding { slot: 1, buffer: b.raw(), size: None },
        Binding { slot: 2, buffer: out.raw(), size: None },
    ];
    device.dispatch(&pipe, &bindings, Some((3, params.bytes())), groups, None)?;
    Ok(out)
}

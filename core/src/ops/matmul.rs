//! `matmul` with numpy semantics (2-D, batched with broadcast batch dimensions, 1-D operands
//! promoted), run by the tiled kernel in `shaders/matmul.wgsl`.
//!
//! The tile shapes live in [`MatmulTiles`] and are chosen per problem by [`pick_tiles`] from the
//! adapter's limits; `KILN_MATMUL_TILES=bm,bn,bk,tm,tn` overrides the choice (for tuning).

use crate::device::{Binding, Device};
use crate::exec::grid;
use crate::pipeline::Checks;
use crate::dtype::DType;
use crate::exec::{check_f16, check_same_device, enables, Params};
use crate::pipeline::render;
use crate::shape::{broadcast_shapes, matmul_shape, numel};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::OnceLock;

const TEMPLATE: &str = include_str!("../../../shaders/matmul.wgsl");
const COMMON: &str = include_str!("../../../shaders/matmul_common.wgsl");

/// One tiling of the matmul kernel: a workgroup computes a `bm` x `bn` tile of C with
/// (`bn`/`tn`) x (`bm`/`tm`) threads, each owning a `tm` x `tn` block of registers, and walks K in
/// steps of `bk` through workgroup memory. `tm` and `tn` are multiples of 4 (vec4 accumulators).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulTiles {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub tm: u32,
    pub tn: u32,
}

impl MatmulTiles {
    /// Big problems: 256 threads, 4x8 per thread, 12 KiB of tiles. On an H200 through Vulkan:
    /// 31.7 TFLOP/s at 4096³ f32, 34.9 on 32 x 1024³.
    pub const LARGE: MatmulTiles = MatmulTiles { bm: 64, bn: 128, bk: 16, tm: 4, tn: 8 };
    /// Very big products: 128x128 tiles, 8x8 per thread (16 KiB), k steps unrolled. On an H200:
    /// 35.2 TFLOP/s at 4096³ (LARGE: 31.7); on 32 x 1024³ the same as LARGE.
    pub const HUGE: MatmulTiles = MatmulTiles { bm: 128, bn: 128, bk: 16, tm: 8, tn: 8 };
    /// Medium problems: 256 threads, 4x4 per thread, 8 KiB.
    pub const MEDIUM: MatmulTiles = MatmulTiles { bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 };
    /// Small matrices: 64 threads.
    pub const SMALL: MatmulTiles = MatmulTiles { bm: 32, bn: 32, bk: 16, tm: 4, tn: 4 };
    /// M <= 4 (vector-matrix): one row of 32 threads along N.
    pub const ROW: MatmulTiles = MatmulTiles { bm: 4, bn: 128, bk: 32, tm: 4, tn: 4 };
    /// N <= 4 (matrix-vector): one column of 32 threads along M.
    pub const COL: MatmulTiles = MatmulTiles { bm: 128, bn: 4, bk: 32, tm: 4, tn: 4 };
    /// M, N <= 4 (vector-vector, tiny batched products): one thread.
    pub const TINY: MatmulTiles = MatmulTiles { bm: 4, bn: 4, bk: 32, tm: 4, tn: 4 };
    /// Every predefined tiling.
    pub const ALL: [MatmulTiles; 7] = [Self::HUGE, Self::LARGE, Self::MEDIUM, Self::SMALL, Self::ROW, Self::COL, Self::TINY];

    pub fn threads_x(self) -> u32 {
        self.bn / self.tn
    }
    pub fn threads_y(self) -> u32 {
        self.bm / self.tm
    }
    /// Whether the kernel spells out the k steps with constant tile offsets: register blocks of
    /// 64 and more need it (measured on the H200 at 4096³: 128x128 with 8x8 per thread went
    /// 24 -> 35 TFLOP/s; smaller blocks measured the same either way, and unrolled bodies cost
    /// software adapters long compiles).
    pub fn unrolled(self) -> bool {
        self.tm * self.tn >= 64
    }
    /// Bytes of workgroup memory (tiles are held as 4-byte values, f16 widened).
    pub fn shared_bytes(self) -> u32 {
        (self.bm + self.bn) * self.bk * 4
    }

    /// Whether the tiling is well formed.
    pub fn valid(self) -> bool {
        let ok = |v: u32| v > 0;
        ok(self.bm) && ok(self.bn) && ok(self.bk) && ok(self.tm) && ok(self.tn)
            && self.tm.is_multiple_of(4)
            && self.tn.is_multiple_of(4)
            && self.bm.is_multiple_of(self.tm)
            && self.bn.is_multiple_of(self.tn)
    }

    /// Whether the adapter can run a workgroup of this tiling.
    pub fn fits(self, limits: &wgpu::Limits) -> bool {
        self.valid()
            && self.threads_x() <= limits.max_compute_workgroup_size_x
            && self.threads_y() <= limits.max_compute_workgroup_size_y
            && self.threads_x() * self.threads_y() <= limits.max_compute_invocations_per_workgroup
            && self.shared_bytes() <= limits.max_compute_workgroup_storage_size
    }

    fn parse(s: &str) -> Option<MatmulTiles> {
        let v: Vec<u32> = s.split(',').map(|x| x.trim().parse().ok()).collect::<Option<_>>()?;
        let t = match v[..] {
            [bm, bn, bk, tm, tn] => MatmulTiles { bm, bn, bk, tm, tn },
            _ => return None,
        };
        t.valid().then_some(t)
    }
}

fn env_tiles() -> Option<MatmulTiles> {
    static T: OnceLock<Option<MatmulTiles>> = OnceLock::new();
    *T.get_or_init(|| std::env::var("KILN_MATMUL_TILES").ok().and_then(|s| MatmulTiles::parse(&s)))
}

/// The tiling used for an `m` x `k` by `k` x `n` product on `device`.
pub fn pick_tiles(device: &Device, m: usize, n: usize, _k: usize) -> MatmulTiles {
    let limits = device.limits();
    if let Some(t) = env_tiles().filter(|t| t.fits(limits)) {
        return t;
    }
    let wanted = if m <= 4 && n <= 4 {
        MatmulTiles::TINY
    } else if n <= 4 {
        MatmulTiles::COL
    } else if m <= 4 {
        MatmulTiles::ROW
    } else if m >= 2048 && n >= 2048 {
        MatmulTiles::HUGE
    } else if m >= 512 && n >= 512 {
        MatmulTiles::LARGE
    } else if m >= 64 && n >= 64 {
        MatmulTiles::MEDIUM
    } else {
        MatmulTiles::SMALL
    };
    [wanted, MatmulTiles::LARGE, MatmulTiles::MEDIUM, MatmulTiles::SMALL, MatmulTiles::TINY]
        .into_iter()
        .find(|t| t.fits(limits))
        .unwrap_or(MatmulTiles::TINY)
}

const LANES: [&str; 4] = ["x", "y", "z", "w"];

/// The unrolled register-block code: accumulator declarations, the per-k update, the store.
fn generate(t: MatmulTiles, dtype: DType) -> (String, String, String) {
    let float = dtype.is_float();
    let acc_t = if float { "f32" } else { dtype.wgsl() };
    let (cm, cn) = (t.tm / 4, t.tn / 4);
    let mut decl = String::new();
    let mut inner = String::new();
    let mut store = String::new();
    for c in 0..cm {
        for r in 0..4 {
            for j in 0..cn {
                decl += &format!("    var acc_{c}_{r}_{j} = vec4<{acc_t}>(0);\n");
            }
        }
    }
    let unroll = t.unrolled();
    let steps: Vec<String> = if unroll { (0..t.bk).map(|k| format!("{k}u")).collect() } else { vec!["kk".into()] };
    for kk in &steps {
        inner += "            {\n";
        for c in 0..cm {
            inner += &format!("            let a{c} = As[{kk} * (BM / 4u) + {c}u * WGY + ty];\n");
        }
        for j in 0..cn {
            inner += &format!("            let b{j} = Bs[{kk} * (BN / 4u) + {j}u * WGX + tx];\n");
        }
        for c in 0..cm {
            for (r, lane) in LANES.iter().enumerate() {
                for j in 0..cn {
                    if float {
                        inner += &format!("            acc_{c}_{r}_{j} = fma(vec4<f32>(a{c}.{lane}), b{j}, acc_{c}_{r}_{j});\n");
                    } else {
                        inner += &format!("            acc_{c}_{r}_{j} += a{c}.{lane} * b{j};\n");
                    }
                }
            }
        }
        inner += "            }\n";
    }
    let out_t = dtype.wgsl();
    for c in 0..cm {
        for r in 0..4 {
            store += &format!("    {{\n        let row = row0 + ({c}u * WGY + ty) * 4u + {r}u;\n        if (row < p.m) {{\n            let base = coff + row * p.n;\n");
            for j in 0..cn {
                for (s, lane) in LANES.iter().enumerate() {
                    store += &format!(
                        "            {{ let col = col0 + ({j}u * WGX + tx) * 4u + {s}u; if (col < p.n) {{ c[base + col] = {out_t}(acc_{c}_{r}_{j}.{lane}); }} }}\n"
                    );
                }
            }
            store += "        }\n    }\n";
        }
    }
    (decl, inner, store)
}

/// The loops that copy one K-step of A and of B into workgroup memory. With `vec_a` (K a
/// multiple of 4) A is read as vec4s along k; with `vec_b` (N a multiple of 4) B as vec4s along n.
fn loads(t: MatmulTiles, acc: &str, vec_a: bool, vec_b: bool) -> (String, String) {
    let la = if vec_a {
        format!(
            "        // A tile, vec4 along k: consecutive threads take consecutive k of one row.
        for (var l = lid; l < BM * BK / 4u; l += NT) {{
            let mm = l / (BK / 4u);
            let kq = l % (BK / 4u);
            let gr = row0 + mm;
            let gk = k0 + kq * 4u;
            var v = vec4<{acc}>(0);
            if (gr < p.m && gk < p.k) {{
                v = vec4<{acc}>(a[(aoff + gr * p.k + gk) / 4u]);
            }}
            let i0 = kq * 4u * (BM / 4u) + mm / 4u;
            let lane = mm % 4u;
            As[i0][lane] = v.x;
            As[i0 + BM / 4u][lane] = v.y;
            As[i0 + 2u * (BM / 4u)][lane] = v.z;
            As[i0 + 3u * (BM / 4u)][lane] = v.w;
        }}
"
        )
    } else {
        format!(
            "        // A tile: consecutive threads take consecutive k of one row (coalesced reads).
        for (var l = lid; l < BM * BK; l += NT) {{
            let mm = l / BK;
            let kk = l % BK;
            let gr = row0 + mm;
            let gk = k0 + kk;
            var v = {acc}(0);
            if (gr < p.m && gk < p.k) {{
                v = {acc}(a[aoff + gr * p.k + gk]);
            }}
            As[kk * (BM / 4u) + mm / 4u][mm % 4u] = v;
        }}
"
        )
    };
    let lb = if vec_b {
        format!(
            "        // B tile, vec4 along n.
        for (var l = lid; l < BK * BN / 4u; l += NT) {{
            let kk = l / (BN / 4u);
            let nq = l % (BN / 4u);
            let gk = k0 + kk;
            let gc = col0 + nq * 4u;
            var v = vec4<{acc}>(0);
            if (gk < p.k && gc < p.n) {{
                v = vec4<{acc}>(b[(boff + gk * p.n + gc) / 4u]);
            }}
            Bs[kk * (BN / 4u) + nq] = v;
        }}
"
        )
    } else {
        format!(
            "        // B tile: consecutive threads take consecutive n of one k.
        for (var l = lid; l < BK * BN; l += NT) {{
            let kk = l / BN;
            let nn = l % BN;
            let gk = k0 + kk;
            let gc = col0 + nn;
            var v = {acc}(0);
            if (gk < p.k && gc < p.n) {{
                v = {acc}(b[boff + gk * p.n + gc]);
            }}
            Bs[kk * (BN / 4u) + nn / 4u][nn % 4u] = v;
        }}
"
        )
    };
    let _ = t;
    (la, lb)
}


/// One product as the kernels see it: [batch..] x (M x K by K x N), with A's and B's own batch
/// dimensions (`ab`, `bb`) broadcast to `batch_shape`.
struct Problem<'a> {
    m: usize,
    n: usize,
    k: usize,
    batch_shape: &'a [usize],
    ab: &'a [usize],
    bb: &'a [usize],
}

impl Problem<'_> {
    /// The parameter block of shaders/matmul_common.wgsl and the dispatch size for output tiles
    /// of `bm` x `bn`.
    fn launch(&self, device: &Device, bm: u32, bn: u32) -> Result<(Params, [u32; 3])> {
        let ntiles = self.n.div_ceil(bn as usize);
        let mtiles = self.m.div_ceil(bm as usize);
        let groups = ntiles as u64 * mtiles as u64 * numel(self.batch_shape) as u64;
        if groups > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!("matmul: {groups} workgroups are more than one dispatch can number")));
        }
        let dims = grid(groups, device.limits().max_compute_workgroups_per_dimension)?;
        let params = Params::new()
            .u32(self.m)
            .u32(self.n)
            .u32(self.k)
            .u32(groups)
            .u32(ntiles)
            .u32(mtiles)
            .u32(self.batch_shape.len())
            .u32(0u32)
            .dims8(self.batch_shape, 1)
            .dims8(&crate::shape::batch_strides(self.ab, self.batch_shape, self.m * self.k), 0)
            .dims8(&crate::shape::batch_strides(self.bb, self.batch_shape, self.k * self.n), 0);
        Ok((params, dims))
    }
}

/// numpy `matmul(a, b)`: 2-D products, batched products with broadcast batch dimensions, and
/// 1-D operands promoted (a vector on the left is a row, on the right a column; the promoted
/// dimension is dropped from the result, so vector @ vector is rank 0). f16 accumulates in f32;
/// i32/u32 wrap.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    matmul_impl(a, b, None)
}

/// `matmul` with a given tiling instead of [`pick_tiles`]'s choice (for tuning and tests);
/// InvalidArgument where the tiling is malformed or the adapter cannot run it.
pub fn matmul_with_tiles(a: &Tensor, b: &Tensor, tiles: MatmulTiles) -> Result<Tensor> {
    if !tiles.fits(a.device().limits()) {
        return Err(Error::InvalidArgument(format!("matmul tiling {tiles:?} is malformed or over this adapter's limits")));
    }
    matmul_impl(a, b, Some(tiles))
}

fn matmul_impl(a: &Tensor, b: &Tensor, tiles: Option<MatmulTiles>) -> Result<Tensor> {
    let device = check_same_device(&[a, b])?;
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch(format!("matmul of {} and {}: dtypes must match (cast one first)", a.dtype(), b.dtype())));
    }
    let dtype = a.dtype();
    check_f16(&device, &[dtype])?;
    let out_shape = matmul_shape(a.shape(), b.shape())?;
    let a2: Vec<usize> = if a.ndim() == 1 { vec![1, a.shape()[0]] } else { a.shape().to_vec() };
    let b2: Vec<usize> = if b.ndim() == 1 { vec![b.shape()[0], 1] } else { b.shape().to_vec() };
    let (mut m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let n = b2[b2.len() - 1];
    let mut ab = a2[..a2.len() - 2].to_vec();
    let bb = b2[..b2.len() - 2].to_vec();
    // A batched A times one B is one tall product: fold A's batch into M.
    if bb.is_empty() && !ab.is_empty() {
        m *= numel(&ab);
        ab.clear();
    }
    let batch_shape = broadcast_shapes(&ab, &bb)?;
    let out = Tensor::empty_on(&device, &out_shape, dtype)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    if out.numel() > u32::MAX as usize || a.numel() > u32::MAX as usize || b.numel() > u32::MAX as usize {
        return Err(Error::InvalidArgument("matmul: operands of more than 2^32 elements".into()));
    }
    let problem = Problem { m, n, k, batch_shape: &batch_shape, ab: &ab, bb: &bb };
    if tiles.is_none() && dtype == DType::F16 {
        if let Some(coop) = pick_coop(&device, m, n, k) {
            return coop::run(&device, a, b, out, coop, &problem);
        }
    }
    let tiles = tiles.unwrap_or_else(|| pick_tiles(&device, m, n, k));
    let (params, dims) = problem.launch(&device, tiles.bm, tiles.bn)?;
    let vec_a = k % 4 == 0 && tiles.bk.is_multiple_of(4);
    let vec_b = n.is_multiple_of(4);
    let key = format!("matmul:{dtype}:{}x{}x{}:{}x{}:{vec_a}:{vec_b}", tiles.bm, tiles.bn, tiles.bk, tiles.tm, tiles.tn);
    let tensors = [a, b, &out];
    let source = move || {
            let (decl, inner, store) = generate(tiles, dtype);
            let acc = if dtype.is_float() { "f32" } else { dtype.wgsl() };
            let (load_a, load_b) = loads(tiles, acc, vec_a, vec_b);
            let t = dtype.wgsl();
            let vt = format!("vec4<{t}>");
            render(
                TEMPLATE,
                &[
                    ("ENABLE", enables(&[dtype])),
                    ("MATMUL_COMMON", COMMON),
                    ("T", t),
                    ("A_ELEM", if vec_a { &vt } else { t }),
                    ("B_ELEM", if vec_b { &vt } else { t }),
                    ("LOAD_A", &load_a),
                    ("LOAD_B", &load_b),
                    ("ACC", acc),
                    ("BM", &tiles.bm.to_string()),
                    ("BN", &tiles.bn.to_string()),
                    ("BK", &tiles.bk.to_string()),
                    ("WGX", &tiles.threads_x().to_string()),
                    ("WGY", &tiles.threads_y().to_string()),
                    ("AS_LEN", &(tiles.bk * tiles.bm / 4).to_string()),
                    ("BS_LEN", &(tiles.bk * tiles.bn / 4).to_string()),
                    ("ACC_DECL", &decl),
                    ("K_STEPS", &if tiles.unrolled() { inner.clone() } else { format!("        for (var kk = 0u; kk < BK; kk++) {{\n{inner}        }}\n") }),
                    ("STORE", &store),
                ],
            )
    };
    // Every index in the kernel is guarded (rows, columns and k against M, N, K; tile
    // indices by construction), and the test-suite runs every tiling on ragged shapes, so
    // naga's per-access bounds clamping is dropped (it costs the inner loop dearly).
    let pipe = device.pipeline(&key, Checks::Unchecked, source)?;
    let bindings: Vec<Binding<'_>> =
        tensors.iter().enumerate().map(|(i, t)| Binding { slot: i as u32, buffer: t.raw(), size: None }).collect();
    device.dispatch(&pipe, &bindings, Some((3, params.bytes())), dims)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// f16 on cooperative matrices (tensor cores), where the device has wgpu's experimental
// cooperative-matrix feature with a 16x16x16 f16 configuration and one subgroup size. Anything
// else (other dtypes, explicit tilings, small or vector products, adapters without the feature,
// `KILN_NO_COOP=1`) runs the tiled kernel above.

const COOP_TEMPLATE: &str = include_str!("../../../shaders/matmul_coop.wgsl");

/// A tiling of `shaders/matmul_coop.wgsl`: `warps_m` x `warps_n` subgroups, each owning
/// `tm` x `tn` 16x16 accumulators, walking K in steps of `bk` (a multiple of 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoopTiles {
    warps_m: u32,
    warps_n: u32,
    tm: u32,
    tn: u32,
    bk: u32,
    /// The subgroup size (invocations per subgroup).
    sg: u32,
    /// Accumulator type: "f32" where the hardware has f16 x f16 -> f32, else "f16".
    acc: &'static str,
}

impl CoopTiles {
    fn bm(self) -> u32 {
        self.warps_m * self.tm * 16
    }
    fn bn(self) -> u32 {
        self.warps_n * self.tn * 16
    }
    fn threads(self) -> u32 {
        self.warps_m * self.warps_n * self.sg
    }
    fn shared_bytes(self) -> u32 {
        let acc_bytes = if self.acc == "f32" { 4 } else { 2 };
        (self.bm() * (self.bk + 8) + self.bk * (self.bn() + 8)) * 2 + self.warps_m * self.warps_n * 256 * acc_bytes
    }
    fn fits(self, limits: &wgpu::Limits) -> bool {
        self.threads() <= limits.max_compute_workgroup_size_x
            && self.threads() <= limits.max_compute_invocations_per_workgroup
            && self.shared_bytes() <= limits.max_compute_workgroup_storage_size
    }
}

/// The accumulator type the device's cooperative matrices offer for 16x16x16 f16 products:
/// f32 where there is an f16 x f16 -> f32 configuration, else f16; None without one.
pub fn coop_accumulator(device: &Device) -> Option<&'static str> {
    if !(device.has_cooperative_matrix() && device.has_subgroups() && device.has_f16()) {
        return None;
    }
    use wgpu::CooperativeScalarType as S;
    let has = |cr: S| {
        device.coop_props.iter().any(|p| p.m_size == 16 && p.n_size == 16 && p.k_size == 16 && p.ab_type == S::F16 && p.cr_type == cr)
    };
    if has(S::F32) {
        Some("f32")
    } else if has(S::F16) {
        Some("f16")
    } else {
        None
    }
}

/// Whether `matmul` of f16 `m` x `k` by `k` x `n` runs on cooperative matrices on `device`.
pub fn uses_cooperative_matrix(device: &Device, m: usize, n: usize, k: usize) -> bool {
    pick_coop(device, m, n, k).is_some()
}

/// The (large, small) cooperative-matrix tilings for subgroup size `sg` and accumulator `acc`.
fn coop_tilings(sg: u32, acc: &'static str) -> (CoopTiles, CoopTiles) {
    (
        CoopTiles { warps_m: 2, warps_n: 2, tm: 4, tn: 4, bk: 32, sg, acc },
        CoopTiles { warps_m: 2, warps_n: 2, tm: 2, tn: 2, bk: 32, sg, acc },
    )
}

fn pick_coop(device: &Device, m: usize, n: usize, k: usize) -> Option<CoopTiles> {
    let acc = coop_accumulator(device)?;
    let sg = device.subgroup_size.filter(|s| (8..=128).contains(s))?;
    // Below one 16x16x16 step the tensor-core tiles are mostly padding.
    if m < 16 || n < 16 || k < 16 {
        return None;
    }
    // 128x128 tiles of 2x2 subgroups, each owning 4x4 accumulators (every A/B fragment used four
    // times), with the next K step prefetched into registers: 158 TFLOP/s at 4096^3 on an H200
    // (2x4 subgroups of 4x2 without prefetch: 72; 2x4 of 4x2 with prefetch: 105).
    let (large, small) = coop_tilings(sg, acc);
    let mut wanted = if m >= 512 && n >= 512 { large } else { small };
    // Tuning: KILN_COOP_TILES=warps_m,warps_n,tm,tn,bk.
    if let Some(v) = std::env::var("KILN_COOP_TILES").ok().map(|s| s.split(',').filter_map(|x| x.trim().parse::<u32>().ok()).collect::<Vec<_>>()) {
        if let [warps_m, warps_n, tm, tn, bk] = v[..] {
            if bk % 16 == 0 && bk > 0 && warps_m * warps_n * tm * tn > 0 {
                wanted = CoopTiles { warps_m, warps_n, tm, tn, bk, ..wanted };
            }
        }
    }
    [wanted, small].into_iter().find(|t| t.fits(device.limits()))
}

mod coop {
    use super::*;

    fn generate(t: CoopTiles) -> (String, String, String) {
        let acc = t.acc;
        let mut decl = String::new();
        let mut inner = String::new();
        let mut store = String::new();
        for i in 0..t.tm {
            for j in 0..t.tn {
                decl += &format!("    var acc_{i}_{j} = coop_mat16x16<{acc}, C>();\n");
            }
        }
        for i in 0..t.tm {
            inner += &format!("            let a{i} = coopLoadT<coop_mat16x16<f16, A>>(&As[(wr + {i}u * 16u) * SA + kk], SA);\n");
        }
        for j in 0..t.tn {
            inner += &format!("            let b{j} = coopLoadT<coop_mat16x16<f16, B>>(&Bs[kk * SB + wc + {j}u * 16u], SB);\n");
        }
        for i in 0..t.tm {
            for j in 0..t.tn {
                inner += &format!("            acc_{i}_{j} = coopMultiplyAdd(a{i}, b{j}, acc_{i}_{j});\n");
            }
        }
        for i in 0..t.tm {
            for j in 0..t.tn {
                store += &format!(
                    "    coopStoreT(acc_{i}_{j}, &Cs[sg * 256u], 16u);
    workgroupBarrier();
    for (var e = lane; e < 256u; e += SG) {{
        let row = row0 + wr + {i}u * 16u + e / 16u;
        let col = col0 + wc + {j}u * 16u + e % 16u;
        if (row < p.m && col < p.n) {{
            c[coff + row * p.n + col] = f16(Cs[sg * 256u + e]);
        }}
    }}
    workgroupBarrier();
"
                );
            }
        }
        (decl, inner, store)
    }

    /// Register-prefetched tile loads: each invocation holds its share of the next A and B
    /// tiles (`w` halves per global read: 4 where the rows are vec4-aligned, else 1) in
    /// registers; the K loop stores them into workgroup memory, then reads the following K step
    /// from global memory while the cooperative products of this one run. Returns
    /// (declarations + first fetch, store A, store B, fetch of the next step).
    fn prefetched(t: CoopTiles, vec_a: bool, vec_b: bool) -> (String, String, String, String) {
        let nt = t.threads();
        let (bm, bn, bk) = (t.bm(), t.bn(), t.bk);
        let mut decl = String::new();
        let mut fetch0 = String::new();
        let mut fetch = String::new();
        let mut st_a = String::new();
        let mut st_b = String::new();
        let comps = ["x", "y", "z", "w"];
        // (name, vec, chunks per row, total chunks)
        for (name, vec) in [("a", vec_a), ("b", vec_b)] {
            let w = if vec { 4 } else { 1 };
            let ty = if vec { "vec4<f16>" } else { "f16" };
            let (row_chunks, total) = if name == "a" { (bk / w, bm * bk / w) } else { (bn / w, bk * bn / w) };
            let count = total.div_ceil(nt);
            for i in 0..count {
                let guard = if (i + 1) * nt > total { format!("l < {total}u && ") } else { String::new() };
                decl += &format!("    var r{name}{i} = {ty}(0);\n");
                for (dst, kb) in [(&mut fetch0, "0u"), (&mut fetch, "k0 + BK")] {
                    let cond_load = if name == "a" {
                        let idx = if vec { "(aoff + gr * p.k + gk) / 4u" } else { "aoff + gr * p.k + gk" };
                        format!(
                            "let gr = row0 + l / {row_chunks}u;
            let gk = {kb} + (l % {row_chunks}u) * {w}u;
            var v = {ty}(0);
            if ({guard}gr < p.m && gk < p.k) {{
                v = a[{idx}];
            }}"
                        )
                    } else {
                        let idx = if vec { "(boff + gk * p.n + gc) / 4u" } else { "boff + gk * p.n + gc" };
                        format!(
                            "let gk = {kb} + l / {row_chunks}u;
            let gc = col0 + (l % {row_chunks}u) * {w}u;
            var v = {ty}(0);
            if ({guard}gk < p.k && gc < p.n) {{
                v = b[{idx}];
            }}"
                        )
                    };
                    *dst += &format!(
                        "        {{
            let l = lid + {}u;
            {cond_load}
            r{name}{i} = v;
        }}
",
                        i * nt
                    );
                }
                let (arr, stride, dst) = if name == "a" { ("As", "SA", &mut st_a) } else { ("Bs", "SB", &mut st_b) };
                let close = if guard.is_empty() { "" } else { "}\n" };
                let open = if guard.is_empty() { String::new() } else { format!("if (lid + {}u < {total}u) {{\n", i * nt) };
                *dst += &format!("        {{\n        {open}    let l = lid + {}u;\n            let o = (l / {row_chunks}u) * {stride} + (l % {row_chunks}u) * {w}u;\n", i * nt);
                if vec {
                    for (c, comp) in comps.iter().enumerate() {
                        *dst += &format!("            {arr}[o + {c}u] = r{name}{i}.{comp};\n");
                    }
                } else {
                    *dst += &format!("            {arr}[o] = r{name}{i};\n");
                }
                *dst += &format!("        {close}}}\n");
            }
        }
        decl += "    {\n    let k0 = 0u;\n";
        decl += &fetch0;
        decl += "    }\n";
        (decl, st_a, st_b, fetch)
    }

    /// The WGSL of one tiling (also used by the tests to check it through naga).
    pub(crate) fn source(t: CoopTiles, vec_a: bool, vec_b: bool) -> String {
        let (decl, inner, store) = generate(t);
        let (pre_decl, load_a, load_b, pre_next) = prefetched(t, vec_a, vec_b);
        let warps = t.warps_m * t.warps_n;
        render(
            COOP_TEMPLATE,
            &[
                ("ENABLE", "enable f16;\nenable wgpu_cooperative_matrix;\n"),
                ("MATMUL_COMMON", COMMON),
                ("A_ELEM", if vec_a { "vec4<f16>" } else { "f16" }),
                ("B_ELEM", if vec_b { "vec4<f16>" } else { "f16" }),
                ("ACC", t.acc),
                ("BM", &t.bm().to_string()),
                ("BN", &t.bn().to_string()),
                ("BK", &t.bk.to_string()),
                ("WARPS_N", &t.warps_n.to_string()),
                ("WTM", &(t.tm * 16).to_string()),
                ("WTN", &(t.tn * 16).to_string()),
                ("SG", &t.sg.to_string()),
                ("NT", &t.threads().to_string()),
                ("AS_LEN", &(t.bm() * (t.bk + 8)).to_string()),
                ("BS_LEN", &(t.bk * (t.bn() + 8)).to_string()),
                ("CS_LEN", &(warps * 256).to_string()),
                ("LOAD_A", &load_a),
                ("LOAD_B", &load_b),
                ("PREFETCH_DECL", &pre_decl),
                ("PREFETCH_NEXT", &pre_next),
                ("ACC_DECL", &decl),
                ("INNER", &inner),
                ("STORE", &store),
            ],
        )
    }

    pub(super) fn run(
        device: &std::sync::Arc<Device>,
        a: &Tensor,
        b: &Tensor,
        out: Tensor,
        t: CoopTiles,
        problem: &Problem<'_>,
    ) -> Result<Tensor> {
        let (params, dims) = problem.launch(device, t.bm(), t.bn())?;
        let (k, n) = (problem.k, problem.n);
        let vec_a = k % 4 == 0;
        let vec_b = n % 4 == 0;
        let key = format!(
            "matmul_coop:{}x{}:{}x{}:{}:{}:{}:{vec_a}:{vec_b}",
            t.warps_m, t.warps_n, t.tm, t.tn, t.bk, t.sg, t.acc
        );
        // Every global index is guarded against M, N, K and the workgroup-memory indices are in
        // range by construction; the tests run ragged shapes through this kernel on devices that
        // have it.
        let pipe = device.pipeline(&key, Checks::Unchecked, move || source(t, vec_a, vec_b))?;
        let bindings = [
            Binding { slot: 0, buffer: a.raw(), size: None },
            Binding { slot: 1, buffer: b.raw(), size: None },
            Binding { slot: 2, buffer: out.raw(), size: None },
        ];
        device.dispatch(&pipe, &bindings, Some((3, params.bytes())), dims)?;
        Ok(out)
    }
}

/// The cooperative-matrix kernel's WGSL for a given shape class (tests validate it with naga
/// where no device runs it): `acc` "f32" or "f16", subgroup size `sg`, `large` tiling or not.
#[doc(hidden)]
pub fn coop_source_for_tests(acc: &'static str, sg: u32, large: bool, vec_a: bool, vec_b: bool) -> String {
    let (large_t, small_t) = coop_tilings(sg, acc);
    coop::source(if large { large_t } else { small_t }, vec_a, vec_b)
}

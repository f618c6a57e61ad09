//! f16 conv2d as an implicit GEMM on cooperative matrices (`shaders/conv_coop.wgsl`), where the
//! device has the 16x16x16 f16 configuration matmul's cooperative kernel uses
//! ([`crate::ops::coop_accumulator`]) and a known subgroup size. `KILN_CONV_COOP_TILES=
//! warps_m,warps_n,tm,tn,bk` overrides the tiling (for tuning).

use super::gemm::{prefetch, tile_loads, GemmLaunch, TileLayout, COMMON};
use crate::device::Device;
use crate::pipeline::render;
use crate::Result;
use std::sync::OnceLock;

use crate::ops::matmul::coop::{cooperative_code, CoopTiles};

const TEMPLATE: &str = include_str!("../../../../shaders/conv_coop.wgsl");

/// Whether the tiling fits the device and conv's kernel, which gathers one patch column per
/// invocation.
fn fits(t: CoopTiles, l: &wgpu::Limits) -> bool {
    t.bk > 0
        && t.bk.is_multiple_of(16)
        && t.warps_m * t.warps_n * t.tm * t.tn > 0
        && t.threads().is_multiple_of(t.bn())
        && t.fits(l)
}

fn env_tiles() -> Option<[u32; 5]> {
    static T: OnceLock<Option<[u32; 5]>> = OnceLock::new();
    *T.get_or_init(|| crate::env::env_u32s("KILN_CONV_COOP_TILES"))
}

/// The (big, wide, thin) tilings, measured on the H100 at 32x64x56x56 with the register
/// prefetch. wide: 64 x 128 tiles of 2x4 subgroups with 2x2 accumulators each, K steps of 16
/// (3x3: 38.1 TFLOP/s, stride 2 to 128 channels: 34.9; 2x2 subgroups of 2x4 with K steps of
/// 32: 22.7, of 16: 29.8; 2x4 of 2x2 with steps of 32: 32.0; without the prefetch 33.9). big:
/// the same tile with 4x4 subgroups of 1x2, for problems of 512 tiles or more (3x3: 44.3; the
/// stride-2 row's 392 tiles 29.6). thin, for 16 or fewer output channels per group: 16 x 128
/// tiles of 1x8 subgroups (4 groups of 16: 15.2; 1x4 subgroups of 1x2 with K steps of 32: 11.2).
fn tilings(sg: u32, acc: &'static str) -> [CoopTiles; 3] {
    [
        CoopTiles { warps_m: 4, warps_n: 4, tm: 1, tn: 2, bk: 16, sg, acc },
        CoopTiles { warps_m: 2, warps_n: 4, tm: 2, tn: 2, bk: 16, sg, acc },
        CoopTiles { warps_m: 1, warps_n: 8, tm: 1, tn: 1, bk: 16, sg, acc },
    ]
}

/// Problems of at least this many 64 x 128 tiles take the big tiling.
const BIG_TILES: usize = 512;

/// The tiling for `m` output channels per group, `n` columns and `groups` groups on `device`,
/// or None where the device has no cooperative matrices the kernel can use.
pub(super) fn pick(device: &Device, m: usize, n: usize, groups: usize) -> Option<CoopTiles> {
    let acc = crate::ops::coop_accumulator(device)?;
    let sg = device.subgroup_size.filter(|s| (8..=128).contains(s))?;
    let [big, wide, thin] = tilings(sg, acc);
    let tiles = m.div_ceil(64) * n.div_ceil(128) * groups;
    let mut wanted = if m <= 16 {
        thin
    } else if tiles >= BIG_TILES {
        big
    } else {
        wide
    };
    if let Some([warps_m, warps_n, tm, tn, bk]) = env_tiles() {
        wanted = CoopTiles { warps_m, warps_n, tm, tn, bk, ..wanted };
    }
    [wanted, wide, thin].into_iter().find(|t| fits(*t, device.limits()))
}

/// Conv's write of one accumulator element: output channel `oc` of the NCHW output, bias added.
fn write_out(has_bias: bool) -> impl Fn(u32, u32) -> String {
    let bias = if has_bias { " + f32(bias[oc])" } else { "" };
    move |_i, j| {
        format!(
            "        let oc = tile.grp * p.m + row;
        let o = out_col(col0 + wc + {j}u * 16u + e % 16u);
        if (row < p.m && o != 0xffffffffu) {{
            out[o + oc * p.ohw] = f16(f32(Cs[sg * 256u + e]){bias});
        }}
"
        )
    }
}

fn source(t: CoopTiles, has_bias: bool, bias_decl: &str, out_slot: usize, pf: bool, by_tap: bool) -> String {
    let (decl, inner, store) = cooperative_code(t, false, false, write_out(has_bias));
    let layout = TileLayout { ty: "f16", store_a: "As[mm * SA + kk] = v;", store_b: "Bs[kk * SB + bc] = v;" };
    let [pre_decl, load, pre_next] = tile_loads(&layout, t.bm(), t.bn(), t.bk, t.threads(), pf, by_tap);
    let common = render(COMMON, &[("T", "f16")]);
    render(
        TEMPLATE,
        &[
            ("ENABLE", "enable f16;\nenable wgpu_cooperative_matrix;\n"),
            ("GEMM_COMMON", &common),
            ("BIAS_DECL", bias_decl),
            ("OUT", &out_slot.to_string()),
            ("PARAMS", &(out_slot + 1).to_string()),
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
            ("CS_LEN", &(t.warps_m * t.warps_n * 256).to_string()),
            ("ACC_DECL", &decl),
            ("PREFETCH_DECL", &pre_decl),
            ("LOAD", &load),
            ("PREFETCH_NEXT", &pre_next),
            ("INNER", &inner),
            ("STORE", &store),
        ],
    )
}

pub(super) fn run(l: &GemmLaunch<'_>, t: CoopTiles) -> Result<()> {
    let has_bias = l.bias.is_some();
    let pf = prefetch();
    let bt = l.by_tap(t.bk);
    let key = format!("conv_coop:{}x{}:{}x{}:{}:{}:{}:{pf}:{bt}", t.warps_m, t.warps_n, t.tm, t.tn, t.bk, t.sg, t.acc);
    l.run(key, t.bm(), t.bn(), bt.then_some(t.bk), move |bias_decl, out_slot| {
        source(t, has_bias, bias_decl, out_slot, pf, bt)
    })
}

/// The kernel's WGSL for accumulator `acc` and subgroup size `sg`, tiling `which` (0 big, 1
/// wide, 2 thin), with
/// or without bias, with or without the register prefetch, K by tap or not (tests validate it
/// with naga where no device runs it).
#[doc(hidden)]
pub fn conv_coop_source_for_tests(
    acc: &'static str,
    sg: u32,
    which: usize,
    has_bias: bool,
    pf: bool,
    by_tap: bool,
) -> String {
    let t = tilings(sg, acc)[which];
    let decl = if has_bias { "@group(0) @binding(3) var<storage, read> bias: array<f16>;" } else { "" };
    source(t, has_bias, decl, if has_bias { 4 } else { 3 }, pf, by_tap)
}

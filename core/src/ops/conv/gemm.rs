//! conv2d as an implicit GEMM (`shaders/conv_gemm_common.wgsl`): the shared launch pieces (the
//! parameter block, the tap table, the bindings) and the register-tiled float kernel
//! (`shaders/conv_gemm.wgsl`) with its tilings. `KILN_CONV_TILES=bm,bn,bk,tm,tn` overrides the
//! tiling (for tuning).

use super::Geometry;
use crate::device::Device;
use crate::dtype::DType;
use crate::exec::{enables, grid, Launch, Params};
use crate::pipeline::{render, Checks};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::{Arc, OnceLock};

pub(super) const COMMON: &str = include_str!("../../../../shaders/conv_gemm_common.wgsl");
const TEMPLATE: &str = include_str!("../../../../shaders/conv_gemm.wgsl");
const LANES: [&str; 4] = ["x", "y", "z", "w"];

/// One conv2d as the GEMM kernels see it, ready to launch: bindings x, w, taps, bias?, out.
pub(super) struct GemmLaunch<'a> {
    pub x: &'a Tensor,
    pub w: &'a Tensor,
    pub bias: Option<&'a Tensor>,
    pub out: &'a Tensor,
    pub geo: &'a Geometry,
}

impl GemmLaunch<'_> {
    fn m(&self) -> usize {
        self.geo.o / self.geo.groups
    }
    fn n(&self) -> usize {
        self.geo.n * self.geo.oh * self.geo.ow
    }
    fn k(&self) -> usize {
        self.geo.c / self.geo.groups * self.geo.kh * self.geo.kw
    }

    /// Whether K runs (ky, kx, c), c fastest, for K steps of `bk`: where a group's input
    /// channels are a multiple of `bk`, so that each step shares one tap (the kernel decodes
    /// the tap once per step, not per element). `KILN_CONV_BY_TAP=0` keeps (c, ky, kx) (tuning).
    /// The order changes the f32 sums' order, and so their rounding: so that it depends on the
    /// shape only, not on the tiling the adapter's limits pick (native and browser must agree
    /// bit for bit), the channels must also be a multiple of 16, which every built-in K step
    /// divides.
    pub(super) fn by_tap(&self, bk: u32) -> bool {
        static ON: OnceLock<bool> = OnceLock::new();
        let cg = self.geo.c / self.geo.groups;
        *ON.get_or_init(|| std::env::var("KILN_CONV_BY_TAP").map_or(true, |v| v != "0"))
            && cg > 0
            && cg.is_multiple_of(BY_TAP_CHANNELS)
            && cg.is_multiple_of(bk as usize)
    }

    /// The tap table. In (c, ky, kx) order, one entry per k: the offset of that tap from its
    /// window's corner in x and its (dy, dx) from the corner. By tap (`by_tap`), one entry per
    /// K step of `bk` and one past the end (the last prefetch reads it): the offset of the step's
    /// first channel at its tap, (dy, dx), and the offset of (that channel, tap) in a weight row.
    /// At least one entry (a buffer cannot be empty).
    fn taps(&self, device: &Arc<Device>, by_tap: Option<u32>) -> Result<Tensor> {
        let g = self.geo;
        let cg = g.c / g.groups;
        if let Some(bk) = by_tap {
            let bk = bk as usize;
            let mut t = Vec::with_capacity((self.k() / bk + 1) * 4);
            for ky in 0..g.kh {
                for kx in 0..g.kw {
                    let (dy, dx) = (ky * g.dilation[0], kx * g.dilation[1]);
                    for c0 in (0..cg).step_by(bk) {
                        let off = (c0 * g.h + dy) * g.w + dx;
                        t.extend([off as u32, dy as u32, dx as u32, (c0 * g.kh * g.kw + ky * g.kw + kx) as u32]);
                    }
                }
            }
            t.extend([0u32; 4]);
            return Tensor::from_slice_on(device, &t, &[t.len()]);
        }
        let mut t = Vec::with_capacity(self.k().max(1) * 4);
        for c in 0..cg {
            for ky in 0..g.kh {
                for kx in 0..g.kw {
                    let (dy, dx) = (ky * g.dilation[0], kx * g.dilation[1]);
                    let off = (c * g.h + dy) * g.w + dx;
                    t.extend([off as u32, dy as u32, dx as u32, 0]);
                }
            }
        }
        if t.is_empty() {
            t.extend([0u32; 4]);
        }
        Tensor::from_slice_on(device, &t, &[t.len()])
    }

    /// Runs the kernel `source` renders, with tiles of `bm` x `bn`: `source` gets the bindings'
    /// declarations of the bias (or "") and the output and parameter slots.
    pub(super) fn run(
        &self,
        key: String,
        bm: u32,
        bn: u32,
        by_tap: Option<u32>,
        source: impl FnOnce(&str, usize) -> String + 'static,
    ) -> Result<()> {
        let device = self.x.device().clone();
        let g = self.geo;
        let (m, n, k) = (self.m(), self.n(), self.k());
        // The kernels add u32 offsets into x; past that they would wrap.
        if self.x.numel() > u32::MAX as usize || self.out.numel() > u32::MAX as usize {
            return Err(Error::InvalidArgument("conv2d: tensors of more than 2^32 elements".into()));
        }
        let ntiles = n.div_ceil(bn as usize);
        let mtiles = m.div_ceil(bm as usize);
        let groups = ntiles as u64 * mtiles as u64 * g.groups as u64;
        if groups > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "conv2d: {groups} workgroups are more than one dispatch can number"
            )));
        }
        let dims = grid(groups, device.limits().max_compute_workgroups_per_dimension)?;
        let params = Params::new()
            .u32(m)
            .u32(n)
            .u32(k)
            .u32(groups)
            .u32(ntiles)
            .u32(mtiles)
            .u32(g.oh * g.ow)
            .u32(g.ow)
            .u32(g.h)
            .u32(g.w)
            .u32(g.stride[0])
            .u32(g.stride[1])
            .u32(g.padding[0])
            .u32(g.padding[1])
            .u32(g.c * g.h * g.w)
            .u32(g.c / g.groups * g.h * g.w)
            .u32(g.o)
            .u32(g.h * g.w)
            .u32(g.kh * g.kw);
        let taps = self.taps(&device, by_tap)?;
        let mut tensors: Vec<&Tensor> = vec![self.x, self.w, &taps];
        tensors.extend(self.bias);
        tensors.push(self.out);
        let out_slot = tensors.len() - 1;
        let dtype = self.x.dtype();
        let bias_decl = if self.bias.is_some() {
            format!("@group(0) @binding(3) var<storage, read> bias: array<{}>;", dtype.wgsl())
        } else {
            String::new()
        };
        let key = format!("{key}:{}", self.bias.is_some());
        // Every global index is guarded (rows against M, columns against N, k against K, taps
        // against the image), workgroup-memory indices are in range by construction, and the
        // tests run ragged shapes through every kernel.
        Launch {
            key,
            source: Box::new(move || source(&bias_decl, out_slot)),
            tensors: &tensors,
            params: Some(params),
            groups: dims,
        }
        .run_with(&device, Checks::Unchecked)
    }
}

/// K runs by tap only where a group's channels are a multiple of this (a multiple of every
/// built-in tiling's K step, checked by a test).
pub(super) const BY_TAP_CHANNELS: usize = 16;

/// How a kernel stores its tiles in workgroup memory: the element type, and the stores of a
/// weight value `v` at (`mm`, `kk`) and of a patch value `v` at (`kk`, `bc`).
pub(super) struct TileLayout {
    pub ty: &'static str,
    pub store_a: &'static str,
    pub store_b: &'static str,
}

/// `KILN_CONV_PREFETCH=0` turns off the register prefetch of the next K step (for tuning).
pub(super) fn prefetch() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    *P.get_or_init(|| std::env::var("KILN_CONV_PREFETCH").map_or(true, |v| v != "0"))
}

/// The tile loads of one K step for `bm` x `bn` x `bk` tiles and `nt` threads: (declarations
/// and first fetch, the loop's copy into workgroup memory, the fetch of the next step). With
/// `prefetch`, each thread holds its share of the next step in registers: the loop stores them,
/// and after the barrier reads the following step from global memory while this step's
/// products run. Without, the loop reads global memory straight into the tiles.
///
/// With `by_tap` (K ordered (ky, kx, c), see [`GemmLaunch::by_tap`]), each fetch of a step
/// first decodes the step's tap once (`step_of`), and every element is one load off it.
pub(super) fn tile_loads(
    l: &TileLayout,
    bm: u32,
    bn: u32,
    bk: u32,
    nt: u32,
    prefetch: bool,
    by_tap: bool,
) -> [String; 3] {
    let ty = l.ty;
    // The step variable each section's fetches read: the first fetch, the prefetch of the next
    // step, the loop's own fetch.
    let step = |kb: &str| match kb {
        "0u" => "st0",
        "k0" => "stl",
        _ => "stn",
    };
    let wt_at = |kb: &str| {
        if by_tap {
            format!("wt[wbase + gr * p.k + {}.woff + kk * p.khw]", step(kb))
        } else {
            "wt[wbase + gr * p.k + gk]".to_string()
        }
    };
    let rb = nt / bn;
    let na = (bm * bk).div_ceil(nt);
    let nb = bk / rb;
    let a_at = |i: u32, kb: &str| {
        let guard = if (i + 1) * nt > bm * bk { format!("l < {}u && ", bm * bk) } else { String::new() };
        format!(
            "        {{
            let l = lid + {}u;
            let mm = l / BK;
            let kk = l % BK;
            let gr = row0 + mm;
            let gk = {kb} + kk;
            var v = {ty}(0);
            if ({guard}gr < p.m && gk < p.k) {{
                v = {ty}({});
            }}
",
            i * nt,
            wt_at(kb)
        )
    };
    let b_at = |j: u32, kb: &str| {
        format!(
            "        {{
            let kk = br + {}u;
            let v = {ty}({});
",
            j * rb,
            if by_tap { format!("patch_step({}, kk)", step(kb)) } else { format!("patch_at({kb} + kk, col)") }
        )
    };
    let (mut decl, mut load, mut next) = (String::new(), String::new(), String::new());
    if by_tap {
        if prefetch {
            decl += "    let st0 = step_of(0u, col);\n";
            next += "        let stn = step_of(k0 + BK, col);\n";
        } else {
            load += "        let stl = step_of(k0, col);\n";
        }
    }
    let a_store = |i: u32| {
        let guard = if (i + 1) * nt > bm * bk { format!("if (l < {}u) {{ ", bm * bk) } else { "{ ".into() };
        format!(
            "            {guard}{} }}
        }}
",
            l.store_a
        )
    };
    for i in 0..na {
        if prefetch {
            decl += &format!(
                "    var ra{i} = {ty}(0);
"
            );
            let fetch = |kb: &str| {
                a_at(i, kb)
                    + &format!(
                        "            ra{i} = v;
        }}
"
                    )
            };
            next += &fetch("k0 + BK");
            decl += &fetch("0u").replace(
                "
        ",
                "
    ",
            );
            load += &format!(
                "        {{
            let l = lid + {}u;
            let mm = l / BK;
            let kk = l % BK;
            let v = ra{i};
",
                i * nt
            );
            load += &a_store(i);
        } else {
            load += &a_at(i, "k0");
            load += &a_store(i);
        }
    }
    for j in 0..nb {
        if prefetch {
            decl += &format!(
                "    var rb{j} = {ty}(0);
"
            );
            let fetch = |kb: &str| {
                b_at(j, kb)
                    + &format!(
                        "            rb{j} = v;
        }}
"
                    )
            };
            next += &fetch("k0 + BK");
            decl += &fetch("0u").replace(
                "
        ",
                "
    ",
            );
            load += &format!(
                "        {{
            let kk = br + {}u;
            let v = rb{j};
            {}
        }}
",
                j * rb,
                l.store_b
            );
        } else {
            load += &b_at(j, "k0");
            load += &format!(
                "            {}
        }}
",
                l.store_b
            );
        }
    }
    [decl, load, next]
}

/// A tiling of `shaders/conv_gemm.wgsl`: a workgroup computes `bm` x `bn` of one group's output
/// with (`bn`/`tn`) x (`bm`/`tm`) threads, each owning `tm` x `tn` registers, K in steps of `bk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GemmTiles {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub tm: u32,
    pub tn: u32,
}

impl GemmTiles {
    /// More than 32 output channels per group: the matmul's LARGE tiling with K steps of 8 (on
    /// the H100 at 32x64x56x56 3x3 with the register prefetch: 20.1 TFLOP/s; steps of 16:
    /// 16.4, or 18.6 without the prefetch; 64 x 64 tiles: 16.1; 64 x 256: 14.6).
    const WIDE: GemmTiles = GemmTiles { bm: 64, bn: 128, bk: 8, tm: 4, tn: 8 };
    /// 17 to 32 output channels per group (K steps of 8 as the others; not measured at its size).
    const MID: GemmTiles = GemmTiles { bm: 32, bn: 128, bk: 8, tm: 4, tn: 4 };
    /// 16 or fewer (H100, 32x64x56x56 3x3 in 4 groups: 13.7 TFLOP/s; K steps of 16: 10.9, or
    /// 7.4 without the prefetch).
    const THIN: GemmTiles = GemmTiles { bm: 16, bn: 256, bk: 8, tm: 4, tn: 4 };
    /// Any adapter (64 threads).
    const SMALL: GemmTiles = GemmTiles { bm: 16, bn: 64, bk: 16, tm: 4, tn: 4 };

    fn threads(self) -> u32 {
        (self.bn / self.tn) * (self.bm / self.tm)
    }
    fn valid(self) -> bool {
        [self.bm, self.bn, self.bk, self.tm, self.tn].iter().all(|&v| v > 0)
            && self.tm.is_multiple_of(4)
            && self.tn.is_multiple_of(4)
            && self.bm.is_multiple_of(self.tm)
            && self.bn.is_multiple_of(self.tn)
            && self.threads().is_multiple_of(self.bn)
    }
    fn fits(self, l: &wgpu::Limits) -> bool {
        self.valid()
            && self.bn / self.tn <= l.max_compute_workgroup_size_x
            && self.bm / self.tm <= l.max_compute_workgroup_size_y
            && self.threads() <= l.max_compute_invocations_per_workgroup
            && (self.bm + self.bn) * self.bk * 4 <= l.max_compute_workgroup_storage_size
    }
}

fn env_tiles() -> Option<GemmTiles> {
    static T: OnceLock<Option<GemmTiles>> = OnceLock::new();
    *T.get_or_init(|| {
        let [bm, bn, bk, tm, tn] = crate::env::env_u32s("KILN_CONV_TILES")?;
        Some(GemmTiles { bm, bn, bk, tm, tn }).filter(|t| t.valid())
    })
}

/// The tiling for `m` output channels per group.
pub(super) fn pick(device: &Device, m: usize) -> GemmTiles {
    let limits = device.limits();
    if let Some(t) = env_tiles().filter(|t| t.fits(limits)) {
        return t;
    }
    let wanted = if m > 32 {
        GemmTiles::WIDE
    } else if m > 16 {
        GemmTiles::MID
    } else {
        GemmTiles::THIN
    };
    [wanted, GemmTiles::SMALL].into_iter().find(|t| t.fits(limits)).unwrap_or(GemmTiles::SMALL)
}

/// The register-block code: accumulator declarations, the k steps, the NCHW store.
fn generate(t: GemmTiles, dtype: DType, has_bias: bool) -> (String, String, String) {
    let (cm, cn) = (t.tm / 4, t.tn / 4);
    let mut decl = String::new();
    let mut inner = String::new();
    let mut store = String::new();
    for c in 0..cm {
        for r in 0..4 {
            for j in 0..cn {
                decl += &format!("    var acc_{c}_{r}_{j} = vec4<f32>(0);\n");
            }
        }
    }
    for kk in 0..t.bk {
        inner += "        {\n";
        for c in 0..cm {
            inner += &format!("            let a{c} = As[{kk}u * (BM / 4u) + {c}u * WGY + ty];\n");
        }
        for j in 0..cn {
            inner += &format!("            let b{j} = Bs[{kk}u * (BN / 4u) + {j}u * WGX + tx];\n");
        }
        for c in 0..cm {
            for (r, lane) in LANES.iter().enumerate() {
                for j in 0..cn {
                    inner +=
                        &format!("            acc_{c}_{r}_{j} = fma(vec4<f32>(a{c}.{lane}), b{j}, acc_{c}_{r}_{j});\n");
                }
            }
        }
        inner += "        }\n";
    }
    for j in 0..cn {
        for s in 0..4 {
            store += &format!("    let o_{j}_{s} = out_col(col0 + ({j}u * WGX + tx) * 4u + {s}u);\n");
        }
    }
    let out_t = dtype.wgsl();
    for c in 0..cm {
        for r in 0..4 {
            store += &format!(
                "    {{\n        let row = row0 + ({c}u * WGY + ty) * 4u + {r}u;\n        if (row < p.m) {{\n            let oc = tile.grp * p.m + row;\n            let ob = oc * p.ohw;\n"
            );
            store += if has_bias { "            let bv = f32(bias[oc]);\n" } else { "" };
            for j in 0..cn {
                for (s, lane) in LANES.iter().enumerate() {
                    let v = if has_bias {
                        format!("acc_{c}_{r}_{j}.{lane} + bv")
                    } else {
                        format!("acc_{c}_{r}_{j}.{lane}")
                    };
                    store += &format!(
                        "            if (o_{j}_{s} != 0xffffffffu) {{ out[o_{j}_{s} + ob] = {out_t}({v}); }}\n"
                    );
                }
            }
            store += "        }\n    }\n";
        }
    }
    (decl, inner, store)
}

/// Runs the register-tiled kernel with `tiles`.
pub(super) fn run(l: &GemmLaunch<'_>, tiles: GemmTiles) -> Result<()> {
    let dtype = l.x.dtype();
    let has_bias = l.bias.is_some();
    let pf = prefetch();
    let bt = l.by_tap(tiles.bk);
    let key = format!("conv_gemm:{dtype}:{}x{}x{}:{}x{}:{pf}:{bt}", tiles.bm, tiles.bn, tiles.bk, tiles.tm, tiles.tn);
    l.run(key, tiles.bm, tiles.bn, bt.then_some(tiles.bk), move |bias_decl, out_slot| {
        let (decl, inner, store) = generate(tiles, dtype, has_bias);
        let layout = TileLayout {
            ty: "f32",
            store_a: "As[kk * (BM / 4u) + mm / 4u][mm % 4u] = v;",
            store_b: "Bs[kk * (BN / 4u) + bc / 4u][bc % 4u] = v;",
        };
        let nt = (tiles.bn / tiles.tn) * (tiles.bm / tiles.tm);
        let [pre_decl, load, pre_next] = tile_loads(&layout, tiles.bm, tiles.bn, tiles.bk, nt, pf, bt);
        let t = dtype.wgsl();
        let common = render(COMMON, &[("T", t)]);
        render(
            TEMPLATE,
            &[
                ("ENABLE", enables(&[dtype])),
                ("GEMM_COMMON", &common),
                ("T", t),
                ("BIAS_DECL", bias_decl),
                ("OUT", &out_slot.to_string()),
                ("PARAMS", &(out_slot + 1).to_string()),
                ("BM", &tiles.bm.to_string()),
                ("BN", &tiles.bn.to_string()),
                ("BK", &tiles.bk.to_string()),
                ("WGX", &(tiles.bn / tiles.tn).to_string()),
                ("WGY", &(tiles.bm / tiles.tm).to_string()),
                ("AS_LEN", &(tiles.bk * tiles.bm / 4).to_string()),
                ("BS_LEN", &(tiles.bk * tiles.bn / 4).to_string()),
                ("ACC_DECL", &decl),
                ("PREFETCH_DECL", &pre_decl),
                ("LOAD", &load),
                ("PREFETCH_NEXT", &pre_next),
                ("K_STEPS", &inner),
                ("STORE", &store),
            ],
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The K order must not depend on which built-in tiling an adapter gets.
    #[test]
    fn by_tap_channels_are_a_multiple_of_every_k_step() {
        for t in [GemmTiles::WIDE, GemmTiles::MID, GemmTiles::THIN, GemmTiles::SMALL] {
            assert!(BY_TAP_CHANNELS.is_multiple_of(t.bk as usize), "{t:?}");
        }
    }
}

//! conv2d as an implicit GEMM (`shaders/conv_gemm_common.wgsl`): the shared launch pieces (the
//! parameter block, the tap table, the bindings) and the register-tiled float kernel
//! (`shaders/conv_gemm.wgsl`), whose tilings are in `tilings` (`KILN_CONV_TILES=bm,bn,bk,tm,tn`
//! overrides them, for tuning) and whose WGSL pieces (tile loads, register blocks) `wgsl` writes.

mod tilings;
mod wgsl;

pub(super) use tilings::{pick, GemmTiles};
pub(super) use wgsl::{prefetch, tile_loads, TileLayout};

use wgsl::generate;

use super::Geometry;
use crate::device::Device;
use crate::exec::{enables, grid, Launch, Params};
use crate::pipeline::{render, Checks};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::{Arc, OnceLock};

pub(super) const COMMON: &str = include_str!("../../../../../shaders/conv_gemm_common.wgsl");
const TEMPLATE: &str = include_str!("../../../../../shaders/conv_gemm.wgsl");

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

//! The register-tiled float kernel's tilings: the built-in ones, the choice by output channels
//! per group and the adapter's limits, and `KILN_CONV_TILES` (tuning).

use crate::device::Device;
use std::sync::OnceLock;

/// A tiling of `shaders/conv_gemm.wgsl`: a workgroup computes `bm` x `bn` of one group's output
/// with (`bn`/`tn`) x (`bm`/`tm`) threads, each owning `tm` x `tn` registers, K in steps of `bk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::ops::conv) struct GemmTiles {
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
pub(in crate::ops::conv) fn pick(device: &Device, m: usize) -> GemmTiles {
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

#[cfg(test)]
mod tests {
    use super::super::BY_TAP_CHANNELS;
    use super::*;

    /// The K order must not depend on which built-in tiling an adapter gets.
    #[test]
    fn by_tap_channels_are_a_multiple_of_every_k_step() {
        for t in [GemmTiles::WIDE, GemmTiles::MID, GemmTiles::THIN, GemmTiles::SMALL] {
            assert!(BY_TAP_CHANNELS.is_multiple_of(t.bk as usize), "{t:?}");
        }
    }
}

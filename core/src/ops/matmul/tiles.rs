//! The tilings of the plain matmul kernel and the choice among them: [`MatmulTiles`], chosen per
//! problem by [`pick_tiles`] from the adapter's limits; `KILN_MATMUL_TILES=bm,bn,bk,tm,tn`
//! overrides the choice (for tuning).

use crate::device::Device;
use std::sync::OnceLock;

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
    pub const ALL: [MatmulTiles; 7] =
        [Self::HUGE, Self::LARGE, Self::MEDIUM, Self::SMALL, Self::ROW, Self::COL, Self::TINY];

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
        ok(self.bm)
            && ok(self.bn)
            && ok(self.bk)
            && ok(self.tm)
            && ok(self.tn)
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
}

fn env_tiles() -> Option<MatmulTiles> {
    static T: OnceLock<Option<MatmulTiles>> = OnceLock::new();
    *T.get_or_init(|| {
        let [bm, bn, bk, tm, tn] = crate::env::env_u32s("KILN_MATMUL_TILES")?;
        Some(MatmulTiles { bm, bn, bk, tm, tn }).filter(|t| t.valid())
    })
}

/// The tiling used for an `m` x `k` by `k` x `n` product on `device` (K does not change it).
pub fn pick_tiles(device: &Device, m: usize, n: usize) -> MatmulTiles {
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

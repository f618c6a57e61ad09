//! `matmul` with numpy semantics (2-D, batched with broadcast batch dimensions, 1-D operands
//! promoted): the shape logic and the launch parameters here, the kernels in `tiled` (the tiled
//! kernel of `shaders/matmul.wgsl`, every dtype, tilings in `tiles`) and `coop` (f16 on
//! cooperative matrices where the adapter has them), and on the native tier `native` (f16 on
//! tensor cores through Kiln's own SPIR-V, where `crate::native`'s probe allows it).
//!
//! The tile shapes live in [`MatmulTiles`] and are chosen per problem by [`pick_tiles`] from the
//! adapter's limits; `KILN_MATMUL_TILES=bm,bn,bk,tm,tn` overrides the choice (for tuning).

pub(crate) mod coop;
mod native;
mod tiled;
mod tiles;

pub use coop::{coop_accumulator, coop_source_for_tests, uses_cooperative_matrix};
pub use native::{native_tiling_available, native_tiling_for, native_tilings, uses_native};
pub(crate) use native::{quant_pick as native_quant_pick, quant_product as native_quant_product, NativeTiles};
pub use tiles::{pick_tiles, MatmulTiles};

use crate::device::Device;
use crate::dtype::DType;
use crate::exec::{check_f16, check_same_device, grid, Params};
use crate::shape::{broadcast_shapes, matmul_shape, numel};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// How the tiled kernel stages its tiles through workgroup memory (tuning and tests; `matmul`
/// uses [`MatmulKernel::default_for`], `KILN_MATMUL_KERNEL=0..3` overrides it: bit 0 `quad_a`,
/// bit 1 `double_staging`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulKernel {
    /// A's tile copied as 4 x 4 blocks transposed in registers and stored as whole vec4s (where
    /// K is a multiple of 4), not one vec4 along k stored as four scalars with bank conflicts.
    pub quad_a: bool,
    /// Two copies of the tiles: the next K step's loads are in flight during this step's
    /// arithmetic, one barrier per step (where its registers and workgroup memory allow).
    pub double_staging: bool,
}

impl MatmulKernel {
    /// Every combination, for tests.
    pub const ALL: [MatmulKernel; 4] = [
        MatmulKernel { quad_a: false, double_staging: false },
        MatmulKernel { quad_a: true, double_staging: false },
        MatmulKernel { quad_a: false, double_staging: true },
        MatmulKernel { quad_a: true, double_staging: true },
    ];

    /// The staging `matmul` uses for `tiles` (`KILN_MATMUL_KERNEL` where set). Measured on the
    /// H100 (TFLOP/s, 4096³ / 32 x 1024³, scalar A / quad A / double / both): 34.6 / 36.8 /
    /// 33.4 / 31.0 and 35.1 / 34.5 / 30.9 / 31.0. So quad A stores for HUGE (the 4096³ tiling)
    /// only, and double staging nowhere (its prefetch registers cost more than the latency they
    /// hide).
    pub fn default_for(tiles: MatmulTiles) -> MatmulKernel {
        static K: std::sync::OnceLock<Option<MatmulKernel>> = std::sync::OnceLock::new();
        let forced = *K.get_or_init(|| {
            std::env::var("KILN_MATMUL_KERNEL")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .and_then(|i| Self::ALL.get(i).copied())
        });
        forced.unwrap_or(MatmulKernel { quad_a: tiles == MatmulTiles::HUGE, double_staging: false })
    }
}

/// The parameter block and index helpers both kernels splice in.
const COMMON: &str = include_str!("../../../../shaders/matmul_common.wgsl");

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
    /// The product's multiply-adds (every batch, M x N x K): its real work, charged to the
    /// session before any dispatch (`exec::charge_work`).
    fn macs(&self) -> u64 {
        crate::exec::work_of(&[numel(self.batch_shape), self.m, self.n, self.k])
    }

    /// The parameter block of shaders/matmul_common.wgsl and the dispatch size for output tiles
    /// of `bm` x `bn`.
    fn launch(&self, device: &Device, bm: u32, bn: u32) -> Result<(Params, [u32; 3])> {
        self.launch_k(device, bm, bn, (0, self.k))
    }

    /// `launch` for the dispatch that sums k in `krange` (begin, end) only.
    fn launch_k(&self, device: &Device, bm: u32, bn: u32, krange: (usize, usize)) -> Result<(Params, [u32; 3])> {
        let ntiles = self.n.div_ceil(bn as usize);
        let mtiles = self.m.div_ceil(bm as usize);
        let groups = ntiles as u64 * mtiles as u64 * numel(self.batch_shape) as u64;
        if groups > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "matmul: {groups} workgroups are more than one dispatch can number"
            )));
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
            .dims8(&crate::shape::batch_strides(self.bb, self.batch_shape, self.k * self.n), 0)
            .u32(krange.0)
            .u32(krange.1)
            .u32(0u32)
            .u32(0u32);
        Ok((params, dims))
    }
}

/// numpy `matmul(a, b)`: 2-D products, batched products with broadcast batch dimensions, and
/// 1-D operands promoted (a vector on the left is a row, on the right a column; the promoted
/// dimension is dropped from the result, so vector @ vector is rank 0). f16 accumulates in f32;
/// i32/u32 wrap.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    matmul_impl(a, b, None, None, None, None)
}

/// Which tier `matmul` runs an `m` x `k` by `k` x `n` product of `dtype` on, on `device`.
pub fn matmul_tier(device: &Device, dtype: DType, m: usize, n: usize, k: usize) -> crate::native::Tier {
    if dtype == DType::F16 && native::uses_native(device, m, n, k) {
        crate::native::Tier::Native
    } else {
        crate::native::Tier::Wgsl
    }
}

/// f16 `matmul` on the native tier with the tiling named `tiling` ([`native_tilings`]), whatever
/// the shape (tests run ragged shapes through every variant); Unsupported without the tier.
#[doc(hidden)]
pub fn matmul_native_with(a: &Tensor, b: &Tensor, tiling: &str) -> Result<Tensor> {
    let t = native::by_name(a.device(), tiling)?;
    if a.dtype() != DType::F16 {
        return Err(Error::DTypeMismatch("the native matmul is f16 only".into()));
    }
    matmul_impl(a, b, None, None, Some(t), None)
}

/// `matmul` with a given tiling instead of [`pick_tiles`]'s choice (for tuning and tests);
/// InvalidArgument where the tiling is malformed or the adapter cannot run it.
pub fn matmul_with_tiles(a: &Tensor, b: &Tensor, tiles: MatmulTiles) -> Result<Tensor> {
    if !tiles.fits(a.device().limits()) {
        return Err(Error::InvalidArgument(format!(
            "matmul tiling {tiles:?} is malformed or over this adapter's limits"
        )));
    }
    matmul_impl(a, b, Some(tiles), None, None, None)
}

/// `matmul_with_tiles` with a given staging of the tiled kernel (tests and tuning).
pub fn matmul_with_kernel(a: &Tensor, b: &Tensor, tiles: MatmulTiles, kernel: MatmulKernel) -> Result<Tensor> {
    if !tiles.fits(a.device().limits()) {
        return Err(Error::InvalidArgument(format!(
            "matmul tiling {tiles:?} is malformed or over this adapter's limits"
        )));
    }
    matmul_impl(a, b, Some(tiles), Some(kernel), None, None)
}

/// `matmul_with_kernel` with K split over dispatches of at most `steps` K steps each, as CPU
/// adapters split it (core/src/loop_budget.rs), on any adapter: tests check that the split
/// gives the one-dispatch result bit for bit.
#[doc(hidden)]
pub fn matmul_split_k(a: &Tensor, b: &Tensor, tiles: MatmulTiles, kernel: MatmulKernel, steps: u64) -> Result<Tensor> {
    if !tiles.fits(a.device().limits()) || steps == 0 {
        return Err(Error::InvalidArgument(format!(
            "matmul tiling {tiles:?} is malformed or over this adapter's limits, or 0 steps"
        )));
    }
    matmul_impl(a, b, Some(tiles), Some(kernel), None, Some(steps))
}

fn matmul_impl(
    a: &Tensor,
    b: &Tensor,
    tiles: Option<MatmulTiles>,
    kernel: Option<MatmulKernel>,
    forced_native: Option<native::NativeTiles>,
    split_steps: Option<u64>,
) -> Result<Tensor> {
    let device = check_same_device(&[a, b])?;
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch(format!(
            "matmul of {} and {}: dtypes must match (cast one first)",
            a.dtype(),
            b.dtype()
        )));
    }
    let dtype = a.dtype();
    if dtype == DType::Bool {
        return Err(Error::DTypeMismatch(
            "matmul is not defined on bool tensors: cast to a numeric dtype first".into(),
        ));
    }
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
    crate::exec::charge_work("matmul", problem.macs())?;
    if let Some(t) = forced_native {
        return native::run(&device, a, b, out, t, &problem);
    }
    if tiles.is_none() && dtype == DType::F16 {
        while let Some(t) = native::pick(&device, m, n, k) {
            match native::run(&device, a, b, out.clone(), t, &problem) {
                // The driver refused the module's pipeline (now remembered, so `pick` passes it
                // over: the loop ends): the next choice runs this product.
                Err(_) if native::refused(&device, t, &problem) => continue,
                r => return r,
            }
        }
        if let Some(coop) = coop::pick(&device, m, n, k) {
            return coop::run(&device, a, b, out, coop, &problem);
        }
    }
    let tiles = tiles.unwrap_or_else(|| pick_tiles(&device, m, n));
    let kernel = kernel.unwrap_or_else(|| MatmulKernel::default_for(tiles));
    tiled::run(&device, a, b, out, tiles, kernel, &problem, split_steps)
}

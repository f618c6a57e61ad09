//! The problem's sizes and what every attention kernel shares: the batch part of their
//! parameter blocks, the shared WGSL pieces, and the limits more than one path reads.

use crate::exec::Params;

/// `batch_offsets`, rendered into every attention kernel after its Params.
pub(super) const ATTENTION_COMMON: &str = include_str!("../../../../shaders/attention_common.wgsl");
/// The parameter block shared by the flash kernels.
pub(super) const FLASH_PARAMS: &str = include_str!("../../../../shaders/flash_params.wgsl");
/// Threads per workgroup of the attention kernel (the shader's WG).
pub(super) const WG: usize = 64;
/// The flash kernels' largest D and Dv: q and the output accumulators live in registers.
pub(super) const FLASH_MAX_D: usize = 256;
/// Split-KV: workgroups to aim for (several per SM on a big GPU).
pub(super) const SPLIT_TARGET_GROUPS: usize = 1024;

/// The problem's sizes, shared by the kernels' parameter blocks.
pub(super) struct Geometry<'a> {
    pub(super) lq: usize,
    /// Keys attended to ...
    pub(super) lk: usize,
    /// ... of the rows K and V hold per batch entry (their batch stride).
    pub(super) kv_rows: usize,
    pub(super) d: usize,
    pub(super) dv: usize,
    pub(super) rows: usize,
    pub(super) causal: bool,
    pub(super) scale: f32,
    pub(super) batch_shape: &'a [usize],
    pub(super) qb: &'a [usize],
    pub(super) kb: &'a [usize],
    pub(super) vb: &'a [usize],
}

impl Geometry<'_> {
    /// The parameter block of the flash kernels (`nqb` query blocks per batch entry).
    pub(super) fn flash_params(&self, nqb: usize, blocks: usize, mask: Option<&[usize]>) -> Params {
        let (msq, msk) = mask.map_or((0, 0), |s| (s[s.len() - 2], s[s.len() - 1]));
        let params = Params::new()
            .u32(self.lq)
            .u32(self.lk)
            .u32(self.d)
            .u32(self.dv)
            .u32(nqb)
            .u32(blocks)
            .u32(self.causal as u32)
            .f32(self.scale * std::f32::consts::LOG2_E)
            .u32(msq)
            .u32(msk)
            .u32(self.batch_shape.len())
            .u32(0);
        self.batch_params(params, mask)
    }

    /// The batch dimensions and each operand's batch strides (dims8 lists), mask's last.
    pub(super) fn batch_params(&self, params: Params, mask: Option<&[usize]>) -> Params {
        let bs = self.batch_shape;
        let mstride: Vec<usize> = mask.map_or(vec![], |m| m[..m.len() - 2].to_vec());
        params
            .dims8(bs, 1)
            .dims8(&crate::shape::batch_strides(self.qb, bs, self.lq * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.kb, bs, self.kv_rows * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.vb, bs, self.kv_rows * self.dv), 0)
            .dims8(&mstride, 0)
    }
}

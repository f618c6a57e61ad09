//! The flash path (prefill): 64 query rows per workgroup, K/V tiles in workgroup memory, online
//! softmax; which of its two kernels runs and their launch (their WGSL: `flash_wgsl.rs`).

use super::flash_wgsl::{flash_blocked_source, flash_source, FLASH_BR};
use super::geometry::{Geometry, FLASH_MAX_D};
use super::knobs::{
    flash_blocking_wanted, flash_exp2_kind, flash_part, flash_prefetch, flash_skip_rescale, timing_part,
};
use crate::exec::{grid, Launch};
use crate::ops::elementwise::with_special;
use crate::shape::numel;
use crate::tensor::Tensor;
use crate::Result;

/// Keys per tile of the flash kernel for these D and Dv (K and V tiles of f32 vec4s in workgroup
/// memory), or None where even 16 keys do not fit or D, Dv exceed `FLASH_MAX_D`.
pub(super) fn flash_keys_per_tile(device: &crate::device::Device, d: usize, dv: usize) -> Option<usize> {
    if d > FLASH_MAX_D || dv > FLASH_MAX_D {
        return None;
    }
    let row = (d.div_ceil(4).max(1) + dv.div_ceil(4).max(1)) * 16;
    let limit = device.limits().max_compute_workgroup_storage_size as usize;
    [64, 32, 16].into_iter().find(|bc| bc * row <= limit)
}

/// The flash path into `out`, `bc` keys a tile: the register-blocked kernel where it fits and
/// is wanted, else one query row per thread.
pub(super) fn flash(
    g: &Geometry,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<(&Tensor, &[usize])>,
    out: &Tensor,
    bc: usize,
) -> Result<()> {
    let device = q.device().clone();
    let dtype = q.dtype();
    let nqb = g.lq.div_ceil(FLASH_BR);
    let blocks = numel(g.batch_shape) * nqb;
    let params = g.flash_params(nqb, blocks, mask.map(|(_, s)| s));
    let (dp, dvp) = (g.d.div_ceil(4).max(1), g.dv.div_ceil(4).max(1));
    let has_mask = mask.is_some();
    let vec = g.d.is_multiple_of(4) && g.dv.is_multiple_of(4);
    let mut tensors = vec![q, k, v];
    tensors.extend(mask.map(|(m, _)| m));
    tensors.push(out);
    // Score options are in the one-row kernel only.
    let blocked = flash_blocked_fits(&device, dp, dvp) && flash_blocking_wanted() && g.opts.is_off();
    let opts = g.opts;
    let source: Box<dyn FnOnce() -> String> = if blocked {
        let part = flash_part();
        Box::new(move || with_special(timing_part(flash_blocked_source(dtype, dp, dvp, has_mask, vec), part)))
    } else {
        Box::new(move || with_special(flash_source(dtype, dp, dvp, bc, has_mask, vec, opts)))
    };
    Launch {
        key: format!(
            "flash_attention:{dtype}:{dp}:{dvp}:{bc}:{has_mask}:{vec}:{blocked}:{}:{:?}:{}:{}{}",
            flash_prefetch(),
            flash_exp2_kind(),
            flash_skip_rescale(),
            flash_part(),
            opts.key()
        ),
        source,
        tensors: &tensors,
        params: Some(params),
        groups: grid(blocks as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    // Every index is in range by construction or guarded (tile loads by Lk and D, scores and
    // p v by the row's key count, stores by Lq and Dv), and the tests run ragged shapes through
    // both loaders: naga's clamps cost a fifth of the time (8.25 vs 7.3 TFLOP/s measured).
    .run_with(&device, crate::pipeline::Checks::Unchecked)
}

/// Whether the register-blocked flash kernel takes these padded head sizes (vec4s) on `device`:
/// D and Dv up to 64, its tiles within the workgroup memory.
fn flash_blocked_fits(device: &crate::device::Device, dp: usize, dvp: usize) -> bool {
    let bytes = (dp * 4 * 16 + dp * 4 * 8 + 32 * dvp + 32 * 17 + 128) * 16;
    dp <= 16 && dvp <= 16 && bytes <= device.limits().max_compute_workgroup_storage_size as usize
}

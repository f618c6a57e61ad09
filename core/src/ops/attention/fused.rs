//! The fused path: one workgroup per query row (`shaders/attention.wgsl`), any D, no mask.

use super::geometry::{Geometry, ATTENTION_COMMON, WG};
use crate::exec::{enables, grid, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::Result;

const TEMPLATE: &str = include_str!("../../../../shaders/attention.wgsl");

/// The one-workgroup-per-row kernel, no mask.
pub(super) fn fused(g: &Geometry, q: &Tensor, k: &Tensor, v: &Tensor, out: &Tensor) -> Result<()> {
    let device = q.device().clone();
    let dtype = q.dtype();
    let bs = g.batch_shape;
    let params = Params::new()
        .u32(g.lq)
        .u32(g.lk)
        .u32(g.d)
        .u32(g.dv)
        .u32(g.rows)
        .u32(g.causal as u32)
        .f32(g.scale)
        .u32(bs.len());
    let params = g.batch_params(params, None);
    let dvt = g.dv.div_ceil(WG).max(1);
    let tensors = [q, k, v, out];
    Launch {
        key: format!("attention:{dtype}:{dvt}"),
        source: Box::new(move || {
            with_special(render(
                TEMPLATE,
                &[
                    ("ATTENTION_COMMON", ATTENTION_COMMON),
                    ("ENABLE", enables(&[dtype])),
                    ("T", dtype.wgsl()),
                    ("DVT", &dvt.to_string()),
                ],
            ))
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(g.rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)
}

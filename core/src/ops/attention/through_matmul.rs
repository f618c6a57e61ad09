//! The matmul path: s = q kᵀ and p v through the f32 matmul kernels, a masked softmax over each
//! row (`shaders/attention_softmax.wgsl`) between them.

use crate::dtype::DType;
use crate::exec::{grid, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::tensor::Tensor;
use crate::Result;

const SOFTMAX: &str = include_str!("../../../../shaders/attention_softmax.wgsl");

/// softmax(q kᵀ · scale, masked) v with the matmul kernels; `rows` = batch * Lq, all f32.
#[allow(clippy::too_many_arguments)]
pub(super) fn through_matmul(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    rows: usize,
    lq: usize,
    lk: usize,
    causal: bool,
    scale: f32,
) -> Result<Tensor> {
    let device = q.device().clone();
    let s = crate::ops::matmul(q, &crate::ops::transpose(k, -1, -2)?)?;
    let probs = Tensor::empty_on(&device, s.shape(), DType::F32)?;
    let params = Params::new().u32(rows).u32(lq).u32(lk).u32(causal as u32).f32(scale).u32(0).u32(0).u32(0);
    Launch {
        key: crate::pipeline::PipelineKey::new("attention_softmax", &[]),
        source: Box::new(|| with_special(SOFTMAX.to_string())),
        tensors: &[&s, &probs],
        params: Some(params),
        groups: grid(rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)?;
    drop(s);
    crate::ops::matmul(&probs, v)
}

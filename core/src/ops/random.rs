//! Counter-based random tensors (Philox-4x32-10, `shaders/random.wgsl`). A seed gives the same
//! bits on every device and from every language; `reference::random` is the same generator on
//! the CPU. Element e takes word e % 4 of the Philox block with counter (e / 4, 0, 0, 0) and
//! key (seed low 32 bits, seed high 32 bits).

use crate::dtype::DType;
use crate::exec::{check_f16, enables, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::pipeline::render;
use crate::shape::{check_rank, numel};
use crate::tensor::Tensor;
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../shaders/random.wgsl");
const MULHILO: &str = include_str!("../../../shaders/mulhilo.wgsl");
/// Threads per workgroup of the random kernel (each thread writes 4 elements).
const RANDOM_WG: u64 = 64;

#[allow(clippy::too_many_arguments)]
fn generate(
    name: &str,
    shape: &[usize],
    dtype: DType,
    seed: u64,
    a: f32,
    b: f32,
    cap: f32,
    body: &str,
) -> Result<Tensor> {
    if !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("{name} makes float tensors (f32 or f16), not {dtype}")));
    }
    check_rank(shape)?;
    let device = crate::runtime::device()?;
    check_f16(&device, &[dtype])?;
    let out = Tensor::empty_on(&device, shape, dtype)?;
    let n = numel(shape);
    if n == 0 {
        return Ok(out);
    }
    if n > u32::MAX as usize - 8 {
        return Err(Error::InvalidArgument(format!("{name}: {n} elements are more than one kernel can index")));
    }
    let params =
        Params::new().u32(n).u32(seed as u32).u32((seed >> 32) as u32).u32(0u32).f32(a).f32(b).f32(cap).u32(0u32);
    let threads = (n as u64).div_ceil(4);
    let groups = crate::exec::grid(threads.div_ceil(RANDOM_WG), device.limits().max_compute_workgroups_per_dimension)?;
    let enable = enables(&[dtype]);
    let t = dtype.wgsl();
    Launch {
        key: format!("random:{name}:{dtype}"),
        source: Box::new(move || {
            with_special(render(TEMPLATE, &[("ENABLE", enable), ("T", t), ("BODY", body)]) + MULHILO)
        }),
        tensors: &[&out],
        params: Some(params),
        groups,
    }
    .run(&device)?;
    Ok(out)
}

/// Uniform numbers in [low, high) of `dtype` (f32 or f16). Bit-identical on every device for
/// f32: `u = (w >> 8) * 2^-24`, `v = min(f32(high - low) * u + f32(low), cap)` (two roundings,
/// never contracted into an fma) where `cap`
/// is the largest value of the dtype below `high`.
pub fn random_uniform(shape: &[usize], dtype: DType, seed: u64, low: f64, high: f64) -> Result<Tensor> {
    if !(low.is_finite() && high.is_finite() && low <= high) {
        return Err(Error::InvalidArgument(format!("random_uniform: need finite low <= high, got [{low}, {high})")));
    }
    let (lo, span, cap) = crate::numeric::uniform_params(dtype, low, high);
    generate(
        "uniform",
        shape,
        dtype,
        seed,
        lo,
        span,
        cap,
        "    let v = vec4<f32>(uniform_value(w.x), uniform_value(w.y), uniform_value(w.z), uniform_value(w.w));",
    )
}

/// Normal numbers with the given mean and standard deviation (Box-Muller on Philox words), as
/// f32 or f16. The bits feeding the transform are identical everywhere; the values agree across
/// devices to the accuracy of their log / sin / cos.
pub fn random_normal(shape: &[usize], dtype: DType, seed: u64, mean: f64, std: f64) -> Result<Tensor> {
    if !(mean.is_finite() && std.is_finite() && std >= 0.0) {
        return Err(Error::InvalidArgument(format!("random_normal: need finite mean and std >= 0, got {mean}, {std}")));
    }
    generate(
        "normal",
        shape,
        dtype,
        seed,
        mean as f32,
        std as f32,
        0.0,
        "    let v = vec4<f32>(normal_pair(w.x, w.y), normal_pair(w.z, w.w));",
    )
}

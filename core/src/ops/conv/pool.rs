//! `max_pool2d` and `avg_pool2d` (`shaders/pool.wgsl`): conv2d's window geometry and parameter
//! block, one channel per group, no dilation.

use super::{acc_type, check_positive, nchw, Geometry, WINDOW_COMMON};
use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, enables, groups_1d, Launch};
use crate::pipeline::render;
use crate::shape::window_out_size as out_size;
use crate::tensor::Tensor;
use crate::{Error, Result};

const POOL: &str = include_str!("../../../../shaders/pool.wgsl");

fn pool2d(
    op: &str,
    x: &Tensor,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    max: bool,
) -> Result<Tensor> {
    let device = x.device().clone();
    let dtype = x.dtype();
    if dtype == DType::Bool {
        return Err(Error::DTypeMismatch(format!(
            "{op} is not defined on bool tensors: cast to a numeric dtype first"
        )));
    }
    if !max && !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("{op} needs a float tensor (f32 or f16), got {dtype}")));
    }
    check_f16(&device, &[dtype])?;
    check_positive(op, "kernel", kernel)?;
    check_positive(op, "stride", stride)?;
    if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
        return Err(Error::InvalidArgument(format!(
            "{op}: padding {padding:?} must be at most half the kernel {kernel:?}"
        )));
    }
    let ([n, c, h, w], batched) = nchw(op, x)?;
    let oh = out_size(h, kernel[0], stride[0], padding[0], 1)?;
    let ow = out_size(w, kernel[1], stride[1], padding[1], 1)?;
    let out_shape: Vec<usize> = if batched { vec![n, c, oh, ow] } else { vec![c, oh, ow] };
    let out = Tensor::empty_on(&device, &out_shape, dtype)?;
    let total = out.numel();
    if total == 0 {
        return Ok(out);
    }
    check_indexable(total)?;
    check_indexable(x.numel())?;
    // The pools share conv2d's parameter block (one channel per group, no dilation).
    let geo = Geometry {
        n,
        c,
        h,
        w,
        o: c,
        oh,
        ow,
        kh: kernel[0],
        kw: kernel[1],
        stride,
        padding,
        dilation: [1, 1],
        groups: c.max(1),
    };
    geo.check(op)?;
    // A window row costs its loop over the columns and its own pass (one spare for the
    // `continue`s); windows of many rows are split over dispatches on CPU adapters.
    let max_rows = crate::loop_budget::steps_per_dispatch(&device, kernel[1] as u64 + 3, 0);
    let rranges = crate::loop_budget::chunks(kernel[0], 1, max_rows);
    if rranges.len() > 1 && dtype == DType::F16 {
        // f16 partial results would be rounded between dispatches: run in f32, round once.
        let y = pool2d(op, &crate::ops::cast(x, DType::F32)?, kernel, stride, padding, max)?;
        return crate::ops::cast(&y, DType::F16);
    }
    let acc = acc_type(dtype);
    let (combine, finish) = match (max, dtype.is_float()) {
        // NaN propagates, as in PyTorch.
        (true, true) => ("if (!found || v > acc || v != v) { acc = v; }", "acc"),
        (true, false) => ("if (!found || v > acc) { acc = v; }", "acc"),
        (false, _) => ("acc += v;", "acc / f32(p.kh * p.kw)"),
    };
    let tensors = [x, &out];
    let source = move || {
        render(
            POOL,
            &[
                ("ENABLE", enables(&[dtype])),
                ("WINDOW_COMMON", WINDOW_COMMON),
                ("T", dtype.wgsl()),
                ("ACC", acc),
                ("COMBINE", combine),
                ("FINISH", finish),
            ],
        )
    };
    for (rbegin, rend) in rranges {
        Launch {
            key: format!("{op}:{dtype}"),
            source: Box::new(source),
            tensors: &tensors,
            params: Some(geo.params_channels(total, rbegin, rend)),
            groups: groups_1d(&device, total)?,
        }
        .run(&device)?;
    }
    Ok(out)
}

/// Max over each `kernel` window (NCHW or CHW). Padding never wins; it may be at most half the
/// kernel, as in PyTorch. Any dtype.
pub fn max_pool2d(x: &Tensor, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Result<Tensor> {
    pool2d("max_pool2d", x, kernel, stride, padding, true)
}

/// Mean over each `kernel` window (NCHW or CHW), padded taps counted as zeros in a divisor of
/// KH * KW (PyTorch's count_include_pad=True). Float dtypes.
pub fn avg_pool2d(x: &Tensor, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Result<Tensor> {
    pool2d("avg_pool2d", x, kernel, stride, padding, false)
}

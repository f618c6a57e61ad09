//! searchsorted (a binary search per element, shaders/search.wgsl), count_nonzero and nonzero
//! (composed from cast, sum and the stable argsort of ops/sort.rs).

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, check_same_device, enables, groups_1d, Launch, Params};
use crate::pipeline::render;
use crate::shape::strides;
use crate::tensor::Tensor;
use crate::{Error, Result};

const SEARCH: &str = include_str!("../../../shaders/search.wgsl");

/// numpy `searchsorted(x1, x2, side)`: for each element of `x2`, the i32 index where it would be
/// inserted into the sorted 1-D `x1` to keep it sorted: before equal elements (`right` false,
/// side='left') or after them (side='right'). The order is the sort's (-0 == +0, NaN above
/// +inf and equal to every NaN), so NaN finds the NaNs sorted at the end of x1. `x1` unsorted
/// gives some index (no error: checking would cost a pass). Output: x2's shape.
pub fn searchsorted(x1: &Tensor, x2: &Tensor, right: bool) -> Result<Tensor> {
    let device = check_same_device(&[x1, x2])?;
    if x1.ndim() != 1 {
        return Err(Error::ShapeMismatch(format!("searchsorted: x1 must be 1-D, got shape {:?}", x1.shape())));
    }
    let dt = x1.dtype();
    if x2.dtype() != dt {
        return Err(Error::DTypeMismatch(format!("searchsorted: x1 is {dt} and x2 is {}", x2.dtype())));
    }
    check_f16(&device, &[dt])?;
    let m = x1.numel();
    if m > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!("searchsorted: x1 of {m} elements is past i32 indexing")));
    }
    check_indexable(x2.numel())?;
    if m == 0 || x2.numel() == 0 {
        return crate::ops::full_on(&device, x2.shape(), DType::I32, 0.0);
    }
    let out = Tensor::empty_on(&device, x2.shape(), DType::I32)?;
    Launch {
        key: format!("searchsorted:{dt}"),
        source: Box::new(move || {
            render(SEARCH, &[("ENABLE", enables(&[dt])), ("T", dt.wgsl()), ("KEY", crate::ops::sort::key_expr(dt))])
                + crate::ops::sort::KEY_COMMON
        }),
        tensors: &[x1, x2, &out],
        params: Some(Params::new().u32(x2.numel()).u32(m).u32(right as u32).u32(0)),
        groups: groups_1d(&device, x2.numel())?,
    }
    .run(&device)?;
    Ok(out)
}

/// The number (i32) of non-zero elements over `axes` (None = all); NaN counts as non-zero.
pub fn count_nonzero(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    if x.numel() > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!("count_nonzero: {} elements are past i32 counting", x.numel())));
    }
    let ones = crate::ops::cast(&crate::ops::cast(x, DType::Bool)?, DType::I32)?;
    crate::ops::sum(&ones, axes, keepdims)
}

/// numpy `nonzero(x)`: one i32 tensor per dimension of `x` with the coordinates of the non-zero
/// elements (NaN included) in row-major order. The output size depends on the data, so the
/// count is read back to the host (one synchronisation); the positions come from a stable
/// descending argsort of the truth values (the true ones first, in order) cut to that count.
/// A 0-D `x` is an error, as the Array API says.
pub fn nonzero(x: &Tensor) -> Result<Vec<Tensor>> {
    let flat = truth(x)?;
    let count = match x.numel() {
        0 => 0,
        _ => count_nonzero(&flat, None, false)?.to_vec::<i32>()?[0] as usize,
    };
    coordinates(x, &flat, count)
}

/// `nonzero` with its count readback awaited (the browser's way; natively the same as `nonzero`).
pub async fn nonzero_async(x: &Tensor) -> Result<Vec<Tensor>> {
    let flat = truth(x)?;
    let count = match x.numel() {
        0 => 0,
        _ => count_nonzero(&flat, None, false)?.to_vec_async::<i32>().await?[0] as usize,
    };
    coordinates(x, &flat, count)
}

/// `x` flattened to bools (the 0-D check of `nonzero` first).
fn truth(x: &Tensor) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Err(Error::InvalidArgument("nonzero: x must have at least one dimension (got 0-D)".into()));
    }
    crate::ops::cast(&x.reshape(&[-1])?, DType::Bool)
}

/// The coordinates of the `count` true elements of `flat` (x flattened to bools).
fn coordinates(x: &Tensor, flat: &Tensor, count: usize) -> Result<Vec<Tensor>> {
    let device = x.device();
    if count == 0 {
        return (0..x.ndim()).map(|_| Tensor::empty_on(device, &[0], DType::I32)).collect();
    }
    let order = crate::ops::argsort(flat, 0, true)?;
    let idx = crate::ops::slice(&order, 0, 0, count as isize, 1)?;
    let st = strides(x.shape());
    (0..x.ndim())
        .map(|d| {
            let q =
                if st[d] == 1 { crate::ops::copy(&idx)? } else { crate::ops::floor_divide_scalar(&idx, st[d] as f64)? };
            if d == 0 {
                Ok(q)
            } else {
                crate::ops::remainder_scalar(&q, x.shape()[d] as f64)
            }
        })
        .collect()
}

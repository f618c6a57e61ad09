//! The indexed copies: index_select, gather and embedding (a row gather), on the movement
//! kernel's Take and Gather modes.

use super::{launch, Mode, Plan};
use crate::dtype::DType;
use crate::exec::{check_f16, check_same_device};
use crate::shape::{check_rank, normalize_axis, strides};
use crate::tensor::Tensor;
use crate::{Error, Result};

fn check_index_dtype(what: &str, idx: &Tensor) -> Result<()> {
    if !matches!(idx.dtype(), DType::I32 | DType::U32) {
        return Err(Error::DTypeMismatch(format!("{what}: indices must be i32 or u32, got {}", idx.dtype())));
    }
    Ok(())
}

fn take(x: &Tensor, ax: usize, indices: &Tensor, wrap: bool) -> Result<Tensor> {
    let device = check_same_device(&[x, indices])?;
    let mut shape = x.shape().to_vec();
    shape[ax] = indices.numel();
    check_rank(&shape)?;
    if x.shape()[ax] > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "index_select: axis of length {} is past i32 indexing",
            x.shape()[ax]
        )));
    }
    check_f16(&device, &[x.dtype()])?;
    let out = Tensor::empty_on(&device, &shape, x.dtype())?;
    let st = strides(x.shape());
    let mut stride = st.clone();
    stride[ax] = 0;
    let plan = Plan { shape, stride, base: 0, axis: ax, ax_stride: st[ax], ax_size: x.shape()[ax], wrap };
    launch(&device, Mode::Take, x, Some(indices), &out, plan)?;
    Ok(out)
}

/// numpy `take(x, indices, axis)` with 1-D i32/u32 indices: the output has x's shape with the
/// axis replaced by `len(indices)`. Negative i32 indices count from the end (once); indices
/// still out of range read as 0.
pub fn index_select(x: &Tensor, axis: isize, indices: &Tensor) -> Result<Tensor> {
    check_index_dtype("index_select", indices)?;
    if indices.ndim() != 1 {
        return Err(Error::ShapeMismatch(format!(
            "index_select: indices must be 1-D, got shape {:?}",
            indices.shape()
        )));
    }
    let ax = normalize_axis(axis, x.ndim())?;
    take(x, ax, indices, true)
}

/// torch.gather, also numpy `take_along_axis`: `out[c] = x[c with c[axis] = index[c]]`.
/// `index` has x's rank and, off the axis, dimensions no larger than x's; the output has
/// index's shape. A negative i32 index counts from the end once, as in numpy and
/// [`index_select`] (-1 is the last entry, -n the first); indices still outside
/// `[0, x.shape[axis])` (-n-1, n) read as 0, since the GPU cannot raise numpy's IndexError.
pub fn gather(x: &Tensor, axis: isize, index: &Tensor) -> Result<Tensor> {
    check_index_dtype("gather", index)?;
    let device = check_same_device(&[x, index])?;
    let rank = x.ndim();
    let ax = normalize_axis(axis, rank)?;
    let fits = index.ndim() == rank && (0..rank).all(|d| d == ax || index.shape()[d] <= x.shape()[d]);
    if !fits {
        return Err(Error::ShapeMismatch(format!(
            "gather along axis {ax}: index shape {:?} must have x's rank and fit in {:?} off the axis",
            index.shape(),
            x.shape()
        )));
    }
    if x.shape()[ax] > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!("gather: axis of length {} is past i32 indexing", x.shape()[ax])));
    }
    check_f16(&device, &[x.dtype()])?;
    let out = Tensor::empty_on(&device, index.shape(), x.dtype())?;
    let st = strides(x.shape());
    let mut stride = st.clone();
    stride[ax] = 0;
    let plan = Plan {
        shape: index.shape().to_vec(),
        stride,
        base: 0,
        axis: 8,
        ax_stride: st[ax],
        ax_size: x.shape()[ax],
        wrap: true,
    };
    launch(&device, Mode::Gather, x, Some(index), &out, plan)?;
    Ok(out)
}

/// Rows of `weight` [V, D] picked by `ids` (i32/u32, any shape): output [...ids.shape, D].
/// Ids outside `[0, V)` (negative included) give rows of 0.
pub fn embedding(weight: &Tensor, ids: &Tensor) -> Result<Tensor> {
    check_index_dtype("embedding", ids)?;
    if weight.ndim() != 2 {
        return Err(Error::ShapeMismatch(format!("embedding: weight must be [V, D], got shape {:?}", weight.shape())));
    }
    let mut shape = ids.shape().to_vec();
    shape.push(weight.shape()[1]);
    check_rank(&shape)?;
    let flat = ids.with_shape(vec![ids.numel()]);
    let out = take(weight, 0, &flat, false)?;
    Ok(out.with_shape(shape))
}

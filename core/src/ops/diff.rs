//! `diff`: the n-th forward difference along an axis (the Array API's and numpy's), composed
//! from concat, slice and sub on the GPU: each order is `x[1:] - x[:-1]` along the axis.

use crate::dtype::DType;
use crate::shape::normalize_axis;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `n`-th difference along `axis` of `x` with `prepend` / `append` joined at either end first
/// (each with x's dtype and shape but for the axis). The axis shrinks by `n` (to 0 at most);
/// `n = 0` gives a copy of x (as numpy, without prepend / append). Integers wrap.
pub fn diff(x: &Tensor, axis: isize, n: usize, prepend: Option<&Tensor>, append: Option<&Tensor>) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Err(Error::InvalidArgument("diff needs at least one dimension, got a 0-d tensor".into()));
    }
    if x.dtype() == DType::Bool {
        return Err(Error::DTypeMismatch(
            "diff is not defined on bool tensors: cast to an integer or float dtype first".into(),
        ));
    }
    let ax = normalize_axis(axis, x.ndim())?;
    for (what, t) in [("prepend", prepend), ("append", append)] {
        let Some(t) = t else { continue };
        if t.dtype() != x.dtype() {
            return Err(Error::DTypeMismatch(format!("diff: {what} is {}, x is {}", t.dtype(), x.dtype())));
        }
        let same = t.ndim() == x.ndim() && (0..x.ndim()).all(|d| d == ax || t.shape()[d] == x.shape()[d]);
        if !same {
            return Err(Error::ShapeMismatch(format!(
                "diff: {what} of shape {:?} must match x {:?} but for axis {ax}",
                t.shape(),
                x.shape()
            )));
        }
    }
    if n == 0 {
        // numpy returns x itself, prepend and append unused.
        return crate::ops::copy(x);
    }
    let parts: Vec<&Tensor> = prepend.into_iter().chain([x]).chain(append).collect();
    let mut y = if parts.len() == 1 { crate::ops::copy(x)? } else { crate::ops::concat(&parts, ax as isize)? };
    for _ in 0..n {
        let len = y.shape()[ax] as isize;
        if len == 0 {
            break;
        }
        let hi = crate::ops::slice(&y, ax as isize, 1, len, 1)?;
        let lo = crate::ops::slice(&y, ax as isize, 0, len - 1, 1)?;
        y = crate::ops::sub(&hi, &lo)?;
    }
    Ok(y)
}

//! The Array API's `vecdot` and `tensordot`, lowered to the existing kernels: vecdot is a
//! broadcast multiply and a sum over the axis; tensordot permutes the contracted axes together,
//! reshapes both operands to matrices and runs one matmul. The axis bookkeeping lives here only,
//! so every binding gets the same rules.

use crate::dtype::DType;
use crate::shape::{broadcast_shapes, normalize_axis};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// The contracted axes of [`tensordot`]: the last `n` of x1 with the first `n` of x2, or two
/// explicit lists (negative counts from the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TensordotAxes {
    Count(usize),
    Pairs(Vec<isize>, Vec<isize>),
}

/// Dot product of vectors along `axis` (negative counts from the end of the broadcast shape):
/// `sum(x1 * x2, axis)` with x1 and x2 broadcast against each other, whose sizes along the axis
/// must be equal (no broadcasting there). Integers wrap; floats accumulate in f32.
pub fn vecdot(x1: &Tensor, x2: &Tensor, axis: isize) -> Result<Tensor> {
    if x1.ndim() == 0 || x2.ndim() == 0 {
        return Err(Error::InvalidArgument("vecdot needs at least one dimension in each operand".into()));
    }
    if x1.dtype() == DType::Bool || x1.dtype() != x2.dtype() {
        return Err(Error::DTypeMismatch(format!(
            "vecdot of {} and {}: needs numeric tensors of one dtype",
            x1.dtype(),
            x2.dtype()
        )));
    }
    let shape = broadcast_shapes(x1.shape(), x2.shape())?;
    let ax = normalize_axis(axis, shape.len())?;
    let from_end = shape.len() - ax;
    let size = |t: &Tensor| if from_end <= t.ndim() { Some(t.shape()[t.ndim() - from_end]) } else { None };
    if size(x1) != size(x2) {
        return Err(Error::ShapeMismatch(format!(
            "vecdot: x1 {:?} and x2 {:?} differ along axis {axis} (the vectors must have one length)",
            x1.shape(),
            x2.shape()
        )));
    }
    let prod = crate::ops::mul(x1, x2)?;
    crate::ops::sum(&prod, Some(&[ax as isize]), false)
}

/// Tensor contraction (numpy's `tensordot`): the axes `axes` names are summed over pairwise
/// (their sizes must be equal), the result has x1's other axes then x2's. Lowered to one matmul.
pub fn tensordot(x1: &Tensor, x2: &Tensor, axes: &TensordotAxes) -> Result<Tensor> {
    if x1.dtype() == DType::Bool || x1.dtype() != x2.dtype() {
        return Err(Error::DTypeMismatch(format!(
            "tensordot of {} and {}: needs numeric tensors of one dtype",
            x1.dtype(),
            x2.dtype()
        )));
    }
    let (a1, a2) = contracted(x1.shape(), x2.shape(), axes)?;
    let free1: Vec<usize> = (0..x1.ndim()).filter(|d| !a1.contains(d)).collect();
    let free2: Vec<usize> = (0..x2.ndim()).filter(|d| !a2.contains(d)).collect();
    let dims = |t: &Tensor, ds: &[usize]| ds.iter().map(|&d| t.shape()[d]).collect::<Vec<usize>>();
    let (m, k, n) = (
        dims(x1, &free1).iter().product::<usize>(),
        dims(x1, &a1).iter().product::<usize>(),
        dims(x2, &free2).iter().product::<usize>(),
    );
    let perm1: Vec<isize> = free1.iter().chain(&a1).map(|&d| d as isize).collect();
    let perm2: Vec<isize> = a2.iter().chain(&free2).map(|&d| d as isize).collect();
    let lhs = crate::ops::permute(x1, &perm1)?.reshape(&[m as isize, k as isize])?;
    let rhs = crate::ops::permute(x2, &perm2)?.reshape(&[k as isize, n as isize])?;
    let y = crate::ops::matmul(&lhs, &rhs)?;
    let out: Vec<isize> = dims(x1, &free1).into_iter().chain(dims(x2, &free2)).map(|d| d as isize).collect();
    y.reshape(&out)
}

/// The contracted axes of each operand, normalised, checked: distinct, in range, equal sizes.
pub fn contracted(s1: &[usize], s2: &[usize], axes: &TensordotAxes) -> Result<(Vec<usize>, Vec<usize>)> {
    let (a1, a2): (Vec<usize>, Vec<usize>) = match axes {
        TensordotAxes::Count(n) => {
            let n = *n;
            if n > s1.len() || n > s2.len() {
                return Err(Error::InvalidArgument(format!(
                    "tensordot: axes={n} is more than x1 ({} dims) or x2 ({} dims) has",
                    s1.len(),
                    s2.len()
                )));
            }
            ((s1.len() - n..s1.len()).collect(), (0..n).collect())
        }
        TensordotAxes::Pairs(l1, l2) => {
            if l1.len() != l2.len() {
                return Err(Error::InvalidArgument(format!(
                    "tensordot: {} axes of x1 against {} of x2 (they pair up)",
                    l1.len(),
                    l2.len()
                )));
            }
            let n1 = l1.iter().map(|&a| normalize_axis(a, s1.len())).collect::<Result<Vec<_>>>()?;
            let n2 = l2.iter().map(|&a| normalize_axis(a, s2.len())).collect::<Result<Vec<_>>>()?;
            (n1, n2)
        }
    };
    for (what, a) in [("x1", &a1), ("x2", &a2)] {
        if (1..a.len()).any(|i| a[..i].contains(&a[i])) {
            return Err(Error::InvalidArgument(format!("tensordot: an axis of {what} is named twice ({a:?})")));
        }
    }
    for (&d1, &d2) in a1.iter().zip(&a2) {
        if s1[d1] != s2[d2] {
            return Err(Error::ShapeMismatch(format!(
                "tensordot: axis {d1} of x1 {s1:?} has {} entries, axis {d2} of x2 {s2:?} has {}",
                s1[d1], s2[d2]
            )));
        }
    }
    Ok((a1, a2))
}

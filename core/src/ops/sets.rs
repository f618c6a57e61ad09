//! The Array API's set functions (unique_all, unique_counts, unique_inverse, unique_values) and
//! isin, composed from the stable argsort (ops/sort.rs), searchsorted and the movement ops.
//! Equality is the standard's: -0 == +0 (one unique value, the first in sorted order), and
//! every NaN is distinct from every other (each is its own unique value with count 1, and
//! `isin` never finds a NaN).

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{ops, Error, Result};

/// Everything `unique_all` returns; the narrower functions drop what they do not need.
pub struct Unique {
    /// The distinct values, sorted (1-D; NaNs last, one per NaN).
    pub values: Tensor,
    /// i32 flat index of each value's first occurrence in `x`.
    pub indices: Tensor,
    /// i32 index into `values` of each element of `x` (x's shape).
    pub inverse_indices: Tensor,
    /// i32 number of occurrences of each value.
    pub counts: Tensor,
}

/// The distinct values of `x` (flattened) with first indices, inverse indices and counts.
/// The number of distinct values is read back to the host (the output size depends on data).
pub fn unique_all(x: &Tensor) -> Result<Unique> {
    match sorted(x)? {
        Sorted::Empty(u) => Ok(u),
        Sorted::Runs { perm, sorted, starts_mask } => {
            let starts = ops::nonzero(&starts_mask)?.remove(0);
            finish(x, &perm, &sorted, &starts)
        }
    }
}

/// `unique_all` with its count readback awaited (the browser's way; natively the same).
pub async fn unique_all_async(x: &Tensor) -> Result<Unique> {
    match sorted(x)? {
        Sorted::Empty(u) => Ok(u),
        Sorted::Runs { perm, sorted, starts_mask } => {
            let starts = ops::search::nonzero_async(&starts_mask).await?.remove(0);
            finish(x, &perm, &sorted, &starts)
        }
    }
}

/// `x` flattened and sorted, with a mask of where each run of equal values starts (the part
/// of `unique_all` before its readback); the empty result at once for an empty `x`.
enum Sorted {
    Empty(Unique),
    Runs { perm: Tensor, sorted: Tensor, starts_mask: Tensor },
}

fn sorted(x: &Tensor) -> Result<Sorted> {
    let n = x.numel();
    if n > i32::MAX as usize {
        return Err(Error::InvalidArgument(format!("unique: {n} elements are past i32 indexing")));
    }
    let device = x.device();
    let flat = x.reshape(&[-1])?;
    if n == 0 {
        let e = |dt| Tensor::empty_on(device, &[0], dt);
        return Ok(Sorted::Empty(Unique {
            values: e(x.dtype())?,
            indices: e(DType::I32)?,
            inverse_indices: Tensor::empty_on(device, x.shape(), DType::I32)?,
            counts: e(DType::I32)?,
        }));
    }
    let perm = ops::argsort(&flat, 0, false)?;
    let sorted = ops::index_select(&flat, 0, &perm)?;
    // A new value starts where an element differs from the one before it (NaN != NaN).
    let first = ops::full_on(device, &[1], DType::Bool, 1.0)?;
    let starts_mask = if n == 1 {
        first
    } else {
        let diff = ops::ne(&ops::slice(&sorted, 0, 1, n as isize, 1)?, &ops::slice(&sorted, 0, 0, n as isize - 1, 1)?)?;
        ops::concat(&[&first, &diff], 0)?
    };
    Ok(Sorted::Runs { perm, sorted, starts_mask })
}

/// The rest of `unique_all` from the (i32) sorted positions where the runs start.
fn finish(x: &Tensor, perm: &Tensor, sorted: &Tensor, starts: &Tensor) -> Result<Unique> {
    let (n, device) = (x.numel(), x.device());
    let u = starts.numel();
    let values = ops::index_select(sorted, 0, starts)?;
    let indices = ops::index_select(perm, 0, starts)?;
    let ends = ops::concat(
        &[&ops::slice(starts, 0, 1, u as isize, 1)?, &ops::full_on(device, &[1], DType::I32, n as f64)?],
        0,
    )?;
    let counts = ops::sub(&ends, starts)?;
    // The group of sorted position i is the number of starts at or before i, minus one; x's
    // element perm[i] belongs to it, so inverse = group[perm⁻¹].
    let positions = ops::arange(0.0, n as f64, 1.0, DType::I32)?;
    let group = ops::sub_scalar(&ops::searchsorted(starts, &positions, true)?, 1.0)?;
    let inverse = ops::index_select(&group, 0, &ops::sort::invert_permutation(perm)?)?;
    Ok(Unique { values, indices, inverse_indices: inverse.reshape(&shape_isize(x.shape()))?, counts })
}

fn shape_isize(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// The distinct values of `x` and how often each occurs: (values, counts).
pub fn unique_counts(x: &Tensor) -> Result<(Tensor, Tensor)> {
    let u = unique_all(x)?;
    Ok((u.values, u.counts))
}

/// The distinct values of `x` and, for each element of `x`, its value's index: (values,
/// inverse_indices of x's shape).
pub fn unique_inverse(x: &Tensor) -> Result<(Tensor, Tensor)> {
    let u = unique_all(x)?;
    Ok((u.values, u.inverse_indices))
}

/// The distinct values of `x` (flattened), sorted, NaNs last and each NaN kept.
pub fn unique_values(x: &Tensor) -> Result<Tensor> {
    Ok(unique_all(x)?.values)
}

/// Whether each element of `x1` equals some element of `x2` (bool, x1's shape; with `invert`,
/// whether it equals none). `x1` and `x2` have one dtype; NaN is never found.
pub fn isin(x1: &Tensor, x2: &Tensor, invert: bool) -> Result<Tensor> {
    crate::exec::check_same_device(&[x1, x2])?;
    if x1.dtype() != x2.dtype() {
        return Err(Error::DTypeMismatch(format!("isin: x1 is {} and x2 is {}", x1.dtype(), x2.dtype())));
    }
    let m = x2.numel();
    if m == 0 || x1.numel() == 0 {
        return ops::full_on(x1.device(), x1.shape(), DType::Bool, if invert { 1.0 } else { 0.0 });
    }
    let sorted = ops::sort(&x2.reshape(&[-1])?, 0, false)?;
    let flat = x1.reshape(&[-1])?;
    let at = ops::minimum_scalar(&ops::searchsorted(&sorted, &flat, false)?, (m - 1) as f64)?;
    let found = ops::eq(&ops::index_select(&sorted, 0, &at)?, &flat)?;
    let found = if invert { ops::logical_not(&found)? } else { found };
    found.reshape(&shape_isize(x1.shape()))
}

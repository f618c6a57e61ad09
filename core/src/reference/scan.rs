//! References for the scans (cumulative_sum, cumulative_prod), over plain slices, written from
//! the Array API definition: out[..., j, ...] folds x along `axis` up to j in order; with
//! `include_initial` a leading identity (0 or 1) and a run one longer. Integers wrap as numpy's
//! do; floats accumulate in f32 as the kernels do (so an overflow to inf happens where it does on
//! the GPU), each output rounded to its dtype.

use super::round_to;
use crate::shape::{normalize_axis, numel};
use crate::{DType, Error, Result};

fn fold(sum: bool, dtype: DType, a: f64, b: f64) -> f64 {
    match dtype {
        DType::I32 => {
            let (a, b) = (a as i32, b as i32);
            (if sum { a.wrapping_add(b) } else { a.wrapping_mul(b) }) as f64
        }
        DType::U32 => {
            let (a, b) = (a as u32, b as u32);
            (if sum { a.wrapping_add(b) } else { a.wrapping_mul(b) }) as f64
        }
        _ => (if sum { a + b } else { a * b }) as f32 as f64,
    }
}

/// `x` of `dtype` (already the output dtype: a caller's `dtype` casts first) scanned along `axis`.
pub fn cumulative(
    sum: bool,
    x: &[f64],
    shape: &[usize],
    axis: Option<isize>,
    include_initial: bool,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    assert_eq!(x.len(), numel(shape), "values do not match the shape");
    if shape.is_empty() {
        return Err(Error::InvalidArgument("a scan needs at least one dimension".into()));
    }
    if dtype == DType::Bool {
        return Err(Error::DTypeMismatch("a scan is not defined on bool".into()));
    }
    let axis = match axis {
        Some(a) => normalize_axis(a, shape.len())?,
        None if shape.len() == 1 => 0,
        None => return Err(Error::InvalidArgument("a scan of more than one dimension needs an axis".into())),
    };
    let init = include_initial as usize;
    let mut oshape = shape.to_vec();
    oshape[axis] += init;
    let r = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let identity = if sum { 0.0 } else { 1.0 };
    let mut out = vec![0.0; numel(&oshape)];
    for o in 0..outer {
        for i in 0..inner {
            let (ibase, obase) = (o * r * inner + i, o * (r + init) * inner + i);
            if init == 1 {
                out[obase] = identity;
            }
            let mut acc = None;
            for j in 0..r {
                let v = x[ibase + j * inner];
                // The first element starts the run as it is (0 + -0 would lose the sign of zero).
                let a = match acc {
                    None if dtype.is_float() => v as f32 as f64,
                    None => v,
                    Some(a) => fold(sum, dtype, a, v),
                };
                acc = Some(a);
                out[obase + (j + init) * inner] = round_to(dtype, a);
            }
        }
    }
    Ok((out, oshape))
}

/// The `n`-th forward difference along `axis` (numpy's `diff`), `prepend` / `append` joined
/// first (given as values and shapes); integers wrap in `dtype`, floats round to it.
pub fn diff(
    x: &[f64],
    shape: &[usize],
    axis: isize,
    n: usize,
    prepend: Option<(&[f64], &[usize])>,
    append: Option<(&[f64], &[usize])>,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax = normalize_axis(axis, shape.len())?;
    if n == 0 {
        return Ok((x.to_vec(), shape.to_vec()));
    }
    let (outer, inner): (usize, usize) = (shape[..ax].iter().product(), shape[ax + 1..].iter().product());
    // Rows along the axis: rows[o * inner + i] is the run at (o, i).
    let mut rows: Vec<Vec<f64>> = vec![Vec::new(); outer * inner];
    for (vals, sh) in prepend.into_iter().chain([(x, shape)]).chain(append) {
        let r = sh[ax];
        for o in 0..outer {
            for i in 0..inner {
                rows[o * inner + i].extend((0..r).map(|j| vals[(o * r + j) * inner + i]));
            }
        }
    }
    let sub = |a: f64, b: f64| match dtype {
        DType::I32 => (a as i32).wrapping_sub(b as i32) as f64,
        DType::U32 => (a as u32).wrapping_sub(b as u32) as f64,
        _ => round_to(dtype, a - b),
    };
    for _ in 0..n {
        for row in rows.iter_mut() {
            *row = row.windows(2).map(|w| sub(w[1], w[0])).collect();
        }
    }
    let len = rows.first().map_or_else(
        || {
            let total = prepend.map_or(0, |p| p.1[ax]) + shape[ax] + append.map_or(0, |a| a.1[ax]);
            total.saturating_sub(n)
        },
        |r| r.len(),
    );
    let mut oshape = shape.to_vec();
    oshape[ax] = len;
    let mut out = vec![0.0; outer * len * inner];
    for o in 0..outer {
        for i in 0..inner {
            for (j, &v) in rows[o * inner + i].iter().enumerate() {
                out[(o * len + j) * inner + i] = v;
            }
        }
    }
    Ok((out, oshape))
}

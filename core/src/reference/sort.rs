//! CPU references for sort, argsort, topk, searchsorted, count_nonzero, nonzero, unique_* and isin.
//! Written from numpy's / the Array API's definitions with the standard library's stable sort
//! and linear scans, independent of the GPU's sorting network and binary search.

use crate::shape::normalize_axis;
use crate::Result;
use std::cmp::Ordering;

/// numpy's sort order: -0 == +0, NaN after +inf, NaNs equal among themselves.
pub fn total_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    }
}

/// Stable argsort along `axis` (array-api-strict's semantics: descending keeps ties in index
/// order, so NaNs come first), as f64 indices.
pub fn argsort(x: &[f64], shape: &[usize], axis: isize, descending: bool) -> Result<Vec<f64>> {
    let ax = normalize_axis(axis, shape.len())?;
    let n = shape[ax];
    let inner: usize = shape[ax + 1..].iter().product();
    let outer: usize = shape[..ax].iter().product();
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * n * inner + j * inner + i;
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by(|&a, &b| {
                let c = total_cmp(x[at(a)], x[at(b)]);
                if descending {
                    c.reverse()
                } else {
                    c
                }
            });
            for (j, &k) in idx.iter().enumerate() {
                out[at(j)] = k as f64;
            }
        }
    }
    Ok(out)
}

/// `x` sorted along `axis` (the values picked by [`argsort`]).
pub fn sort(x: &[f64], shape: &[usize], axis: isize, descending: bool) -> Result<Vec<f64>> {
    let ax = normalize_axis(axis, shape.len())?;
    let n = shape[ax];
    let inner: usize = shape[ax + 1..].iter().product();
    let idx = argsort(x, shape, axis, descending)?;
    Ok((0..x.len())
        .map(|e| {
            let (o, rest) = (e / (n * inner), e % (n * inner));
            let i = rest % inner;
            x[o * n * inner + idx[e] as usize * inner + i]
        })
        .collect())
}

/// topk along `axis`: (values, f64 indices), the axis `k` long. Each element's place is counted
/// directly, not sorted: the elements before it are those larger (smaller unless `largest`) in
/// [`total_cmp`]'s order, and the equal ones at lower indices; an element whose place is below `k`
/// lands there. `k` past the axis' length is an error, as on the GPU.
pub fn topk(x: &[f64], shape: &[usize], k: usize, axis: isize, largest: bool) -> Result<(Vec<f64>, Vec<f64>)> {
    let ax = normalize_axis(axis, shape.len())?;
    let n = shape[ax];
    if k > n {
        return Err(crate::Error::InvalidArgument(format!("topk: k = {k} > {n}")));
    }
    let inner: usize = shape[ax + 1..].iter().product();
    let outer: usize = shape[..ax].iter().product();
    let (mut values, mut indices) = (vec![0.0; outer * k * inner], vec![0.0; outer * k * inner]);
    for o in 0..outer {
        for i in 0..inner {
            let v = |j: usize| x[o * n * inner + j * inner + i];
            for j in 0..n {
                let before = (0..n)
                    .filter(|&m| {
                        let c = total_cmp(v(m), v(j));
                        let ahead = if largest { c == Ordering::Greater } else { c == Ordering::Less };
                        ahead || (c == Ordering::Equal && m < j)
                    })
                    .count();
                if before < k {
                    let at = o * k * inner + before * inner + i;
                    values[at] = v(j);
                    indices[at] = j as f64;
                }
            }
        }
    }
    Ok((values, indices))
}

/// numpy searchsorted: how many elements of `x1` come before each `v` of `x2` (strictly
/// before, side='left'; at or before, side='right') in the sort order.
pub fn searchsorted(x1: &[f64], x2: &[f64], right: bool) -> Vec<f64> {
    x2.iter()
        .map(|&v| {
            x1.iter()
                .filter(|&&a| match total_cmp(a, v) {
                    Ordering::Less => true,
                    Ordering::Equal => right,
                    Ordering::Greater => false,
                })
                .count() as f64
        })
        .collect()
}

/// Whether an element is non-zero (NaN is).
fn truthy(v: f64) -> bool {
    v != 0.0
}

/// The number of non-zero elements over `axes` (None = all) and the result's shape.
pub fn count_nonzero(
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let ones: Vec<f64> = x.iter().map(|&v| truthy(v) as u8 as f64).collect();
    super::reduce::sum(&ones, shape, axes, keepdims, crate::DType::I32)
}

/// numpy nonzero: per dimension, the coordinates of the non-zero elements in row-major order.
pub fn nonzero(x: &[f64], shape: &[usize]) -> Vec<Vec<f64>> {
    let st = crate::shape::strides(shape);
    let mut out = vec![Vec::new(); shape.len()];
    for (e, &v) in x.iter().enumerate() {
        if truthy(v) {
            for d in 0..shape.len() {
                out[d].push(((e / st[d]) % shape[d]) as f64);
            }
        }
    }
    out
}

/// The Array API's unique_all on a flattened `x`: (values, first indices, inverse indices,
/// counts). Values equal under `==` are one (so -0 and +0 are one, the first in sorted order);
/// each NaN is its own value.
pub fn unique_all(x: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| total_cmp(x[a], x[b]));
    let (mut values, mut indices, mut counts) = (Vec::new(), Vec::new(), Vec::<f64>::new());
    let mut inverse = vec![0.0; x.len()];
    for (pos, &k) in order.iter().enumerate() {
        let new = pos == 0 || x[order[pos - 1]] != x[k];
        if new {
            values.push(x[k]);
            indices.push(k as f64);
            counts.push(0.0);
        }
        *counts.last_mut().unwrap() += 1.0;
        inverse[k] = (values.len() - 1) as f64;
    }
    (values, indices, inverse, counts)
}

/// Whether each element of `x1` equals (`==`) some element of `x2`; `invert` negates.
pub fn isin(x1: &[f64], x2: &[f64], invert: bool) -> Vec<f64> {
    x1.iter().map(|&a| (x2.contains(&a) != invert) as u8 as f64).collect()
}

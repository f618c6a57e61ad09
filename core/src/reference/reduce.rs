//! References for the reduction family, in f64 over plain slices: values and shape in, values and
//! shape out. Semantics follow numpy: `axes = None` reduces every axis, negative axes count from
//! the end, a repeated axis is an error, integer sums wrap to the dtype, reducing an empty axis
//! gives 0 (sum), NaN (mean, var) or an error (max, min, argmax, argmin). max/min/argmax/argmin
//! propagate NaN (the first NaN wins), and ties go to the first occurrence.

use super::round_to;
use crate::shape::{normalize_axes, normalize_axis, numel, strides};
use crate::{DType, Error, Result};

/// Output shape of a reduction over the (normalised, sorted) `axes`.
pub fn reduced_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    (0..shape.len()).filter_map(|d| if axes.contains(&d) { keepdims.then_some(1) } else { Some(shape[d]) }).collect()
}

/// The values of each output element's group, in row-major order of the reduced coordinates.
fn groups(x: &[f64], shape: &[usize], axes: &[usize]) -> Vec<Vec<f64>> {
    assert_eq!(x.len(), numel(shape), "values do not match the shape");
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let kept_strides = strides(&kept_shape);
    let in_strides = strides(shape);
    let mut out = vec![Vec::new(); numel(&kept_shape)];
    for (i, &v) in x.iter().enumerate() {
        let mut o = 0;
        for (k, &d) in kept.iter().enumerate() {
            let c = (i / in_strides[d]) % shape[d];
            o += c * kept_strides[k];
        }
        out[o].push(v);
    }
    out
}

fn wrap(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::I32 => (v as i64 as i32) as f64,
        DType::U32 => (v as i64 as u32) as f64,
        _ => round_to(dtype, v),
    }
}

fn need_float(name: &str, dtype: DType) -> Result<()> {
    if !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("{name} needs a float tensor, got {dtype}")));
    }
    Ok(())
}

pub fn sum(
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax = normalize_axes(axes, shape.len())?;
    let out = groups(x, shape, &ax).iter().map(|g| wrap(dtype, g.iter().sum())).collect();
    Ok((out, reduced_shape(shape, &ax, keepdims)))
}

pub fn mean(
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    need_float("mean", dtype)?;
    let ax = normalize_axes(axes, shape.len())?;
    let out = groups(x, shape, &ax)
        .iter()
        .map(|g| if g.is_empty() { f64::NAN } else { round_to(dtype, g.iter().sum::<f64>() / g.len() as f64) })
        .collect();
    Ok((out, reduced_shape(shape, &ax, keepdims)))
}

/// Variance with `ddof` delta degrees of freedom: sum((x - mean)^2) / (n - ddof), numpy's
/// `max(n - ddof, 0)` denominator (so inf or NaN when ddof >= n).
pub fn var(
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
    ddof: usize,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    need_float("var", dtype)?;
    let ax = normalize_axes(axes, shape.len())?;
    let out = groups(x, shape, &ax)
        .iter()
        .map(|g| {
            if g.is_empty() {
                return f64::NAN;
            }
            let m = g.iter().sum::<f64>() / g.len() as f64;
            let ss: f64 = g.iter().map(|v| (v - m) * (v - m)).sum();
            let denom = g.len().saturating_sub(ddof) as f64;
            round_to(dtype, ss / denom)
        })
        .collect();
    Ok((out, reduced_shape(shape, &ax, keepdims)))
}

/// Product over `axes` of values of `dtype` (a caller's dtype casts first): integers wrap as
/// numpy's do in the dtype, floats multiply in f64 and round once; 1 over an empty axis.
pub fn prod(
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    if dtype == DType::Bool {
        return Err(Error::DTypeMismatch("prod is not defined on bool".into()));
    }
    let ax = normalize_axes(axes, shape.len())?;
    let out = groups(x, shape, &ax)
        .iter()
        .map(|g| match dtype {
            DType::I32 => g.iter().fold(1i32, |a, &v| a.wrapping_mul(v as i32)) as f64,
            DType::U32 => g.iter().fold(1u32, |a, &v| a.wrapping_mul(v as u32)) as f64,
            _ => round_to(dtype, g.iter().product()),
        })
        .collect();
    Ok((out, reduced_shape(shape, &ax, keepdims)))
}

/// Standard deviation: the square root of [`var`].
pub fn std(
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
    ddof: usize,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let (v, s) = var(x, shape, axes, keepdims, ddof, dtype)?;
    Ok((v.iter().map(|v| round_to(dtype, v.sqrt())).collect(), s))
}

/// Position of the winner in `g` (NaN first, then largest/smallest, then first occurrence).
fn arg_best(g: &[f64], largest: bool) -> usize {
    let mut best = 0;
    for (j, &v) in g.iter().enumerate().skip(1) {
        let b = g[best];
        if b.is_nan() {
            break;
        }
        if v.is_nan() || (largest && v > b) || (!largest && v < b) {
            best = j;
        }
    }
    best
}

fn extreme(
    name: &str,
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
    largest: bool,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax = normalize_axes(axes, shape.len())?;
    let gs = groups(x, shape, &ax);
    if gs.iter().any(|g| g.is_empty()) {
        return Err(Error::InvalidArgument(format!("{name} of an empty axis (zero-size reduction has no identity)")));
    }
    let out = gs.iter().map(|g| g[arg_best(g, largest)]).collect();
    Ok((out, reduced_shape(shape, &ax, keepdims)))
}

pub fn max(x: &[f64], shape: &[usize], axes: Option<&[isize]>, keepdims: bool) -> Result<(Vec<f64>, Vec<usize>)> {
    extreme("max", x, shape, axes, keepdims, true)
}

pub fn min(x: &[f64], shape: &[usize], axes: Option<&[isize]>, keepdims: bool) -> Result<(Vec<f64>, Vec<usize>)> {
    extreme("min", x, shape, axes, keepdims, false)
}

fn arg(
    name: &str,
    x: &[f64],
    shape: &[usize],
    axis: Option<isize>,
    keepdims: bool,
    largest: bool,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let (gs, out_shape) = match axis {
        None => (vec![x.to_vec()], if keepdims { vec![1; shape.len()] } else { vec![] }),
        Some(a) => {
            let a = normalize_axis(a, shape.len())?;
            (groups(x, shape, &[a]), reduced_shape(shape, &[a], keepdims))
        }
    };
    if gs.iter().any(|g| g.is_empty()) {
        return Err(Error::InvalidArgument(format!("{name} of an empty sequence")));
    }
    Ok((gs.iter().map(|g| arg_best(g, largest) as f64).collect(), out_shape))
}

pub fn argmax(x: &[f64], shape: &[usize], axis: Option<isize>, keepdims: bool) -> Result<(Vec<f64>, Vec<usize>)> {
    arg("argmax", x, shape, axis, keepdims, true)
}

pub fn argmin(x: &[f64], shape: &[usize], axis: Option<isize>, keepdims: bool) -> Result<(Vec<f64>, Vec<usize>)> {
    arg("argmin", x, shape, axis, keepdims, false)
}

fn logical(
    x: &[f64],
    shape: &[usize],
    axes: Option<&[isize]>,
    keepdims: bool,
    all: bool,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax = normalize_axes(axes, shape.len())?;
    let truth = |v: &f64| *v != 0.0;
    let out = groups(x, shape, &ax)
        .iter()
        .map(|g| if all { g.iter().all(truth) } else { g.iter().any(truth) } as u8 as f64)
        .collect();
    Ok((out, reduced_shape(shape, &ax, keepdims)))
}

/// numpy `all`: 1 where every value of the group is non-zero (NaN counts), 1 for an empty group.
pub fn all(x: &[f64], shape: &[usize], axes: Option<&[isize]>, keepdims: bool) -> Result<(Vec<f64>, Vec<usize>)> {
    logical(x, shape, axes, keepdims, true)
}

/// numpy `any`: 1 where some value of the group is non-zero, 0 for an empty group.
pub fn any(x: &[f64], shape: &[usize], axes: Option<&[isize]>, keepdims: bool) -> Result<(Vec<f64>, Vec<usize>)> {
    logical(x, shape, axes, keepdims, false)
}

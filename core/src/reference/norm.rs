//! References for the normalization family, in f64 over plain slices: values and shape in,
//! values and shape out (the output shape is the input's). Results are rounded to `dtype`.

use super::round_to;
use crate::shape::{normalize_axis, numel, strides};
use crate::{DType, Error, Result};

fn need_float(name: &str, dtype: DType) -> Result<()> {
    if !dtype.is_float() {
        return Err(Error::DTypeMismatch(format!("{name} needs a float tensor, got {dtype}")));
    }
    Ok(())
}

/// Applies `f` to every 1-D slice of `x` along `axis` (rank 0 counts as shape [1]).
fn along(x: &[f64], shape: &[usize], axis: isize, f: impl Fn(&[f64]) -> Vec<f64>) -> Result<Vec<f64>> {
    assert_eq!(x.len(), numel(shape), "values do not match the shape");
    let one = [1usize];
    let shape = if shape.is_empty() { &one[..] } else { shape };
    let a = normalize_axis(axis, shape.len())?;
    let st = strides(shape);
    let (n, s) = (shape[a], st[a]);
    let mut out = vec![0.0; x.len()];
    if n == 0 {
        return Ok(out);
    }
    for start in 0..x.len() {
        if (start / s) % n != 0 {
            continue;
        }
        let line: Vec<f64> = (0..n).map(|j| x[start + j * s]).collect();
        for (j, v) in f(&line).into_iter().enumerate() {
            out[start + j * s] = v;
        }
    }
    Ok(out)
}

pub fn softmax(x: &[f64], shape: &[usize], axis: isize, dtype: DType) -> Result<(Vec<f64>, Vec<usize>)> {
    need_float("softmax", dtype)?;
    let out = along(x, shape, axis, |l| {
        let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
        l.iter().map(|v| round_to(dtype, (v - m).exp() / s)).collect()
    })?;
    Ok((out, shape.to_vec()))
}

pub fn log_softmax(x: &[f64], shape: &[usize], axis: isize, dtype: DType) -> Result<(Vec<f64>, Vec<usize>)> {
    need_float("log_softmax", dtype)?;
    let out = along(x, shape, axis, |l| {
        let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
        l.iter().map(|v| round_to(dtype, v - m - s.ln())).collect()
    })?;
    Ok((out, shape.to_vec()))
}

fn check_param(name: &str, what: &str, p: Option<&[f64]>, n: usize) -> Result<()> {
    if let Some(p) = p {
        if p.len() != n {
            return Err(Error::ShapeMismatch(format!("{name}: {what} has {} elements, expected {n}", p.len())));
        }
    }
    Ok(())
}

/// Layer norm over the last axis: (x - mean) / sqrt(var + eps) * weight + bias (biased var).
pub fn layer_norm(
    x: &[f64],
    shape: &[usize],
    weight: Option<&[f64]>,
    bias: Option<&[f64]>,
    eps: f64,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    need_float("layer_norm", dtype)?;
    let n = *shape.last().ok_or_else(|| Error::InvalidArgument("layer_norm needs a tensor of rank >= 1".into()))?;
    check_param("layer_norm", "weight", weight, n)?;
    check_param("layer_norm", "bias", bias, n)?;
    let out = along(x, shape, -1, |l| {
        let m = l.iter().sum::<f64>() / n as f64;
        let v = l.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / n as f64;
        let r = 1.0 / (v + eps).sqrt();
        l.iter()
            .enumerate()
            .map(|(j, a)| round_to(dtype, (a - m) * r * weight.map_or(1.0, |w| w[j]) + bias.map_or(0.0, |b| b[j])))
            .collect()
    })?;
    Ok((out, shape.to_vec()))
}

/// RMS norm over the last axis: x / sqrt(mean(x^2) + eps) * weight.
pub fn rms_norm(
    x: &[f64],
    shape: &[usize],
    weight: Option<&[f64]>,
    eps: f64,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    need_float("rms_norm", dtype)?;
    let n = *shape.last().ok_or_else(|| Error::InvalidArgument("rms_norm needs a tensor of rank >= 1".into()))?;
    check_param("rms_norm", "weight", weight, n)?;
    let out = along(x, shape, -1, |l| {
        let ms = l.iter().map(|a| a * a).sum::<f64>() / n as f64;
        let r = 1.0 / (ms + eps).sqrt();
        l.iter().enumerate().map(|(j, a)| round_to(dtype, a * r * weight.map_or(1.0, |w| w[j]))).collect()
    })?;
    Ok((out, shape.to_vec()))
}

/// Inference batch norm: x is [N, C, ...], the statistics and affine parameters are [C].
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &[f64],
    shape: &[usize],
    mean: &[f64],
    var: &[f64],
    weight: Option<&[f64]>,
    bias: Option<&[f64]>,
    eps: f64,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    need_float("batch_norm", dtype)?;
    if shape.len() < 2 {
        return Err(Error::ShapeMismatch(format!("batch_norm needs x of shape [N, C, ...], got {shape:?}")));
    }
    let c = shape[1];
    check_param("batch_norm", "mean", Some(mean), c)?;
    check_param("batch_norm", "var", Some(var), c)?;
    check_param("batch_norm", "weight", weight, c)?;
    check_param("batch_norm", "bias", bias, c)?;
    let spatial: usize = shape[2..].iter().product();
    let out = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let ch = (i / spatial.max(1)) % c;
            let y =
                (v - mean[ch]) / (var[ch] + eps).sqrt() * weight.map_or(1.0, |w| w[ch]) + bias.map_or(0.0, |b| b[ch]);
            round_to(dtype, y)
        })
        .collect();
    Ok((out, shape.to_vec()))
}

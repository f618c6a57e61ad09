//! References for vecdot and tensordot, from their definitions (sums of products in f64,
//! integers wrapping in the dtype), over plain slices.

use super::{broadcast_index, round_to};
use crate::ops::linalg::{contracted, TensordotAxes};
use crate::shape::{broadcast_shapes, normalize_axis, numel, strides};
use crate::{DType, Result};

fn finish(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::I32 => (v as i128 as i32) as f64,
        DType::U32 => (v as i128 as u32) as f64,
        _ => round_to(dtype, v),
    }
}

/// A product of two values of `dtype`, wrapping for integers (as the kernels multiply).
fn mul(dtype: DType, a: f64, b: f64) -> f64 {
    match dtype {
        DType::I32 => (a as i32).wrapping_mul(b as i32) as f64,
        DType::U32 => (a as u32).wrapping_mul(b as u32) as f64,
        _ => a * b,
    }
}

/// `sum(x1 * x2, axis)` with broadcasting (shape checks are the op's; this only computes).
pub fn vecdot(
    x1: &[f64],
    s1: &[usize],
    x2: &[f64],
    s2: &[usize],
    axis: isize,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let shape = broadcast_shapes(s1, s2)?;
    let ax = normalize_axis(axis, shape.len())?;
    let st = strides(&shape);
    let oshape: Vec<usize> = shape.iter().enumerate().filter(|&(d, _)| d != ax).map(|(_, &n)| n).collect();
    let mut out = vec![0.0; numel(&oshape)];
    for i in 0..numel(&shape) {
        let p = mul(dtype, x1[broadcast_index(i, &shape, s1)], x2[broadcast_index(i, &shape, s2)]);
        let o = (i / (st[ax] * shape[ax])) * st[ax] + i % st[ax];
        out[o] += p;
    }
    Ok((out.into_iter().map(|v| finish(dtype, v)).collect(), oshape))
}

/// numpy's tensordot.
pub fn tensordot(
    x1: &[f64],
    s1: &[usize],
    x2: &[f64],
    s2: &[usize],
    axes: &TensordotAxes,
    dtype: DType,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let (a1, a2) = contracted(s1, s2, axes)?;
    let free1: Vec<usize> = (0..s1.len()).filter(|d| !a1.contains(d)).collect();
    let free2: Vec<usize> = (0..s2.len()).filter(|d| !a2.contains(d)).collect();
    let f1: Vec<usize> = free1.iter().map(|&d| s1[d]).collect();
    let f2: Vec<usize> = free2.iter().map(|&d| s2[d]).collect();
    let k: Vec<usize> = a1.iter().map(|&d| s1[d]).collect();
    let (st1, st2) = (strides(s1), strides(s2));
    let coords = |mut i: usize, dims: &[usize]| {
        let mut c = vec![0; dims.len()];
        for d in (0..dims.len()).rev() {
            c[d] = i % dims[d];
            i /= dims[d];
        }
        c
    };
    let oshape: Vec<usize> = f1.iter().chain(&f2).copied().collect();
    let mut out = Vec::with_capacity(numel(&oshape));
    for i in 0..numel(&f1) {
        let c1 = coords(i, &f1);
        for j in 0..numel(&f2) {
            let c2 = coords(j, &f2);
            let mut acc = 0.0;
            for q in 0..numel(&k) {
                let ck = coords(q, &k);
                let mut o1: usize = free1.iter().zip(&c1).map(|(&d, &c)| c * st1[d]).sum();
                let mut o2: usize = free2.iter().zip(&c2).map(|(&d, &c)| c * st2[d]).sum();
                for (t, &c) in ck.iter().enumerate() {
                    o1 += c * st1[a1[t]];
                    o2 += c * st2[a2[t]];
                }
                acc += mul(dtype, x1[o1], x2[o2]);
            }
            out.push(finish(dtype, acc));
        }
    }
    Ok((out, oshape))
}

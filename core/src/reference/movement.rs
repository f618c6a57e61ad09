//! References for the movement family (and embedding / rope), written from numpy / torch
//! definitions with explicit coordinate loops. Values are f64; indices are i64.

use crate::shape::{normalize_axis, numel, strides};
use crate::Result;

/// Row-major coordinates of flat index `i` in `shape`.
pub fn coords(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d];
        i /= shape[d];
    }
    c
}

/// Flat row-major index of coordinates `c` in `shape`.
pub fn flat(c: &[usize], shape: &[usize]) -> usize {
    c.iter().zip(shape).fold(0, |acc, (&ci, &n)| acc * n + ci)
}

/// numpy `transpose(x, axes)`; returns the values and the output shape.
pub fn permute(x: &[f64], shape: &[usize], axes: &[isize]) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax: Vec<usize> = axes.iter().map(|&a| normalize_axis(a, shape.len())).collect::<Result<_>>()?;
    let out_shape: Vec<usize> = ax.iter().map(|&a| shape[a]).collect();
    let vals = (0..numel(&out_shape))
        .map(|i| {
            let oc = coords(i, &out_shape);
            let mut ic = vec![0; shape.len()];
            for (d, &a) in ax.iter().enumerate() {
                ic[a] = oc[d];
            }
            x[flat(&ic, shape)]
        })
        .collect();
    Ok((vals, out_shape))
}

/// Python's `range(n)[start:stop:step]` for step >= 1, as the list of picked positions.
pub fn slice_positions(n: usize, start: isize, stop: isize, step: isize) -> Vec<usize> {
    let n = n as isize;
    let norm = |v: isize| {
        let v = if v < 0 { v + n } else { v };
        v.clamp(0, n)
    };
    let (s, e) = (norm(start), norm(stop));
    let mut out = Vec::new();
    let mut k = s;
    while k < e {
        out.push(k as usize);
        k += step;
    }
    out
}

pub fn slice(
    x: &[f64],
    shape: &[usize],
    axis: isize,
    start: isize,
    stop: isize,
    step: isize,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax = normalize_axis(axis, shape.len())?;
    let pos = slice_positions(shape[ax], start, stop, step);
    let mut out_shape = shape.to_vec();
    out_shape[ax] = pos.len();
    let vals = (0..numel(&out_shape))
        .map(|i| {
            let mut c = coords(i, &out_shape);
            c[ax] = pos[c[ax]];
            x[flat(&c, shape)]
        })
        .collect();
    Ok((vals, out_shape))
}

/// numpy `concatenate` of (values, shape) pairs along `axis` (shapes assumed compatible).
pub fn concat(xs: &[(&[f64], &[usize])], axis: isize) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax = normalize_axis(axis, xs[0].1.len())?;
    let mut out_shape = xs[0].1.to_vec();
    out_shape[ax] = xs.iter().map(|(_, s)| s[ax]).sum();
    let vals = (0..numel(&out_shape))
        .map(|i| {
            let mut c = coords(i, &out_shape);
            let mut k = 0;
            while c[ax] >= xs[k].1[ax] {
                c[ax] -= xs[k].1[ax];
                k += 1;
            }
            xs[k].0[flat(&c, xs[k].1)]
        })
        .collect();
    Ok((vals, out_shape))
}

/// numpy `take(x, indices, axis)`; a negative index counts from the end once, anything still
/// out of range reads 0.
pub fn index_select(x: &[f64], shape: &[usize], axis: isize, indices: &[i64]) -> Result<(Vec<f64>, Vec<usize>)> {
    let ax = normalize_axis(axis, shape.len())?;
    let n = shape[ax] as i64;
    let mut out_shape = shape.to_vec();
    out_shape[ax] = indices.len();
    let vals = (0..numel(&out_shape))
        .map(|i| {
            let mut c = coords(i, &out_shape);
            let j = indices[c[ax]];
            let j = if j < 0 { j + n } else { j };
            if j < 0 || j >= n {
                return 0.0;
            }
            c[ax] = j as usize;
            x[flat(&c, shape)]
        })
        .collect();
    Ok((vals, out_shape))
}

/// torch.gather / numpy `take_along_axis`: out[c] = x[c with c[axis] = index[c]]; a negative
/// index counts from the end once, anything still outside [0, n) reads 0.
pub fn gather(x: &[f64], shape: &[usize], axis: isize, index: &[i64], index_shape: &[usize]) -> Result<Vec<f64>> {
    let ax = normalize_axis(axis, shape.len())?;
    let n = shape[ax] as i64;
    Ok((0..numel(index_shape))
        .map(|i| {
            let mut c = coords(i, index_shape);
            let j = index[i];
            let j = if j < 0 { j + n } else { j };
            if j < 0 || j >= n {
                return 0.0;
            }
            c[ax] = j as usize;
            x[flat(&c, shape)]
        })
        .collect())
}

/// Rows of weight [v, d] for each id (ids outside [0, v) give zeros), flattened.
pub fn embedding(weight: &[f64], v: usize, d: usize, ids: &[i64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(ids.len() * d);
    for &id in ids {
        if id >= 0 && (id as usize) < v {
            out.extend_from_slice(&weight[id as usize * d..(id as usize + 1) * d]);
        } else {
            out.extend(std::iter::repeat_n(0.0, d));
        }
    }
    out
}

/// Rotary embedding (rotate-half) of x [..., L, D] in f64.
pub fn rope(x: &[f64], shape: &[usize], pos_offset: usize, base: f64) -> Vec<f64> {
    rope_scaled(x, shape, pos_offset, base, None)
}

/// [`rope`] with frequency factors: pair i turns by pos · base^(-2i/D) / factors[i].
pub fn rope_scaled(x: &[f64], shape: &[usize], pos_offset: usize, base: f64, factors: Option<&[f64]>) -> Vec<f64> {
    let r = shape.len();
    let (l, d) = (shape[r - 2], shape[r - 1]);
    let h = d / 2;
    let st = strides(shape);
    let mut out = x.to_vec();
    if h == 0 || l == 0 {
        return out;
    }
    for row in 0..numel(shape) / d {
        let pos = (pos_offset + row % l) as f64;
        let at = row * st[r - 2];
        for i in 0..h {
            let theta = pos * base.powf(-2.0 * i as f64 / d as f64) / factors.map_or(1.0, |f| f[i]);
            let (s, c) = theta.sin_cos();
            let (x0, x1) = (x[at + i], x[at + i + h]);
            out[at + i] = x0 * c - x1 * s;
            out[at + i + h] = x1 * c + x0 * s;
        }
    }
    out
}

/// [`crate::ops::rope_qkv_to_cache`] in f64: returns the queries [h, l, d] and writes keys and
/// values into the caches [hkv, cap, d] at rows pos..pos + l.
#[allow(clippy::too_many_arguments)]
pub fn rope_qkv_to_cache(
    qkv: &[f64],
    l: usize,
    h: usize,
    k_cache: &mut [f64],
    v_cache: &mut [f64],
    hkv: usize,
    cap: usize,
    d: usize,
    pos: usize,
    base: f64,
) -> Vec<f64> {
    rope_qkv_to_cache_scaled(qkv, l, h, k_cache, v_cache, hkv, cap, d, pos, base, None)
}

/// [`rope_qkv_to_cache`] with frequency factors ([`rope_scaled`]).
#[allow(clippy::too_many_arguments)]
pub fn rope_qkv_to_cache_scaled(
    qkv: &[f64],
    l: usize,
    h: usize,
    k_cache: &mut [f64],
    v_cache: &mut [f64],
    hkv: usize,
    cap: usize,
    d: usize,
    pos: usize,
    base: f64,
    factors: Option<&[f64]>,
) -> Vec<f64> {
    let width = (h + 2 * hkv) * d;
    // Head-major copies of each part, [heads, l, d], so that `rope` sees positions as rows.
    let part = |first: usize, heads: usize| -> Vec<f64> {
        let mut out = Vec::with_capacity(heads * l * d);
        for hh in 0..heads {
            for li in 0..l {
                let at = li * width + (first + hh) * d;
                out.extend_from_slice(&qkv[at..at + d]);
            }
        }
        out
    };
    let q = rope_scaled(&part(0, h), &[h, l, d], pos, base, factors);
    let k = rope_scaled(&part(h, hkv), &[hkv, l, d], pos, base, factors);
    let v = part(h + hkv, hkv);
    for hh in 0..hkv {
        for li in 0..l {
            let dst = (hh * cap + pos + li) * d;
            let src = (hh * l + li) * d;
            k_cache[dst..dst + d].copy_from_slice(&k[src..src + d]);
            v_cache[dst..dst + d].copy_from_slice(&v[src..src + d]);
        }
    }
    q
}

//! CPU references for `conv2d`, `max_pool2d` and `avg_pool2d` (NCHW, PyTorch semantics), in f64
//! over plain row-major slices. Shapes are 4-D here; the ops also take unbatched 3-D input.

use crate::shape::window_out_size as out_size;
use crate::{Error, Result};

/// conv2d: x [N, C, H, W], w [O, C/groups, KH, KW], bias [O]; returns the output and its shape.
#[allow(clippy::too_many_arguments)]
pub fn conv2d(
    x: &[f64],
    x_shape: [usize; 4],
    w: &[f64],
    w_shape: [usize; 4],
    bias: Option<&[f64]>,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<(Vec<f64>, [usize; 4])> {
    let [n, c, h, wd] = x_shape;
    let [o, cg, kh, kw] = w_shape;
    if groups == 0 || c % groups != 0 || o % groups != 0 || cg * groups != c {
        return Err(Error::ShapeMismatch(format!(
            "conv2d: input channels {c}, weight {w_shape:?} and groups {groups} do not agree"
        )));
    }
    let oh = out_size(h, kh, stride[0], padding[0], dilation[0])?;
    let ow = out_size(wd, kw, stride[1], padding[1], dilation[1])?;
    let og = o / groups;
    let mut out = vec![0.0; n * o * oh * ow];
    for ni in 0..n {
        for oi in 0..o {
            let g = oi / og;
            for y in 0..oh {
                for xo in 0..ow {
                    let mut s = bias.map_or(0.0, |b| b[oi]);
                    for ci in 0..cg {
                        let cin = g * cg + ci;
                        for ky in 0..kh {
                            let iy = (y * stride[0] + ky * dilation[0]) as isize - padding[0] as isize;
                            if iy < 0 || iy >= h as isize {
                                continue;
                            }
                            for kx in 0..kw {
                                let ix = (xo * stride[1] + kx * dilation[1]) as isize - padding[1] as isize;
                                if ix < 0 || ix >= wd as isize {
                                    continue;
                                }
                                s += x[((ni * c + cin) * h + iy as usize) * wd + ix as usize]
                                    * w[((oi * cg + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    out[((ni * o + oi) * oh + y) * ow + xo] = s;
                }
            }
        }
    }
    Ok((out, [n, o, oh, ow]))
}

fn pool(
    x: &[f64],
    x_shape: [usize; 4],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    max: bool,
) -> Result<(Vec<f64>, [usize; 4])> {
    let [n, c, h, w] = x_shape;
    if padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1] {
        return Err(Error::InvalidArgument(format!(
            "pool padding {padding:?} must be at most half the kernel {kernel:?}"
        )));
    }
    let oh = out_size(h, kernel[0], stride[0], padding[0], 1)?;
    let ow = out_size(w, kernel[1], stride[1], padding[1], 1)?;
    let mut out = vec![0.0; n * c * oh * ow];
    for p in 0..n * c {
        for y in 0..oh {
            for xo in 0..ow {
                let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
                for ky in 0..kernel[0] {
                    let iy = (y * stride[0] + ky) as isize - padding[0] as isize;
                    for kx in 0..kernel[1] {
                        let ix = (xo * stride[1] + kx) as isize - padding[1] as isize;
                        if iy < 0 || iy >= h as isize || ix < 0 || ix >= w as isize {
                            continue; // padding: never the max, zero in the sum
                        }
                        let v = x[(p * h + iy as usize) * w + ix as usize];
                        acc = if max { acc.max(v) } else { acc + v };
                    }
                }
                out[(p * oh + y) * ow + xo] = if max { acc } else { acc / (kernel[0] * kernel[1]) as f64 };
            }
        }
    }
    Ok((out, [n, c, oh, ow]))
}

/// max_pool2d over x [N, C, H, W]; padded positions never win.
pub fn max_pool2d(
    x: &[f64],
    x_shape: [usize; 4],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Result<(Vec<f64>, [usize; 4])> {
    pool(x, x_shape, kernel, stride, padding, true)
}

/// avg_pool2d over x [N, C, H, W]; padded positions count as zeros (count_include_pad=True).
pub fn avg_pool2d(
    x: &[f64],
    x_shape: [usize; 4],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Result<(Vec<f64>, [usize; 4])> {
    pool(x, x_shape, kernel, stride, padding, false)
}

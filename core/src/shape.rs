//! Shape arithmetic shared by every op: element counts, strides, numpy broadcasting, axes, and
//! the output shapes of matmul and of sliding windows (convolution, pooling).

use crate::{Error, Result};

pub const MAX_RANK: usize = 8;

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `a + b` for a size, an offset or a count, or InvalidArgument naming `what` (release builds
/// wrap on overflow: an absurd padding would otherwise turn into a small, wrong shape).
pub fn add(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_add(b).ok_or_else(|| too_large(what))
}

/// `a * b`, as `add`.
pub fn mul(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| too_large(what))
}

pub(crate) fn too_large(what: &str) -> Error {
    Error::InvalidArgument(format!("{what} is too large (size arithmetic overflows)"))
}

/// The element count of a valid shape. Valid means the product of its dimensions, zeros counted
/// as ones, fits in an `isize`: a zero-size tensor of shape [0, 2^40, 2^40] would otherwise have
/// strides that overflow. Every tensor's shape passes through here when it is created.
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    let mut span: usize = 1;
    for &d in shape {
        span = span.checked_mul(d.max(1)).filter(|&v| v <= isize::MAX as usize).ok_or_else(|| {
            Error::InvalidArgument(format!("shape {shape:?} has more elements than can be addressed"))
        })?;
    }
    Ok(numel(shape))
}

/// Row-major (C order) strides in elements.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

pub fn check_rank(shape: &[usize]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(Error::InvalidArgument(format!("rank {} is above the maximum of {MAX_RANK}", shape.len())));
    }
    Ok(())
}

/// The numpy broadcast of two shapes.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::ShapeMismatch(format!(
                "shapes {a:?} and {b:?} do not broadcast (dimension {i}: {da} vs {db})"
            )));
        };
    }
    Ok(out)
}

/// Element strides of `shape` seen through the broadcast to `out` (0 on broadcast dimensions).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let st = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len()).map(|i| if i < off || shape[i - off] == 1 { 0 } else { st[i - off] }).collect()
}

/// `broadcast_strides` for the batch dimensions of stacked matrices of `mat` elements each.
pub(crate) fn batch_strides(own: &[usize], out: &[usize], mat: usize) -> Vec<usize> {
    broadcast_strides(own, out).into_iter().map(|s| s * mat).collect()
}

/// Normalises a possibly negative axis against `rank`.
pub fn normalize_axis(axis: isize, rank: usize) -> Result<usize> {
    let r = rank as isize;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(Error::InvalidArgument(format!("axis {axis} is out of range for a tensor of rank {rank}")));
    }
    Ok(a as usize)
}

/// Normalises and sorts a set of axes; `None` means every axis. Duplicates are an error.
pub fn normalize_axes(axes: Option<&[isize]>, rank: usize) -> Result<Vec<usize>> {
    let mut out = match axes {
        None => (0..rank).collect::<Vec<_>>(),
        Some(list) => list.iter().map(|&a| normalize_axis(a, rank)).collect::<Result<Vec<_>>>()?,
    };
    out.sort_unstable();
    let before = out.len();
    out.dedup();
    if out.len() != before {
        return Err(Error::InvalidArgument(format!("repeated axis in {axes:?}")));
    }
    Ok(out)
}

/// Output size of one spatial dimension of a sliding window (convolution, pooling):
/// `(size + 2 pad - dil (k - 1) - 1) / stride + 1`.
pub fn window_out_size(size: usize, k: usize, stride: usize, pad: usize, dil: usize) -> Result<usize> {
    if stride == 0 || dil == 0 || k == 0 {
        return Err(Error::InvalidArgument(format!(
            "stride {stride}, dilation {dil} and kernel {k} must be at least 1"
        )));
    }
    let span = add(mul(dil, k - 1, "dilation * (kernel - 1)")?, 1, "the kernel span")?;
    let padded = add(size, mul(pad, 2, "padding")?, "the padded input")?;
    if span > padded {
        return Err(Error::ShapeMismatch(format!(
            "a kernel spanning {span} is larger than the padded input of {padded}"
        )));
    }
    Ok((padded - span) / stride + 1)
}

/// The output shape of numpy `matmul(a, b)`; errors as the op does.
pub fn matmul_shape(a_shape: &[usize], b_shape: &[usize]) -> Result<Vec<usize>> {
    if a_shape.is_empty() || b_shape.is_empty() {
        return Err(Error::ShapeMismatch("matmul: operands must have at least one dimension".into()));
    }
    let a2: Vec<usize> = if a_shape.len() == 1 { vec![1, a_shape[0]] } else { a_shape.to_vec() };
    let b2: Vec<usize> = if b_shape.len() == 1 { vec![b_shape[0], 1] } else { b_shape.to_vec() };
    let (m, ka) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if ka != kb {
        return Err(Error::ShapeMismatch(format!(
            "matmul: {a_shape:?} @ {b_shape:?}: inner dimensions {ka} and {kb} differ"
        )));
    }
    let mut out = broadcast_shapes(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    if a_shape.len() > 1 {
        out.push(m);
    }
    if b_shape.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

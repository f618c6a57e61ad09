//! Data movement: reshape, permute, transpose, slice, concat, index_select, gather, plus the
//! two nn ops that are movement at heart: embedding (a row gather) and rope (a pairwise
//! rotation). Every copy runs `shaders/movement.wgsl` (the indexed ones are in `index`); rope
//! runs `shaders/rope.wgsl` (`rope`).
//!
//! Copies move bits: 4-byte dtypes travel as u32 words (so f32 NaN payloads survive), f16
//! travels as WGSL f16 and needs the adapter's SHADER_F16 (else `Unsupported`).

use crate::device::Device;
use crate::dtype::DType;
use crate::exec::{check_f16, check_same_device, enables, groups_1d, Launch, Params};
use crate::pipeline::render;
use crate::shape::{normalize_axis, numel, strides};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

mod index;
mod rope;

pub use index::{embedding, gather, index_select};
pub use rope::rope;

const TEMPLATE: &str = include_str!("../../../../shaders/movement.wgsl");

/// The WGSL type data of `dtype` is moved as.
fn word(dtype: DType) -> &'static str {
    if dtype == DType::F16 {
        "f16"
    } else {
        "u32"
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Copy,
    Scatter,
    Take,
    Gather,
}

/// One launch of the movement kernel: walk `shape` (row-major), offset = base + Σ c·stride.
struct Plan {
    shape: Vec<usize>,
    stride: Vec<usize>,
    base: usize,
    axis: usize,
    ax_stride: usize,
    ax_size: usize,
    wrap: bool,
}

impl Plan {
    fn strided(shape: Vec<usize>, stride: Vec<usize>, base: usize) -> Plan {
        Plan { shape, stride, base, axis: 8, ax_stride: 0, ax_size: 0, wrap: false }
    }

    /// Drops unit dimensions and merges neighbours that are contiguous with each other
    /// (only for plans without an indexed axis).
    fn coalesce(mut self) -> Plan {
        let mut shape: Vec<usize> = Vec::new();
        let mut stride: Vec<usize> = Vec::new();
        for (&n, &s) in self.shape.iter().zip(&self.stride) {
            if n == 1 {
                continue;
            }
            if let (Some(ln), Some(ls)) = (shape.last_mut(), stride.last_mut()) {
                if *ls == s * n {
                    *ln *= n;
                    *ls = s;
                    continue;
                }
            }
            shape.push(n);
            stride.push(s);
        }
        self.shape = shape;
        self.stride = stride;
        self
    }
}

fn check_u32(what: &str, n: usize) -> Result<()> {
    if n > u32::MAX as usize - 8 {
        return Err(Error::InvalidArgument(format!("{what}: {n} elements are more than one kernel can index")));
    }
    Ok(())
}

fn launch(
    device: &Arc<Device>,
    mode: Mode,
    src: &Tensor,
    idx: Option<&Tensor>,
    out: &Tensor,
    plan: Plan,
) -> Result<()> {
    let dtype = src.dtype();
    check_f16(device, &[dtype])?;
    let n = numel(&plan.shape);
    if n == 0 {
        return Ok(());
    }
    check_u32("movement", n)?;
    check_u32("movement", src.numel())?;
    check_u32("movement", out.numel())?;
    let size = dtype.storage_size();
    // A contiguous run with 4-byte aligned ends is a plain buffer copy.
    if matches!(mode, Mode::Copy | Mode::Scatter)
        && plan.shape.len() <= 1
        && plan.stride.first().is_none_or(|&s| s == 1)
    {
        let bytes = n * size;
        if (plan.base * size).is_multiple_of(4) && bytes.is_multiple_of(4) {
            let (so, doff) = if mode == Mode::Copy { (plan.base * size, 0) } else { (0, plan.base * size) };
            return device.copy(src.raw(), so as u64, out.raw(), doff as u64, bytes as u64);
        }
    }
    let t = word(dtype);
    let idx_t = idx.map_or("u32", |i| i.dtype().wgsl());
    let (mode_name, body) = match mode {
        Mode::Copy => ("copy", "    dst[i] = src[off];".to_string()),
        Mode::Scatter => ("scatter", "    dst[off] = src[i];".to_string()),
        Mode::Take | Mode::Gather => {
            let at = if mode == Mode::Take { "cax" } else { "i" };
            (
                if mode == Mode::Take { "take" } else { "gather" },
                format!(
                    "    let j = pick(idx[{at}]);\n    if (j < p.ax_size) {{\n        dst[i] = src[off + j * p.ax_stride];\n    }} else {{\n        dst[i] = {t}(0);\n    }}"
                ),
            )
        }
    };
    let pick = match idx_t {
        "i32" => "    var j = raw;\n    if (j < 0 && p.wrap == 1u) {\n        j += i32(p.ax_size);\n    }\n    return select(p.ax_size, u32(j), j >= 0 && u32(j) < p.ax_size);",
        _ => "    return select(p.ax_size, raw, raw < p.ax_size);",
    };
    let (idx_binding, out_slot) = match idx {
        Some(i) => (format!("@group(0) @binding(1) var<storage, read> idx: array<{}>;", i.dtype().wgsl()), 2),
        None => (String::new(), 1),
    };
    let params = Params::new()
        .u32(n)
        .u32(plan.shape.len())
        .u32(plan.base)
        .u32(plan.axis)
        .u32(plan.ax_stride)
        .u32(plan.ax_size)
        .u32(plan.wrap as u32)
        .u32(0u32)
        .dims8(&plan.shape, 1)
        .dims8(&plan.stride, 0);
    let mut tensors: Vec<&Tensor> = vec![src];
    if let Some(i) = idx {
        tensors.push(i);
    }
    tensors.push(out);
    let enable = enables(&[dtype]);
    Launch {
        key: format!("movement:{mode_name}:{t}:{idx_t}"),
        source: Box::new(move || {
            render(
                TEMPLATE,
                &[
                    ("ENABLE", enable),
                    ("T", t),
                    ("IDX_BINDING", &idx_binding),
                    ("OUT", &out_slot.to_string()),
                    ("PARAMS", &(out_slot + 1).to_string()),
                    ("IDXT", idx_t),
                    ("PICK", pick),
                    ("BODY", &body),
                ],
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups: groups_1d(device, n)?,
    }
    .run(device)
}

/// Same data, new shape, no copy (the buffer is shared). One entry may be -1.
pub fn reshape(x: &Tensor, shape: &[isize]) -> Result<Tensor> {
    x.reshape(shape)
}

/// A strided view of `x` (shape, element strides, base offset) copied into a new contiguous
/// tensor.
fn strided_copy(x: &Tensor, shape: Vec<usize>, stride: Vec<usize>, base: usize) -> Result<Tensor> {
    let out = Tensor::empty_on(x.device(), &shape, x.dtype())?;
    launch(x.device(), Mode::Copy, x, None, &out, Plan::strided(shape, stride, base).coalesce())?;
    Ok(out)
}

/// Reorders the axes: output axis d is input axis `axes[d]` (numpy `transpose(x, axes)`).
pub fn permute(x: &Tensor, axes: &[isize]) -> Result<Tensor> {
    let rank = x.ndim();
    if axes.len() != rank {
        return Err(Error::InvalidArgument(format!("permute: {} axes given for a tensor of rank {rank}", axes.len())));
    }
    let mut seen = [false; 8];
    let mut perm = Vec::with_capacity(rank);
    for &a in axes {
        let d = normalize_axis(a, rank)?;
        if seen[d] {
            return Err(Error::InvalidArgument(format!(
                "permute: axes {axes:?} are not a permutation (axis {d} repeats)"
            )));
        }
        seen[d] = true;
        perm.push(d);
    }
    let st = strides(x.shape());
    let shape = perm.iter().map(|&d| x.shape()[d]).collect();
    let stride = perm.iter().map(|&d| st[d]).collect();
    strided_copy(x, shape, stride, 0)
}

/// Swaps two axes.
pub fn transpose(x: &Tensor, a0: isize, a1: isize) -> Result<Tensor> {
    let rank = x.ndim();
    let (a, b) = (normalize_axis(a0, rank)?, normalize_axis(a1, rank)?);
    let mut perm: Vec<isize> = (0..rank as isize).collect();
    perm.swap(a, b);
    permute(x, &perm)
}

/// numpy's resolution of `start:stop:step` (step >= 1) against a length: (start, count).
pub fn slice_range(n: usize, start: isize, stop: isize, step: isize) -> Result<(usize, usize)> {
    if step < 1 {
        return Err(Error::InvalidArgument(format!("slice: step must be >= 1, got {step}")));
    }
    let n = n as isize;
    let clamp = |v: isize| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let (s, e) = (clamp(start), clamp(stop));
    // Not `(e - s + step - 1) / step`: that overflows for a huge step.
    let count = if e > s { (e - s - 1) / step + 1 } else { 0 };
    Ok((s as usize, count as usize))
}

/// `x[..., start:stop:step, ...]` along `axis`, numpy semantics (negative start/stop count
/// from the end, out-of-range values clamp), step >= 1. Returns a new tensor.
pub fn slice(x: &Tensor, axis: isize, start: isize, stop: isize, step: isize) -> Result<Tensor> {
    let ax = normalize_axis(axis, x.ndim())?;
    let (s, count) = slice_range(x.shape()[ax], start, stop, step)?;
    let st = strides(x.shape());
    let mut shape = x.shape().to_vec();
    shape[ax] = count;
    let mut stride = st.clone();
    stride[ax] = crate::shape::mul(st[ax], step as usize, "slice: the step")?;
    let base = if count == 0 { 0 } else { s * st[ax] };
    strided_copy(x, shape, stride, base)
}

/// Joins tensors along an existing axis. Dtypes must match, every other dimension must match;
/// empty inputs are allowed, an empty list is not.
pub fn concat(xs: &[&Tensor], axis: isize) -> Result<Tensor> {
    let first = xs.first().ok_or_else(|| Error::InvalidArgument("concat: no tensors given".into()))?;
    let device = check_same_device(xs)?;
    let rank = first.ndim();
    let ax = normalize_axis(axis, rank)?;
    let mut shape = first.shape().to_vec();
    shape[ax] = 0;
    for t in xs {
        if t.dtype() != first.dtype() {
            return Err(Error::DTypeMismatch(format!("concat: dtypes {} and {} differ", first.dtype(), t.dtype())));
        }
        let same = t.ndim() == rank && (0..rank).all(|d| d == ax || t.shape()[d] == first.shape()[d]);
        if !same {
            return Err(Error::ShapeMismatch(format!(
                "concat along axis {ax}: shapes {:?} and {:?} differ off that axis",
                first.shape(),
                t.shape()
            )));
        }
        shape[ax] = crate::shape::add(shape[ax], t.shape()[ax], "concat: the joined axis")?;
    }
    check_f16(&device, &[first.dtype()])?;
    let out = Tensor::empty_on(&device, &shape, first.dtype())?;
    let ost = strides(&shape);
    let mut at = 0;
    for t in xs {
        if t.numel() > 0 {
            let plan = Plan::strided(t.shape().to_vec(), ost.clone(), at * ost[ax]).coalesce();
            launch(&device, Mode::Scatter, t, None, &out, plan)?;
        }
        at += t.shape()[ax];
    }
    Ok(out)
}

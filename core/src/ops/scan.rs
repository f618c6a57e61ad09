//! Scans: cumulative_sum and cumulative_prod (the Array API's, numpy's `cumulative_sum`).
//! `shaders/scan.wgsl` scans rows in blocks of 1024; a row longer than one block is scanned in
//! three steps: block totals, the scan of the totals (the same kernel, one level up, recursing
//! until one block covers a row), then every block again with its prefix. A scan along an axis
//! that is not the last is done on the tensor permuted so that the axis is last.
//! The association order depends on the shape only: the same input gives the same bytes on every
//! run and adapter.

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, enables, grid, Launch, Params};
use crate::pipeline::render;
use crate::shape::{normalize_axis, numel};
use crate::tensor::Tensor;
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../shaders/scan.wgsl");

/// Elements per workgroup: 256 threads of 4 consecutive elements (the shader's constant).
const BLOCK: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sum,
    Prod,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Sum => "cumulative_sum",
            Op::Prod => "cumulative_prod",
        }
    }
}

/// Cumulative sum along `axis` (optional for 1-D `x` only), in `dtype` (default: x's; x is cast
/// to it first), with a leading 0 when `include_initial`. Integer sums wrap; floats accumulate in
/// f32.
pub fn cumulative_sum(x: &Tensor, axis: Option<isize>, dtype: Option<DType>, include_initial: bool) -> Result<Tensor> {
    scan(Op::Sum, x, axis, dtype, include_initial)
}

/// Cumulative product along `axis`, as [`cumulative_sum`] (a leading 1 when `include_initial`).
pub fn cumulative_prod(x: &Tensor, axis: Option<isize>, dtype: Option<DType>, include_initial: bool) -> Result<Tensor> {
    scan(Op::Prod, x, axis, dtype, include_initial)
}

fn scan(op: Op, x: &Tensor, axis: Option<isize>, dtype: Option<DType>, include_initial: bool) -> Result<Tensor> {
    let name = op.name();
    if x.ndim() == 0 {
        return Err(Error::InvalidArgument(format!("{name} needs at least one dimension, got a 0-d tensor")));
    }
    let axis = match axis {
        Some(a) => normalize_axis(a, x.ndim())?,
        None if x.ndim() == 1 => 0,
        None => {
            return Err(Error::InvalidArgument(format!(
                "{name}: an axis is required for a tensor of {} dimensions (shape {:?})",
                x.ndim(),
                x.shape()
            )))
        }
    };
    let odt = dtype.unwrap_or(x.dtype());
    if odt == DType::Bool {
        return Err(Error::DTypeMismatch(format!(
            "{name} is not defined on bool: pass dtype=i32 (or cast) to count the true values"
        )));
    }
    check_f16(x.device(), &[x.dtype(), odt])?;
    let cast;
    let x = if x.dtype() == odt {
        x
    } else {
        cast = crate::ops::cast(x, odt)?;
        &cast
    };
    let device = x.device().clone();
    let r = x.shape()[axis];
    let mut oshape = x.shape().to_vec();
    oshape[axis] = r + include_initial as usize;
    check_indexable(numel(&oshape))?;
    if numel(&oshape) == 0 {
        return Tensor::empty_on(&device, &oshape, odt);
    }
    if r == 0 {
        return crate::ops::full_on(&device, &oshape, odt, if op == Op::Sum { 0.0 } else { 1.0 });
    }
    let inner: usize = x.shape()[axis + 1..].iter().product();
    if inner == 1 {
        let rows = x.numel() / r;
        let y = scan_rows(op, x, rows, r, include_initial, odt)?;
        return Ok(y.with_shape(oshape));
    }
    // Move the axis last, scan rows, move it back.
    let nd = x.ndim();
    let perm: Vec<isize> = (0..nd).filter(|&d| d != axis).chain([axis]).map(|d| d as isize).collect();
    let moved = crate::ops::permute(x, &perm)?;
    let rows = moved.numel() / r;
    let y = scan_rows(op, &moved, rows, r, include_initial, odt)?;
    let mut mshape = moved.shape().to_vec();
    mshape[nd - 1] = r + include_initial as usize;
    let y = y.with_shape(mshape);
    let mut inv = vec![0isize; nd];
    for (k, &d) in perm.iter().enumerate() {
        inv[d as usize] = k as isize;
    }
    crate::ops::permute(&y, &inv)
}

/// The accumulator dtype: f32 for floats, the dtype itself for integers.
fn acc_of(dt: DType) -> DType {
    if dt.is_float() {
        DType::F32
    } else {
        dt
    }
}

/// Inclusive scan of `x` seen as [rows, r] (r > 0) into a new [rows, r + init] tensor of `odt`.
fn scan_rows(op: Op, x: &Tensor, rows: usize, r: usize, init: bool, odt: DType) -> Result<Tensor> {
    let device = x.device().clone();
    let acc = acc_of(x.dtype());
    let nblocks = r.div_ceil(BLOCK);
    let out = Tensor::empty_on(&device, &[rows, r + init as usize], odt)?;
    if nblocks == 1 {
        launch(op, x, &out, None, rows, r, nblocks, init)?;
        return Ok(out);
    }
    // The block totals, then their scan with a leading identity: entry b is the exclusive prefix
    // of block b (entry 0 is never read: block 0 starts from the identity itself).
    let totals = Tensor::empty_on(&device, &[rows, nblocks], acc)?;
    launch(op, x, &totals, None, rows, r, nblocks, false)?;
    let prefix = scan_rows(op, &totals, rows, nblocks, true, acc)?;
    launch(op, x, &out, Some(&prefix), rows, r, nblocks, init)?;
    Ok(out)
}

/// One launch of the kernel: block totals into `out` ([rows, nblocks]) when `prefix` is None
/// and the run spans several blocks, else the scanned rows.
#[allow(clippy::too_many_arguments)]
fn launch(
    op: Op,
    x: &Tensor,
    out: &Tensor,
    prefix: Option<&Tensor>,
    rows: usize,
    r: usize,
    nblocks: usize,
    init: bool,
) -> Result<()> {
    let device = x.device().clone();
    let dt = x.dtype();
    let odt = out.dtype();
    let acc = acc_of(dt);
    let totals = prefix.is_none() && nblocks > 1;
    let groups = rows as u64 * nblocks as u64;
    let wg = grid(groups, device.limits().max_compute_workgroups_per_dimension)?;
    let out_len = r + init as usize;
    let params =
        Params::new().u32(groups).u32(r).u32(nblocks).u32(out_len).u32(init as u32).u32(0x8000_0000u32).u32(0).u32(0);
    let (opc, identity, initial) = match op {
        Op::Sum if acc.is_float() => ("+", "return bitcast<f32>(p.neg_zero);".to_string(), "0"),
        Op::Sum => ("+", format!("return {}(0);", acc.wgsl()), "0"),
        Op::Prod => ("*", format!("return {}(1);", acc.wgsl()), "1"),
    };
    let o = odt.wgsl();
    let finish = if totals {
        "    if (lid == 255u) {\n        out[g] = t;\n    }".to_string()
    } else {
        let mut f =
            String::from("    var pre = identity();\n    if (lid > 0u) {\n        pre = sh[lid - 1u];\n    }\n");
        if prefix.is_some() {
            f += "    if (blk > 0u) {\n        pre = combine(prefix[row * (p.nblocks + 1u) + blk], pre);\n    }\n";
        }
        f += "    let ob = row * p.out_len + p.init;\n";
        for (k, v) in ["v0", "v1", "v2", "v3"].iter().enumerate() {
            f += &format!(
                "    if (j0 + {k}u < p.r) {{\n        out[ob + j0 + {k}u] = {o}(combine(pre, {v}));\n    }}\n"
            );
        }
        f += &format!("    if (p.init == 1u && blk == 0u && lid == 0u) {{\n        out[row * p.out_len] = {o}({initial});\n    }}");
        f
    };
    let prefix_decl = if prefix.is_some() {
        format!("@group(0) @binding(2) var<storage, read> prefix: array<{}>;", acc.wgsl())
    } else {
        String::new()
    };
    let mode = if totals {
        "totals"
    } else if prefix.is_some() {
        "prefixed"
    } else {
        "single"
    };
    let a = acc.wgsl();
    let tensors: Vec<&Tensor> = match prefix {
        Some(pf) => vec![x, out, pf],
        None => vec![x, out],
    };
    // The parameter block is bound after the tensors.
    let pbind = if prefix.is_some() { "3" } else { "2" };
    Launch {
        key: format!("scan:{}:{dt}:{odt}:{mode}", op.name()),
        source: Box::new(move || {
            render(
                TEMPLATE,
                &[
                    ("ENABLE", enables(&[dt, odt])),
                    ("T", dt.wgsl()),
                    ("O", o),
                    ("A", a),
                    ("OP", opc),
                    ("IDENTITY", &identity),
                    ("PREFIX_DECL", &prefix_decl),
                    ("PBIND", pbind),
                    ("FINISH", &finish),
                ],
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups: wg,
    }
    .run(&device)
}

//! Reductions: sum, mean, var, max, min, argmax, argmin (numpy semantics). All run
//! `shaders/reduce.wgsl` on x viewed as [outer, r, inner]; reduced axes that are not one
//! contiguous run are first moved to the end by `ops::permute`.
//! Results are deterministic: fixed folding and tree orders, no atomics.

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, enables, groups_1d, Launch, Params};
use crate::pipeline::render;
use crate::shape::{normalize_axes, normalize_axis, numel};
use crate::tensor::Tensor;
use crate::{exec::grid, Error, Result};

const TEMPLATE: &str = include_str!("../../../shaders/reduce.wgsl");
/// The max/min family's order (`Acc`, `is_nan`, `takes`), rendered into both kernels below.
const ORDER: &str = include_str!("../../../shaders/reduce_order.wgsl");
/// Stage 2 of a split argmax/argmin.
const ARG_PICK: &str = include_str!("../../../shaders/reduce_arg_pick.wgsl");

/// Runs shorter than this (with inner == 1) use one thread per row instead of a workgroup.
const ROW_MIN: usize = 32;
/// Column reductions with fewer columns than this and a run at least `LONG_RUN` long are
/// transposed first so that a whole workgroup folds each run.
const FEW_COLUMNS: usize = 4096;
const LONG_RUN: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sum,
    Prod,
    Mean,
    Var,
    Max,
    Min,
    ArgMax,
    ArgMin,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Mean => "mean",
            Op::Var => "var",
            Op::Max => "max",
            Op::Min => "min",
            Op::ArgMax => "argmax",
            Op::ArgMin => "argmin",
        }
    }
    fn extreme(self) -> bool {
        matches!(self, Op::Max | Op::Min | Op::ArgMax | Op::ArgMin)
    }
    fn largest(self) -> bool {
        matches!(self, Op::Max | Op::ArgMax)
    }
}

/// How x is walked: [outer, r, inner], after an optional permutation putting reduced axes last.
struct Plan {
    outer: usize,
    r: usize,
    inner: usize,
    perm: Option<Vec<usize>>,
}

/// `axes` normalised and sorted; every dimension of `shape` is non-zero.
fn plan(shape: &[usize], axes: &[usize]) -> Plan {
    let red = |d: &usize| axes.contains(d);
    // Size-1 dimensions neither add work nor break contiguity.
    let dims: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    let pos: Vec<usize> = dims.iter().enumerate().filter(|(_, d)| red(d)).map(|(k, _)| k).collect();
    let prod = |ds: &[usize]| ds.iter().map(|&d| shape[d]).product::<usize>();
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !red(d)).collect();
    let transposed =
        || Plan { outer: prod(&kept), r: prod(axes), inner: 1, perm: Some(kept.iter().chain(axes).copied().collect()) };
    let Some((&first, &last)) = pos.first().zip(pos.last()) else {
        return Plan { outer: numel(shape), r: 1, inner: 1, perm: None };
    };
    if last - first + 1 != pos.len() {
        return transposed();
    }
    let p =
        Plan { outer: prod(&dims[..first]), r: prod(&dims[first..=last]), inner: prod(&dims[last + 1..]), perm: None };
    if p.inner > 1 && p.outer * p.inner < FEW_COLUMNS && p.r >= LONG_RUN {
        return transposed();
    }
    p
}

fn out_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    (0..shape.len()).filter_map(|d| if axes.contains(&d) { keepdims.then_some(1) } else { Some(shape[d]) }).collect()
}

/// The one reduction driver. `axes` are normalised and sorted; `arg` ops use a single axis or
/// every axis (flattened index).
fn reduce(op: Op, x: &Tensor, axes: &[usize], oshape: Vec<usize>, ddof: usize) -> Result<Tensor> {
    reduce_as(op, x, axes, oshape, ddof, None, None)
}

/// `reduce` with the output dtype and the mean's divisor forced (the second stage of a split
/// reduction folds f32 partials into the caller's dtype and divides by the whole run).
fn reduce_as(
    op: Op,
    x: &Tensor,
    axes: &[usize],
    oshape: Vec<usize>,
    ddof: usize,
    odt_override: Option<DType>,
    denom_override: Option<f32>,
) -> Result<Tensor> {
    let device = x.device().clone();
    let dt = x.dtype();
    if matches!(op, Op::Mean | Op::Var) && !dt.is_float() {
        return Err(Error::DTypeMismatch(format!("{} needs a float tensor (f32 or f16), got {dt}", op.name())));
    }
    if matches!(op, Op::Sum | Op::Prod) && dt == DType::Bool {
        return Err(Error::DTypeMismatch(format!(
            "{} is not defined on bool tensors: cast to i32 or u32 first (or pass a dtype)",
            op.name()
        )));
    }
    if matches!(op, Op::ArgMax | Op::ArgMin)
        && axes.iter().map(|&d| x.shape()[d]).product::<usize>() > i32::MAX as usize
    {
        return Err(Error::InvalidArgument(format!(
            "{}: the run of {:?} is longer than an i32 index reaches",
            op.name(),
            x.shape()
        )));
    }
    check_f16(&device, &[dt])?;
    let odt = match op {
        // i32, the Array API's default index dtype where the default integer is int32 (kiln has
        // no i64); indices past i32::MAX are refused below.
        Op::ArgMax | Op::ArgMin => DType::I32,
        _ => odt_override.unwrap_or(dt),
    };
    check_f16(&device, &[odt])?;
    check_indexable(x.numel())?;
    let n_out = numel(&oshape);
    let r_total: usize = axes.iter().map(|&d| x.shape()[d]).product();
    if n_out > 0 && r_total == 0 {
        return match op {
            Op::Sum => crate::ops::full_on(&device, &oshape, odt, 0.0),
            Op::Prod => crate::ops::full_on(&device, &oshape, odt, 1.0),
            Op::Mean | Op::Var => crate::ops::full_on(&device, &oshape, odt, f64::NAN),
            _ => Err(Error::InvalidArgument(format!(
                "{} of an empty axis: a zero-size reduction has no identity (x shape {:?})",
                op.name(),
                x.shape()
            ))),
        };
    }
    if n_out == 0 {
        return Tensor::empty_on(&device, &oshape, odt);
    }
    let p = plan(x.shape(), axes);
    let permuted;
    let src = match &p.perm {
        Some(perm) => {
            let axes: Vec<isize> = perm.iter().map(|&d| d as isize).collect();
            permuted = crate::ops::permute(x, &axes)?;
            &permuted
        }
        None => x,
    };
    let row = p.inner == 1 && p.r >= ROW_MIN;
    let denom = denom_override.unwrap_or(match op {
        Op::Mean => p.r as f32,
        Op::Var => p.r.saturating_sub(ddof) as f32,
        _ => 1.0,
    });
    if let Some(chunk) = split(op, &p, row) {
        // Stage 1: each piece of each run folds into an f32 (or integer) partial; stage 2 folds
        // the partials of [outer, pieces, inner] over the middle axis, dividing by the whole run.
        let nchunks = p.r.div_ceil(chunk);
        if matches!(op, Op::ArgMax | Op::ArgMin) {
            // Stage 1 writes each piece's winning position along the run; stage 2 reads those
            // positions' values back and keeps the winner by the same order.
            let partial = Tensor::empty_on(&device, &[p.outer, nchunks, p.inner], DType::I32)?;
            launch(op, src, &p, row, chunk, &partial, 1.0)?;
            let out = Tensor::empty_on(&device, &oshape, odt)?;
            arg_pick(op, src, &partial, &p, nchunks, &out)?;
            return Ok(out);
        }
        let part_dt = if dt.is_float() { DType::F32 } else { dt };
        let partial = Tensor::empty_on(&device, &[p.outer, nchunks, p.inner], part_dt)?;
        let stage1 = if op == Op::Mean { Op::Sum } else { op };
        launch(stage1, src, &p, row, chunk, &partial, 1.0)?;
        let folded = reduce_as(op, &partial, &[1], vec![p.outer * p.inner], 0, Some(odt), Some(denom))?;
        return Ok(folded.with_shape(oshape));
    }
    let out = Tensor::empty_on(&device, &oshape, odt)?;
    launch(op, src, &p, row, p.r, &out, denom)?;
    Ok(out)
}

/// Whether to split each run into pieces, and the piece length: for every op but var (two passes
/// over the run), when there are too few outputs to fill the GPU. Partial sums, products, maxima
/// and minima fold with the same op; argmax/argmin's partial positions through `arg_pick`.
/// (H200: greedy decoding's argmax over a 128,256-token vocabulary, 16 rows, took 192 us on one
/// workgroup a row.)
fn split(op: Op, p: &Plan, row: bool) -> Option<usize> {
    if op == Op::Var {
        return None;
    }
    // (outputs, shortest run worth splitting, shortest piece, threads or workgroups to aim for)
    let (outputs, min_run, min_piece, target) =
        if row { (p.outer, 16384, 4096, 2048) } else { (p.outer * p.inner, 64, 16, 1 << 20) };
    if p.r < min_run || outputs >= target / 4 {
        return None;
    }
    let pieces = p.r.div_ceil(min_piece).min((target / outputs).max(1));
    (pieces >= 2).then(|| p.r.div_ceil(pieces).next_multiple_of(4))
}

/// One reduction launch over `src` seen as `p`, folding runs in pieces of `chunk` into `out`.
fn launch(op: Op, src: &Tensor, p: &Plan, row: bool, chunk: usize, out: &Tensor, denom: f32) -> Result<()> {
    let device = src.device().clone();
    let dt = src.dtype();
    let odt = out.dtype();
    let nchunks = p.r.div_ceil(chunk.max(1)).max(1);
    let order = order_vars(op, dt);
    let acc = order[0].1;
    let combine = match op {
        Op::ArgMax | Op::ArgMin => "if (takes(a, b)) {\n        return b;\n    }\n    return a;",
        // Values only: the first NaN wins, else the larger (smaller) value by `ord` (exact on
        // subnormals; of equal values, +0 and -0 included, the first); no position ties.
        // Branch-free (select), so the unrolled fold stays straight-line.
        Op::Max => "return Acc(select(select(a.v, b.v, ord(b.v) > ord(a.v) || is_nan(b.v)), a.v, is_nan(a.v)), 0u);",
        Op::Min => "return Acc(select(select(a.v, b.v, ord(b.v) < ord(a.v) || is_nan(b.v)), a.v, is_nan(a.v)), 0u);",
        Op::Prod => "return Acc(a.v * b.v, 0u);",
        _ => "return Acc(a.v + b.v, 0u);",
    };
    let elem = match op {
        Op::Var => {
            "if (phase == 0u) {\n        return Acc(v, 0u);\n    }\n    let d = v - mean;\n    return Acc(d * d, 0u);"
        }
        _ if op.extreme() => "return Acc(v, j);",
        _ => "return Acc(v, 0u);",
    };
    let init = if op.extreme() {
        "return elem(base + j0 * stride, j0, 0u, 0.0);".to_string()
    } else if op == Op::Prod {
        format!("return Acc({acc}(1), 0u);")
    } else {
        format!("return Acc({acc}(0), 0u);")
    };
    let result = match op {
        Op::Mean | Op::Var => format!("return {}(a.v / p.denom);", odt.wgsl()),
        Op::ArgMax | Op::ArgMin => "return i32(a.i);".to_string(),
        _ => format!("return {}(a.v);", odt.wgsl()),
    };
    let (row_body, col_body) = if op == Op::Var {
        (
            "    let m = row_pass(lid, base, len, 0u, 0.0);\n    let a = row_pass(lid, base, len, 1u, m.v / f32(p.r));",
            "    let m = col_pass(base, stride, len, 0u, 0.0);\n    let a = col_pass(base, stride, len, 1u, m.v / f32(p.r));",
        )
    } else {
        ("    let a = row_pass(lid, base, len, 0u, 0.0);", "    let a = col_pass(base, stride, len, 0u, 0.0);")
    };
    let (rows, groups) = if row {
        let rows = p.outer * nchunks;
        (rows, grid(rows as u64, device.limits().max_compute_workgroups_per_dimension)?)
    } else {
        let rows = p.outer * nchunks * p.inner;
        (rows, groups_1d(&device, rows)?)
    };
    let params = Params::new().u32(rows).u32(p.r).u32(p.inner).f32(denom).u32(chunk).u32(nchunks).u32(0).u32(0);
    // Rows of 4-byte values whose runs and pieces are whole vec4s are read 16 bytes at a time
    // (positions stay exact, so max/min ties still resolve in order; argmax/argmin keep the
    // scalar loop).
    let vec4 = row
        && !matches!(op, Op::ArgMax | Op::ArgMin)
        && dt.storage_size() == 4
        && p.r.is_multiple_of(4)
        && chunk.is_multiple_of(4);
    let row_loop = if vec4 {
        // Four 16-byte loads in flight per step, folded in the same order as the plain loop
        // (straight-line code: a private array indexed in a loop would spill to memory).
        let lanes = ["x", "y", "z", "w"];
        let mut b = String::from("    let b4 = base / 4u;\n    let n4 = len / 4u;\n    var j = lid;\n    for (; j + 768u < n4; j += 1024u) {\n");
        for u in 0..4 {
            b += &format!("        let v{u} = x[b4 + j + {}u];\n", 256 * u);
        }
        for u in 0..4 {
            for (c, lane) in lanes.iter().enumerate() {
                b += &format!(
                    "        acc = combine(acc, elem_v({acc}(v{u}.{lane}), 4u * (j + {}u) + {c}u, phase, mean));\n",
                    256 * u
                );
            }
        }
        b += "    }\n    for (; j < n4; j += 256u) {\n        let v = x[b4 + j];\n";
        for (c, lane) in lanes.iter().enumerate() {
            b += &format!("        acc = combine(acc, elem_v({acc}(v.{lane}), 4u * j + {c}u, phase, mean));\n");
        }
        b + "    }"
    } else {
        "    for (var j = lid; j < len; j += 256u) {\n        acc = combine(acc, elem(base + j, j, phase, mean));\n    }".to_string()
    };
    let (xt, loadx) =
        if vec4 { (format!("vec4<{}>", dt.wgsl()), "x[k / 4u][k % 4u]") } else { (dt.wgsl().to_string(), "x[k]") };
    let (row_entry, col_entry) = if row { ("main", "unused_col") } else { ("unused_row", "main") };
    Launch {
        key: format!("reduce:{}:{dt}:{odt}:{}:{vec4}", op.name(), if row { "row" } else { "col" }),
        source: Box::new(move || {
            let mut vars = vec![("ORDER", ORDER)];
            vars.extend(order);
            vars.extend([
                ("ENABLE", enables(&[dt, odt])),
                ("T", dt.wgsl()),
                ("O", odt.wgsl()),
                ("COMBINE", combine),
                ("ELEM", elem),
                ("INIT", &init),
                ("RESULT", &result),
                ("ROW_ENTRY", row_entry),
                ("ROW_LOOP", &row_loop),
                ("XT", &xt),
                ("LOADX", loadx),
                ("COL_ENTRY", col_entry),
                ("ROW_BODY", row_body),
                ("COL_BODY", col_body),
            ]);
            render(TEMPLATE, &vars)
        }),
        tensors: &[src, out],
        params: Some(params),
        groups,
    }
    .run(&device)
}

/// reduce_order.wgsl's placeholders: the accumulator type (f32 for floats, f16 data included),
/// the NaN test, the comparison that wins (max family `>`, min family `<`), and the key values
/// are compared by (`ord`: for floats an i32 from the bits, for integers the value itself).
fn order_vars(op: Op, dt: DType) -> [(&'static str, &'static str); 5] {
    let cmp = if op.largest() { ">" } else { "<" };
    if dt.is_float() {
        [
            ("A", "f32"),
            ("ISNAN", "return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;"),
            ("CMP", cmp),
            ("KEY", "i32"),
            // Positive floats order as their bits; negative ones with the magnitude bits flipped.
            (
                "ORD",
                "let b = bitcast<i32>(v);\n    if ((b & 0x7fffffff) == 0) {\n        return 0;\n    }\n    \
                 return select(b, b ^ 0x7fffffff, b < 0);",
            ),
        ]
    } else {
        [("A", dt.wgsl()), ("ISNAN", "return false;"), ("CMP", cmp), ("KEY", dt.wgsl()), ("ORD", "return v;")]
    }
}

/// Stage 2 of a split argmax/argmin (shaders/reduce_arg_pick.wgsl): one workgroup per output
/// keeps the winner among its `pieces` partial positions.
fn arg_pick(op: Op, src: &Tensor, partial: &Tensor, p: &Plan, pieces: usize, out: &Tensor) -> Result<()> {
    let device = src.device().clone();
    let dt = src.dtype();
    let order = order_vars(op, dt);
    let outputs = p.outer * p.inner;
    Launch {
        key: format!("reduce_arg_pick:{}:{dt}", op.name()),
        source: Box::new(move || {
            let mut vars = vec![("ORDER", ORDER)];
            vars.extend(order);
            vars.extend([("ENABLE", enables(&[dt])), ("T", dt.wgsl())]);
            render(ARG_PICK, &vars)
        }),
        tensors: &[src, partial, out],
        params: Some(Params::new().u32(outputs).u32(p.r).u32(p.inner).u32(pieces)),
        groups: grid(outputs as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)
}

fn reduce_axes(op: Op, x: &Tensor, axes: Option<&[isize]>, keepdims: bool, ddof: usize) -> Result<Tensor> {
    let ax = normalize_axes(axes, x.ndim())?;
    let oshape = out_shape(x.shape(), &ax, keepdims);
    reduce(op, x, &ax, oshape, ddof)
}

fn arg_reduce(op: Op, x: &Tensor, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
    match axis {
        None => {
            // The flattened index: reduce the tensor seen as one row.
            let flat = x.with_shape(vec![x.numel()]);
            let y = reduce(op, &flat, &[0], vec![], 0)?;
            Ok(y.with_shape(if keepdims { vec![1; x.ndim()] } else { vec![] }))
        }
        Some(a) => {
            let a = normalize_axis(a, x.ndim())?;
            reduce(op, x, &[a], out_shape(x.shape(), &[a], keepdims), 0)
        }
    }
}

/// Sum over `axes` (None = all). Integer sums wrap; the sum over an empty axis is 0.
pub fn sum(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    reduce_axes(Op::Sum, x, axes, keepdims, 0)
}

/// Product over `axes` (None = all) in `dtype` (None: x's own; x is converted first). Integer
/// products wrap; the product over an empty axis is 1. Floats multiply in f32 in a fixed order.
pub fn prod(x: &Tensor, axes: Option<&[isize]>, keepdims: bool, dtype: Option<DType>) -> Result<Tensor> {
    match dtype {
        Some(d) if d != x.dtype() => {
            if d == DType::Bool {
                return Err(Error::DTypeMismatch("prod: the dtype cannot be bool".into()));
            }
            reduce_axes(Op::Prod, &crate::ops::cast(x, d)?, axes, keepdims, 0)
        }
        _ => reduce_axes(Op::Prod, x, axes, keepdims, 0),
    }
}

/// Standard deviation over `axes`, `sqrt(var)` with `ddof` delta degrees of freedom (float
/// dtypes; NaN over an empty axis).
pub fn std(x: &Tensor, axes: Option<&[isize]>, keepdims: bool, ddof: usize) -> Result<Tensor> {
    crate::ops::sqrt(&var(x, axes, keepdims, ddof)?)
}

/// Arithmetic mean over `axes` (float dtypes; NaN over an empty axis).
pub fn mean(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    reduce_axes(Op::Mean, x, axes, keepdims, 0)
}

/// Variance over `axes`, sum((x - mean)^2) / (n - ddof), two-pass (float dtypes).
pub fn var(x: &Tensor, axes: Option<&[isize]>, keepdims: bool, ddof: usize) -> Result<Tensor> {
    reduce_axes(Op::Var, x, axes, keepdims, ddof)
}

/// Maximum over `axes` (NaN propagates); an empty axis is an InvalidArgument error.
pub fn max(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    reduce_axes(Op::Max, x, axes, keepdims, 0)
}

/// Minimum over `axes` (NaN propagates); an empty axis is an InvalidArgument error.
pub fn min(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    reduce_axes(Op::Min, x, axes, keepdims, 0)
}

/// i32 index of the first maximum along `axis` (None = index into the flattened tensor).
pub fn argmax(x: &Tensor, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
    arg_reduce(Op::ArgMax, x, axis, keepdims)
}

/// i32 index of the first minimum along `axis` (None = index into the flattened tensor).
pub fn argmin(x: &Tensor, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
    arg_reduce(Op::ArgMin, x, axis, keepdims)
}

/// `reduce_axes` of `x` seen as bool (non-zero = true, NaN included): `all` is the minimum of
/// the 0/1 words, `any` the maximum; an empty run gives the identity (true for `all`, false for
/// `any`), as numpy.
fn logical_reduce(all: bool, x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    let ax = normalize_axes(axes, x.ndim())?;
    let oshape = out_shape(x.shape(), &ax, keepdims);
    let r_total: usize = ax.iter().map(|&d| x.shape()[d]).product();
    if r_total == 0 || numel(&oshape) == 0 {
        return crate::ops::full_on(x.device(), &oshape, DType::Bool, if all { 1.0 } else { 0.0 });
    }
    let cast;
    let b = if x.dtype() == DType::Bool {
        x
    } else {
        cast = crate::ops::cast(x, DType::Bool)?;
        &cast
    };
    reduce(if all { Op::Min } else { Op::Max }, b, &ax, oshape, 0)
}

/// Whether every element over `axes` is true (non-zero; None = all axes), as bool; true over an
/// empty axis.
pub fn all(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    logical_reduce(true, x, axes, keepdims)
}

/// Whether any element over `axes` is true (non-zero; None = all axes), as bool; false over an
/// empty axis.
pub fn any(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
    logical_reduce(false, x, axes, keepdims)
}

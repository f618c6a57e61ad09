//! Normalization: softmax, log_softmax (along any axis, max-subtracted), layer_norm and rms_norm
//! (over the last axis), batch_norm (inference form, x [N, C, ...]). Float dtypes only; f16 data
//! is computed in f32. Kernels: `shaders/norm.wgsl`, `shaders/norm_batch.wgsl`.

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, check_same_device, enables, groups_1d, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::pipeline::render;
use crate::shape::{normalize_axis, numel};
use crate::tensor::Tensor;
use crate::{exec::grid, Error, Result};

const TEMPLATE: &str = include_str!("../../../shaders/norm.wgsl");
const BATCH: &str = include_str!("../../../shaders/norm_batch.wgsl");

/// Runs shorter than this (with inner == 1) use one thread per row instead of a workgroup.
const ROW_MIN: usize = 32;

/// softmax and log_softmax keep f32 rows of whole vec4s up to this many vec4s per thread (256
/// threads: rows of up to 8192 floats) in registers: one read of x from memory and one e^x per
/// element, where the streamed kernel reads each row three times and computes e^x twice.
const MAX_ROW_REGS: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Softmax,
    LogSoftmax,
    LayerNorm,
    RmsNorm,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Softmax => "softmax",
            Kind::LogSoftmax => "log_softmax",
            Kind::LayerNorm => "layer_norm",
            Kind::RmsNorm => "rms_norm",
        }
    }
    /// Statistics s1, s2 with `SUM(kind, a)` / `MAX()` standing for the row or column folds.
    fn stats(self) -> &'static str {
        match self {
            // softmax's s2 is 1 / sum: one correctly rounded division per row, then a multiply
            // per element (a division per element halved its bandwidth on the H100).
            Kind::Softmax => "    let s1 = MAX();\n    let s2 = k_div(1.0, SUM(2u, s1));",
            Kind::LogSoftmax => "    let s1 = MAX();\n    let s2 = SUM(2u, s1);",
            Kind::LayerNorm => {
                "    let s1 = k_div(SUM(0u, 0.0), f32(p.r));\n    let s2 = k_div(1.0, k_sqrt(k_div(SUM(1u, s1), f32(p.r)) + p.eps));"
            }
            Kind::RmsNorm => "    let s1 = 0.0;\n    let s2 = k_div(1.0, k_sqrt(k_div(SUM(3u, 0.0), f32(p.r)) + p.eps));",
        }
    }
    fn final_expr(self) -> &'static str {
        match self {
            Kind::Softmax => "return k_mul(k_exp(v - s1), s2);",
            Kind::LogSoftmax => "return v - s1 - k_log(s2);",
            // k_keep: no fma of the product and the bias (GPUs that fuse would round once).
            Kind::LayerNorm => "return k_keep((v - s1) * s2 * wt(j)) + bs(j);",
            Kind::RmsNorm => "return v * s2 * wt(j);",
        }
    }
}

fn need_float(name: &str, x: &Tensor) -> Result<()> {
    if !x.dtype().is_float() {
        return Err(Error::DTypeMismatch(format!("{name} needs a float tensor (f32 or f16), got {}", x.dtype())));
    }
    Ok(())
}

/// Checks an optional per-channel parameter: same device, same dtype as x, shape [n].
fn check_param(name: &str, what: &str, x: &Tensor, p: Option<&Tensor>, n: usize) -> Result<()> {
    if let Some(p) = p {
        check_same_device(&[x, p])?;
        if p.dtype() != x.dtype() {
            return Err(Error::DTypeMismatch(format!("{name}: {what} is {} but x is {}", p.dtype(), x.dtype())));
        }
        if p.shape() != [n] {
            return Err(Error::ShapeMismatch(format!("{name}: {what} has shape {:?}, expected [{n}]", p.shape())));
        }
    }
    Ok(())
}

/// Bindings after x (slot 0): the optional weight and bias, then out and the params block;
/// returns the WGSL and the `wt` / `bs` bodies.
fn param_bindings(first: usize, dt: DType, w: bool, b: bool, out_t: &str) -> (String, String, String) {
    let mut slot = first;
    let mut s = String::new();
    let mut wt = "return 1.0;".to_string();
    let mut bs = "return 0.0;".to_string();
    if w {
        s += &format!("@group(0) @binding({slot}) var<storage, read> w: array<{}>;\n", dt.wgsl());
        wt = "return f32(w[j]);".into();
        slot += 1;
    }
    if b {
        s += &format!("@group(0) @binding({slot}) var<storage, read> bb: array<{}>;\n", dt.wgsl());
        bs = "return f32(bb[j]);".into();
        slot += 1;
    }
    s += &format!("@group(0) @binding({slot}) var<storage, read_write> out: array<{out_t}>;\n");
    s += &format!("@group(0) @binding({}) var<uniform> p: Params;", slot + 1);
    (s, wt, bs)
}

/// Runs `kind` over x seen as [outer, r, inner].
#[allow(clippy::too_many_arguments)]
fn run(
    kind: Kind,
    x: &Tensor,
    outer: usize,
    r: usize,
    inner: usize,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    eps: f32,
    in_registers: bool,
) -> Result<Tensor> {
    let device = x.device().clone();
    let dt = x.dtype();
    check_f16(&device, &[dt])?;
    let out = Tensor::empty_on(&device, x.shape(), dt)?;
    let n = x.numel();
    if n == 0 {
        return Ok(out);
    }
    check_indexable(n)?;
    // The column kernel walks its run up to four times in one invocation: past llvmpipe's loop
    // limiter (core/src/loop_budget.rs) it would stop early without an error, so on a CPU
    // adapter a long run is moved last, run through the row kernel (its workgroup strides the
    // run; a different summation order: not the column kernel's bits) and moved back.
    if inner > 1 && w.is_none() && b.is_none() && crate::loop_budget::limited(&device) && r.saturating_mul(4) > 60_000 {
        let xt = crate::ops::permute(&x.with_shape(vec![outer, r, inner]), &[0, 2, 1])?;
        let y = run(kind, &xt, outer * inner, r, 1, None, None, eps, in_registers)?;
        return Ok(crate::ops::permute(&y, &[0, 2, 1])?.with_shape(x.shape().to_vec()));
    }
    let row = inner == 1 && r >= ROW_MIN;
    let (rows, groups) = if row {
        (outer, grid(outer as u64, device.limits().max_compute_workgroups_per_dimension)?)
    } else {
        (outer * inner, groups_1d(&device, outer * inner)?)
    };
    // f32 rows of whole vec4s move 16 bytes per load and store.
    let vec4 = row && dt == DType::F32 && r.is_multiple_of(4);
    let elem_t = if vec4 { "vec4<f32>".to_string() } else { dt.wgsl().to_string() };
    let (bindings, wt, bs) = param_bindings(1, dt, w.is_some(), b.is_some(), &elem_t);
    let regs = if vec4 && in_registers && matches!(kind, Kind::Softmax | Kind::LogSoftmax) {
        Some(r / 4).filter(|&n4| n4 <= 256 * MAX_ROW_REGS).map(|n4| n4.div_ceil(256))
    } else {
        None
    };
    let (ldx, row_sum_loop, row_max_loop, row_final, col_store) = if vec4 {
        (
            "x[k / 4u][k % 4u]",
            "    for (var j = lid; j < p.r / 4u; j += 256u) {\n        let v = x[base / 4u + j];\n        acc = k_keep(acc + sum4(vec4<f32>(term(kind, v.x, a), term(kind, v.y, a), term(kind, v.z, a), term(kind, v.w, a))));\n    }",
            "    for (var j = lid; j < p.r / 4u; j += 256u) {\n        let v = x[base / 4u + j];\n        acc = max(acc, max(max(v.x, v.y), max(v.z, v.w)));\n    }",
            "    for (var j = lid; j < p.r / 4u; j += 256u) {\n        let v = x[base / 4u + j];\n        let c = 4u * j;\n        out[base / 4u + j] = vec4<f32>(final_value(v.x, s1, s2, c), final_value(v.y, s1, s2, c + 1u), final_value(v.z, s1, s2, c + 2u), final_value(v.w, s1, s2, c + 3u));\n    }",
            "out[k / 4u][k % 4u] = final_value(ld(k), s1, s2, j);".to_string(),
        )
    } else {
        (
            "x[k]",
            "    for (var j = lid; j < p.r; j += 256u) {\n        acc = k_keep(acc + term(kind, ld(base + j), a));\n    }",
            "    for (var j = lid; j < p.r; j += 256u) {\n        acc = max(acc, ld(base + j));\n    }",
            "    for (var j = lid; j < p.r; j += 256u) {\n        out[base + j] = {{O}}(final_value(ld(base + j), s1, s2, j));\n    }",
            format!("out[k] = {}(final_value(ld(k), s1, s2, j));", dt.wgsl()),
        )
    };
    let stats = kind.stats();
    let (row_stats, row_final) = match regs {
        Some(nv) => softmax_in_registers(kind, nv),
        None => (
            stats.replace("SUM(", "row_sum(lid, base, ").replace("MAX()", "row_max(lid, base)"),
            row_final.replace("{{O}}", dt.wgsl()),
        ),
    };
    let col_stats = stats.replace("SUM(", "col_sum(base, stride, ").replace("MAX()", "col_max(base, stride)");
    let (row_entry, col_entry) = if row { ("main", "unused_col") } else { ("unused_row", "main") };
    let mut tensors: Vec<&Tensor> = vec![x];
    tensors.extend(w);
    tensors.extend(b);
    tensors.push(&out);
    let params = Params::new().u32(rows).u32(r).u32(inner).f32(eps);
    Launch {
        key: format!(
            "norm:{}:{dt}:{}:{}:{}:{vec4}:{}",
            kind.name(),
            if row { "row" } else { "col" },
            w.is_some(),
            b.is_some(),
            regs.unwrap_or(0)
        ),
        source: Box::new(move || {
            with_special(render(
                TEMPLATE,
                &[
                    ("ENABLE", enables(&[dt])),
                    ("XT", &elem_t),
                    ("LDX", ldx),
                    ("ROW_SUM_LOOP", row_sum_loop),
                    ("ROW_MAX_LOOP", row_max_loop),
                    ("ROW_FINAL", &row_final),
                    ("COL_STORE", &col_store),
                    ("O", dt.wgsl()),
                    ("BINDINGS", &bindings),
                    ("WT", &wt),
                    ("BS", &bs),
                    ("FINAL", kind.final_expr()),
                    ("ROW_ENTRY", row_entry),
                    ("COL_ENTRY", col_entry),
                    ("ROW_STATS", &row_stats),
                    ("COL_STATS", &col_stats),
                ],
            ))
        }),
        tensors: &tensors,
        params: Some(params),
        groups,
    }
    .run(&device)?;
    Ok(out)
}

/// The row kernel's statistics and stores for softmax / log_softmax with the row's vec4s in
/// registers: thread `lid` holds vec4s lid, lid + 256, ... (`nv` of them), as the streamed loops
/// visit them, so every sum is added in the same order and the results are the same bytes.
fn softmax_in_registers(kind: Kind, nv: usize) -> (String, String) {
    let mut st = String::from("    let b4 = base / 4u;\n    let n4 = p.r / 4u;\n");
    // v0 is always a vec4 of the row (clamped), so the max may start from it unguarded.
    st += "    var v0 = x[b4 + min(lid, n4 - 1u)];\n";
    for i in 1..nv {
        st += &format!(
            "    var v{i} = vec4<f32>(0.0);\n    if (lid + {o}u < n4) {{\n        v{i} = x[b4 + lid + {o}u];\n    }}\n",
            o = 256 * i
        );
    }
    st += "    var m = max(max(v0.x, v0.y), max(v0.z, v0.w));\n";
    for i in 1..nv {
        st += &format!(
            "    if (lid + {o}u < n4) {{\n        m = max(m, max(max(v{i}.x, v{i}.y), max(v{i}.z, v{i}.w)));\n    }}\n",
            o = 256 * i
        );
    }
    st += "    let s1 = tree_max(lid, m);\n    var acc = 0.0;\n";
    for i in 0..nv {
        // softmax overwrites v with e^(v - max), which its stores scale; log_softmax keeps v.
        let keep = if kind == Kind::Softmax { format!("v{i} = e;") } else { String::new() };
        st += &format!(
            "    if (lid + {o}u < n4) {{\n        let e = exp4(v{i} - vec4<f32>(s1));\n        acc = k_keep(acc + sum4(e));\n        {keep}\n    }}\n",
            o = 256 * i
        );
    }
    let (stats, value) = if kind == Kind::Softmax {
        ("    let s2 = k_div(1.0, tree_sum(lid, acc));\n", "k_mul(vI.C, s2)")
    } else {
        ("    let s2 = tree_sum(lid, acc);\n    let ls = k_log(s2);\n", "vI.C - s1 - ls")
    };
    st += stats;
    let mut fin = String::new();
    for i in 0..nv {
        let lanes: Vec<String> =
            ["x", "y", "z", "w"].iter().map(|c| value.replace('I', &i.to_string()).replace('C', c)).collect();
        fin += &format!(
            "    if (lid + {o}u < n4) {{\n        out[b4 + lid + {o}u] = vec4<f32>({});\n    }}\n",
            lanes.join(", "),
            o = 256 * i
        );
    }
    (st, fin)
}

fn along_axis(kind: Kind, x: &Tensor, axis: isize, in_registers: bool) -> Result<Tensor> {
    need_float(kind.name(), x)?;
    // A rank-0 tensor is treated as shape [1] (axis 0 or -1), as PyTorch does.
    let shape = if x.ndim() == 0 { vec![1] } else { x.shape().to_vec() };
    let a = normalize_axis(axis, shape.len())?;
    run(kind, x, numel(&shape[..a]), shape[a], numel(&shape[a + 1..]), None, None, 0.0, in_registers)
}

/// exp(x - max) / sum(exp(x - max)) along `axis`.
pub fn softmax(x: &Tensor, axis: isize) -> Result<Tensor> {
    along_axis(Kind::Softmax, x, axis, true)
}

/// x - max - log(sum(exp(x - max))) along `axis`.
pub fn log_softmax(x: &Tensor, axis: isize) -> Result<Tensor> {
    along_axis(Kind::LogSoftmax, x, axis, true)
}

/// softmax (or log_softmax with `log`) with rows kept in registers where they fit, or always
/// streamed three times from memory: the same bytes either way (tests and `kiln bench`).
#[doc(hidden)]
pub fn softmax_on_path(x: &Tensor, axis: isize, log: bool, in_registers: bool) -> Result<Tensor> {
    along_axis(if log { Kind::LogSoftmax } else { Kind::Softmax }, x, axis, in_registers)
}

fn last_axis(name: &str, x: &Tensor) -> Result<usize> {
    need_float(name, x)?;
    x.shape().last().copied().ok_or_else(|| Error::InvalidArgument(format!("{name} needs a tensor of rank >= 1")))
}

/// (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance);
/// `weight` and `bias` have shape [last] or are None.
pub fn layer_norm(x: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f32) -> Result<Tensor> {
    let n = last_axis("layer_norm", x)?;
    check_param("layer_norm", "weight", x, weight, n)?;
    check_param("layer_norm", "bias", x, bias, n)?;
    let outer = x.numel().checked_div(n).unwrap_or(0);
    run(Kind::LayerNorm, x, outer, n, 1, weight, bias, eps, false)
}

/// x / sqrt(mean(x^2) + eps) * weight over the last axis; `weight` has shape [last] or is None.
pub fn rms_norm(x: &Tensor, weight: Option<&Tensor>, eps: f32) -> Result<Tensor> {
    let n = last_axis("rms_norm", x)?;
    check_param("rms_norm", "weight", x, weight, n)?;
    let outer = x.numel().checked_div(n).unwrap_or(0);
    run(Kind::RmsNorm, x, outer, n, 1, weight, None, eps, false)
}

/// Inference batch norm: (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c] for x of
/// shape [N, C, ...]; `mean`, `var`, `weight` and `bias` have shape [C].
pub fn batch_norm(
    x: &Tensor,
    mean: &Tensor,
    var: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f32,
) -> Result<Tensor> {
    need_float("batch_norm", x)?;
    if x.ndim() < 2 {
        return Err(Error::ShapeMismatch(format!("batch_norm needs x of shape [N, C, ...], got {:?}", x.shape())));
    }
    let c = x.shape()[1];
    check_param("batch_norm", "mean", x, Some(mean), c)?;
    check_param("batch_norm", "var", x, Some(var), c)?;
    check_param("batch_norm", "weight", x, weight, c)?;
    check_param("batch_norm", "bias", x, bias, c)?;
    let device = x.device().clone();
    let dt = x.dtype();
    check_f16(&device, &[dt])?;
    let out = Tensor::empty_on(&device, x.shape(), dt)?;
    let n = x.numel();
    if n == 0 {
        return Ok(out);
    }
    check_indexable(n)?;
    let spatial = numel(&x.shape()[2..]);
    let (bindings, wt, bs) = param_bindings(3, dt, weight.is_some(), bias.is_some(), dt.wgsl());
    let (wt, bs) = (wt.replace("[j]", "[c]"), bs.replace("[j]", "[c]"));
    let mut tensors: Vec<&Tensor> = vec![x, mean, var];
    tensors.extend(weight);
    tensors.extend(bias);
    tensors.push(&out);
    let params = Params::new().u32(n).u32(c).u32(spatial).f32(eps);
    Launch {
        key: format!("norm:batch_norm:{dt}:{}:{}", weight.is_some(), bias.is_some()),
        source: Box::new(move || {
            with_special(render(
                BATCH,
                &[
                    ("ENABLE", enables(&[dt])),
                    ("T", dt.wgsl()),
                    ("O", dt.wgsl()),
                    ("BINDINGS", &bindings),
                    ("WT", &wt),
                    ("BS", &bs),
                ],
            ))
        }),
        tensors: &tensors,
        params: Some(params),
        groups: groups_1d(&device, n)?,
    }
    .run(&device)?;
    Ok(out)
}

//! The elementwise kernel (`shaders/elementwise.wgsl`): `out = expr(x0, x1, x2)` over the
//! broadcast of its inputs, and the builtin-free math library (`with_special`) that every
//! kernel calling a `k_` function renders in.

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, enables, groups_1d, Launch, Params};
use crate::pipeline::render;
use crate::shape::{broadcast_strides, numel};
use crate::tensor::Tensor;
use crate::Result;
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../../../../shaders/elementwise.wgsl");
/// The `k_` functions (special values, pow, sin/cos reduction, floor division): rendered into a
/// kernel only when its expression calls one.
const SPECIAL: &str = include_str!("../../../../shaders/elementwise_special.wgsl");

/// `src` followed by the items of shaders/elementwise_special.wgsl that it calls: the one WGSL
/// library of builtin-free math (k_exp, k_div, k_sqrt, k_sin_cos, …) that gives the same bits on
/// every device, shared by every kernel that needs one of them (norm, attention, rope, random).
pub(crate) fn with_special(src: String) -> String {
    let special = special_functions(&src);
    src + "\n" + &special
}

/// The items of shaders/elementwise_special.wgsl that `expr` needs: those it calls and, in turn,
/// those they call. The file is a list of blank-line separated blocks, each one top-level `fn`
/// or `var<private>` with its comment lines (a block with neither is a comment).
fn special_functions(expr: &str) -> String {
    let items: Vec<(&str, &str)> = SPECIAL
        .split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| {
                l.strip_prefix("fn ")
                    .and_then(|r| r.split('(').next())
                    .or_else(|| l.strip_prefix("var<private> ").and_then(|r| r.split(':').next()))
            })?;
            Some((name.trim(), block))
        })
        .collect();
    let uses = |text: &str, name: &str| text.contains(&format!("{name}(")) || text.contains(&format!("{name}["));
    let mut needed: Vec<bool> = items.iter().map(|(n, _)| uses(expr, n)).collect();
    loop {
        let mut changed = false;
        for i in 0..items.len() {
            for j in 0..items.len() {
                if needed[i] && !needed[j] && uses(items[i].1, items[j].0) {
                    needed[j] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = String::new();
    for ((_, block), _) in items.iter().zip(&needed).filter(|(_, &k)| k) {
        out += block.trim_matches('\n');
        out += "\n\n";
    }
    out
}

/// The type an input of `dtype` is computed in: f32 for floats, u32 (0 or 1) for bool, itself
/// otherwise.
pub(super) fn compute_type(dtype: DType) -> &'static str {
    if dtype.is_float() {
        "f32"
    } else {
        dtype.wgsl()
    }
}

/// The WGSL that reads one stored element `e` of `dtype` as its compute type: a bool word is
/// clamped to 0/1, so a word other than 0 or 1 (never written by an op) still reads as true.
fn load(dtype: DType, e: &str) -> String {
    if dtype == DType::Bool {
        format!("min({e}, 1u)")
    } else {
        format!("{}({e})", compute_type(dtype))
    }
}

/// Runs the elementwise kernel: `out = expr(x0, x1, x2)` over the broadcast of `inputs`.
/// `scalars` are raw bits handed to the kernel as `p.bits`, `p.bits2`.
pub(crate) fn elementwise(
    name: &str,
    inputs: &[&Tensor],
    out_shape: &[usize],
    out_dtype: DType,
    expr: &str,
    scalars: [u32; 2],
    device: &Arc<crate::Device>,
) -> Result<Tensor> {
    let mut dtypes: Vec<DType> = inputs.iter().map(|t| t.dtype()).collect();
    dtypes.push(out_dtype);
    check_f16(device, &dtypes)?;
    let out = Tensor::empty_on(device, out_shape, out_dtype)?;
    let n = numel(out_shape);
    if n == 0 {
        return Ok(out);
    }
    check_indexable(n)?;
    let contiguous = inputs.iter().all(|t| t.shape() == out_shape);
    // Whole vec4s per thread where nothing broadcasts: one wide load per input and one wide
    // store instead of four narrow ones (memory-bound kernels reach far more bandwidth).
    let vec4 = contiguous && n.is_multiple_of(4);
    let mut strides = [vec![], vec![], vec![]];
    for (k, t) in inputs.iter().enumerate() {
        strides[k] = broadcast_strides(t.shape(), out_shape);
    }
    let key = format!(
        "elementwise:{name}:{}:{}:{contiguous}:{vec4}:{expr}",
        inputs.iter().map(|t| t.dtype().name()).collect::<Vec<_>>().join(","),
        out_dtype
    );
    let params = Params::new()
        .u32(n)
        .u32(out_shape.len())
        .u32(scalars[0])
        .u32(scalars[1])
        .dims8(out_shape, 1)
        .dims8(&strides[0], 0)
        .dims8(&strides[1], 0)
        .dims8(&strides[2], 0);
    let params_binding = inputs.len() + 1;
    let mut tensors: Vec<&Tensor> = inputs.to_vec();
    tensors.push(&out);
    let enable = enables(&dtypes);
    let threads = if vec4 { n / 4 } else { n };
    // The WGSL is generated only on a pipeline-cache miss: on the hot path an op costs a key.
    Launch {
        key,
        source: Box::new(move || {
            let wrap = |t: &str| if vec4 { format!("vec4<{t}>") } else { t.to_string() };
            let mut bindings = String::new();
            for (k, t) in inputs.iter().enumerate() {
                bindings += &format!("@group(0) @binding({k}) var<storage, read> in{k}: array<{}>;\n", wrap(t.dtype().wgsl()));
            }
            bindings += &format!("@group(0) @binding({}) var<storage, read_write> out: array<{}>;", inputs.len(), wrap(out_dtype.wgsl()));
            let to = out_dtype.wgsl();
            let body = if vec4 {
                let mut b = String::from("    let q = gid.x + gid.y * nwg.x * 256u;\n    if (q >= p.n / 4u) {\n        return;\n    }\n");
                for k in 0..inputs.len() {
                    b += &format!("    let v{k} = in{k}[q];\n");
                }
                // Straight-line lanes (no loop, no dynamic component index) so every lane
                // stays in registers.
                b += &format!("    var r: vec4<{to}>;\n");
                for (c, lane) in ["x", "y", "z", "w"].iter().enumerate() {
                    b += &format!("    {{\n        let i = q * 4u + {c}u;\n");
                    for (k, t) in inputs.iter().enumerate() {
                        b += &format!("        let x{k} = {};\n", load(t.dtype(), &format!("v{k}.{lane}")));
                    }
                    b += &format!("        r.{lane} = {to}({expr});\n    }}\n");
                }
                b + "    out[q] = r;"
            } else {
                let index = if contiguous { "vec3<u32>(i)" } else { "offsets(i)" };
                let mut b = format!("    let i = gid.x + gid.y * nwg.x * 256u;\n    if (i >= p.n) {{\n        return;\n    }}\n    let o = {index};\n");
                for (k, t) in inputs.iter().enumerate() {
                    b += &format!("    let x{k} = {};\n", load(t.dtype(), &format!("in{k}[o.{}]", ["x", "y", "z"][k])));
                }
                b += &format!("    out[i] = {to}({expr});");
                b
            };
            render(
                TEMPLATE,
                &[
                    ("ENABLE", enable),
                    ("BINDINGS", &bindings),
                    ("PARAMS", &params_binding.to_string()),
                    ("SPECIAL", &special_functions(expr)),
                    ("BODY", &body),
                ],
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups: groups_1d(device, threads)?,
    }
    .run(device)?;
    Ok(out)
}

//! Depthwise conv2d (one input channel per group) with the input window of each output tile in
//! workgroup memory (`shaders/conv_depthwise.wgsl`), for floats.

use super::Geometry;
use crate::exec::{enables, grid, Launch, Params};
use crate::pipeline::{render, Checks};
use crate::tensor::Tensor;
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../../shaders/conv_depthwise.wgsl");
/// Output tile width (one column per thread of a row of 32).
const TW: usize = 32;
/// Window elements in workgroup memory (16 KiB of f32).
const WIN_LEN: usize = 4096;

/// Kernels up to this many taps (the tap loops are unrolled).
const MAX_TAPS: usize = 64;

/// [columns, rows] of the input window of a `th`-row output tile (saturating: only compared).
fn window(g: &Geometry, th: usize) -> [usize; 2] {
    let span = |n: usize, s: usize, k: usize, d: usize| {
        (n - 1).saturating_mul(s).saturating_add((k - 1).saturating_mul(d)).saturating_add(1)
    };
    [span(TW, g.stride[1], g.kw, g.dilation[1]), span(th, g.stride[0], g.kh, g.dilation[0])]
}

/// The tile height (32, 16 or 8 rows) whose input window fits in `WIN_LEN`, or None where even
/// 8 rows do not or the kernel has more than `MAX_TAPS` taps (the direct kernel runs those).
pub(super) fn tile_rows(g: &Geometry) -> Option<usize> {
    if g.kh * g.kw > MAX_TAPS {
        return None;
    }
    [32, 16, 8].into_iter().find(|&th| {
        let [ww, wh] = window(g, th);
        ww.checked_mul(wh).is_some_and(|n| n <= WIN_LEN)
    })
}

pub(super) fn run(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, out: &Tensor, g: &Geometry) -> Result<()> {
    let device = x.device().clone();
    let Some(th) = tile_rows(g) else {
        return Err(Error::InvalidArgument("conv2d depthwise: the input window does not fit".into()));
    };
    let tiles_x = g.ow.div_ceil(TW);
    let tiles_y = g.oh.div_ceil(th);
    let groups = (g.n * g.o) as u64 * tiles_x as u64 * tiles_y as u64;
    if groups > u32::MAX as u64 {
        return Err(Error::InvalidArgument(format!(
            "conv2d: {groups} workgroups are more than one dispatch can number"
        )));
    }
    let params = Params::new()
        .u32(groups)
        .u32(tiles_x)
        .u32(tiles_y)
        .u32(g.c)
        .u32(g.h)
        .u32(g.w)
        .u32(g.o)
        .u32(g.oh)
        .u32(g.ow)
        .u32(g.kh)
        .u32(g.kw)
        .u32(g.stride[0])
        .u32(g.stride[1])
        .u32(g.padding[0])
        .u32(g.padding[1])
        .u32(g.dilation[0])
        .u32(g.dilation[1])
        .u32(g.o / g.groups);
    let dtype = x.dtype();
    let has_bias = bias.is_some();
    let (geo_k, geo_s, geo_d) = ([g.kh, g.kw], g.stride, g.dilation);
    let win = window(g, th);
    let mut tensors: Vec<&Tensor> = vec![x, w];
    tensors.extend(bias);
    tensors.push(out);
    let out_slot = tensors.len() - 1;
    Launch {
        key: format!(
            "conv_depthwise:{dtype}:{th}:{has_bias}:{}x{}:{:?}:{:?}",
            geo_k[0], geo_k[1], geo_s, geo_d
        ),
        source: Box::new(move || {
            let t = dtype.wgsl();
            let [kh, kw] = geo_k;
            let (ww, wh) = (win[0], win[1]);
            let rows = th / 8;
            let mut taps = String::from("    let base = cy * SH * WW + cx * SW;\n");
            for r in 0..rows {
                taps += &format!("    var acc{r} = 0.0;\n");
            }
            for ky in 0..kh {
                for kx in 0..kw {
                    taps += &format!("    {{\n        let wv = f32(wt[wbase + {}u]);\n", ky * kw + kx);
                    for r in 0..rows {
                        let off = (8 * r * geo_s[0] + ky * geo_d[0]) * ww + kx * geo_d[1];
                        taps += &format!("        acc{r} = fma(win[base + {off}u], wv, acc{r});\n");
                    }
                    taps += "    }\n";
                }
            }
            let mut store = String::from("    if (ox < p.ow) {\n");
            for r in 0..rows {
                let bias = if has_bias { " + f32(bias[oc])" } else { "" };
                store += &format!(
                    "        {{\n            let oy = ty * TH + cy + {}u;\n            if (oy < p.oh) {{\n                out[(plane * p.oh + oy) * p.ow + ox] = {t}(acc{r}{bias});\n            }}\n        }}\n",
                    8 * r
                );
            }
            store += "    }\n";
            let decl = if has_bias {
                format!("@group(0) @binding(2) var<storage, read> bias: array<{t}>;")
            } else {
                String::new()
            };
            render(
                TEMPLATE,
                &[
                    ("ENABLE", enables(&[dtype])),
                    ("T", t),
                    ("BIAS_DECL", &decl),
                    ("TAPS", &taps),
                    ("STORE", &store),
                    ("KH", &kh.to_string()),
                    ("KW", &kw.to_string()),
                    ("SH", &geo_s[0].to_string()),
                    ("SW", &geo_s[1].to_string()),
                    ("WW", &ww.to_string()),
                    ("WH", &wh.to_string()),
                    ("OUT", &out_slot.to_string()),
                    ("PARAMS", &(out_slot + 1).to_string()),
                    ("TH", &th.to_string()),
                    ("WIN_LEN", &WIN_LEN.to_string()),
                ],
            )
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(groups, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run_with(&device, Checks::Unchecked)
}

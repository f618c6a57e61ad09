//! Depthwise conv2d (one input channel per group) with the input window of each output tile in
//! workgroup memory (`shaders/conv_depthwise.wgsl`), for floats.

use super::Geometry;
use crate::exec::{enables, grid, Launch, Params};
use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../../shaders/conv_depthwise.wgsl");
/// Output tile width (one column per thread of a row of 32).
const TW: usize = 32;
/// Window elements in workgroup memory (16 KiB of f32).
const WIN_LEN: usize = 4096;

/// The tile height (32, 16 or 8 rows) whose input window fits in `WIN_LEN`, or None where even
/// 8 rows do not (big strides or dilations: the direct kernel runs those).
pub(super) fn tile_rows(g: &Geometry) -> Option<usize> {
    let ww = (TW - 1) * g.stride[1] + (g.kw - 1) * g.dilation[1] + 1;
    [32, 16, 8].into_iter().find(|&th| {
        let wh = (th - 1) * g.stride[0] + (g.kh - 1) * g.dilation[0] + 1;
        wh.checked_mul(ww).is_some_and(|n| n <= WIN_LEN)
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
        .u32(g.o / g.groups)
        .u32((th - 1) * g.stride[0] + (g.kh - 1) * g.dilation[0] + 1)
        .u32((TW - 1) * g.stride[1] + (g.kw - 1) * g.dilation[1] + 1);
    let dtype = x.dtype();
    let has_bias = bias.is_some();
    let mut tensors: Vec<&Tensor> = vec![x, w];
    tensors.extend(bias);
    tensors.push(out);
    let out_slot = tensors.len() - 1;
    Launch {
        key: format!("conv_depthwise:{dtype}:{th}:{has_bias}"),
        source: Box::new(move || {
            let t = dtype.wgsl();
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
                    ("BIAS_ADD", if has_bias { " + f32(bias[oc])" } else { "" }),
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
    .run(&device)
}

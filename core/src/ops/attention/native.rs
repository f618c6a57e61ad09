//! f16 flash attention on the native tier (shaders/native/attention_f16_cm2.comp on NV
//! cooperative matrix 2, through `crate::native_kernels`): the softmax runs on the score
//! accumulators themselves (row reductions and per-element functions), which WGSL's cooperative
//! matrices cannot do (the WGSL tier's `coop` kernel round-trips each score tile through
//! workgroup memory). Taken by Auto for f16 without score options where the device was opened
//! with the extension and one of the variants has the problem's head sizes (with an additive
//! mask the kernel's tensor loads can read: see `pick`).

use super::Geometry;
use crate::device::{Binding, Device};
use crate::dtype::DType;
use crate::exec::Params;
use crate::shape::numel;
use crate::tensor::Tensor;
use crate::Result;

/// One variant (kernels.txt's `attention_f16_cm2_<name>` lines): invocations, query rows and
/// keys per tile, head sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NativeAttn {
    name: &'static str,
    wg: u32,
    br: u32,
    bc: u32,
    hd: u32,
    hdv: u32,
    /// Also compiled with an additive mask (`_m`).
    masked: bool,
}

/// 64 query rows x 32 keys of 128 invocations: the default at D = 64. Measured on the H200
/// (f16 causal, TFLOP/s at 8x8x1024x64 / 4x16x4096x64, three runs): 99.0-99.6 / 165-166, against
/// the WGSL tier's cooperative kernel 50.6-50.9 / 79-81. Tried and dropped (same runs): 64 keys
/// 89.6-90.7 / 134-136, 16 keys 87.6 / 141, 256 invocations 46.5 / 66.4, 32 rows of 64
/// invocations 86.9 / 131, 64 rows of 64 invocations 84.6 / 142, row sums by a reduction 94.0 /
/// 148, V and the next K read before the softmax 73.4 / 100, the last query blocks first
/// 100.7 / 167 (no change), the running max moved only when some row's max passed it by 2^8
/// (FA4's lazy rescale: a whole-tile max reduction decides, uniformly) 76.9 / 111: the extra
/// reduction costs more than the rescale it skips. With the softmax state 16 columns wide
/// (2026-11-29): 101.2-101.9 / 168.9-170.0.
const D64S: NativeAttn = NativeAttn { name: "d64s", wg: 128, br: 64, bc: 32, hd: 64, hdv: 64, masked: true };
/// 64-key tiles (llama.cpp's cm2 flash tile): for the benchmark's A/B.
const D64: NativeAttn = NativeAttn { name: "d64", wg: 128, br: 64, bc: 64, hd: 64, hdv: 64, masked: false };
/// 128 query rows of 256 invocations, 32-key tiles: 93.9-94.4 / 171-172 (ahead only on the long
/// case); for the benchmark's A/B.
const D64Y: NativeAttn = NativeAttn { name: "d64y", wg: 256, br: 128, bc: 32, hd: 64, hdv: 64, masked: false };
/// D = 128: 105-106 TFLOP/s at 8x8x1024x128 (32-key tiles 92-94, V and the next K read early
/// 36.7; the WGSL tier's cooperative kernel 61.3-61.8).
const D128: NativeAttn = NativeAttn { name: "d128", wg: 128, br: 64, bc: 64, hd: 128, hdv: 128, masked: true };
/// Most wanted first: the choice takes the first that has the head sizes and runs here.
const ALL: [NativeAttn; 4] = [D64S, D64, D64Y, D128];

fn runs_on(device: &Device, a: NativeAttn, masked: bool) -> bool {
    device.native.attention_f16_cm2(a.wg, a.br, a.bc, a.hd, a.hdv)
        && !crate::native_kernels::refused(device, &module_name(a, masked))
}

/// The module of variant `a`, with or without the mask (kernels.txt's `_m` lines).
fn module_name(a: NativeAttn, masked: bool) -> String {
    format!("attention_f16_cm2_{}{}", a.name, if masked { "_m" } else { "" })
}

/// The variant for f16 attention with head sizes `d`, `dv` on `device`, or None (the WGSL tier
/// runs): `KILN_ATTN_NATIVE` names one or turns the kernel off. With a mask (its strides over
/// the scores' shape, `mask`), only the variants compiled with one (`masked`), and only a mask
/// the kernel's tensor loads can read: contiguous along the keys, its row stride and batch
/// strides multiples of 8 elements (16 bytes).
pub(super) fn pick(device: &Device, dtype: DType, d: usize, dv: usize, mask: Option<&[usize]>) -> Option<NativeAttn> {
    if dtype != DType::F16 {
        return None;
    }
    if let Some(st) = mask {
        if st[st.len() - 1] != 1 || st[..st.len() - 1].iter().any(|s| !s.is_multiple_of(8)) {
            return None;
        }
    }
    let fits = |a: &NativeAttn| {
        a.hd as usize == d
            && a.hdv as usize == dv
            && (mask.is_none() || a.masked)
            && runs_on(device, *a, mask.is_some())
    };
    match FORCED.with(|c| c.get()).or(super::knobs::attn_native()) {
        Some("0") => None,
        Some(name) => ALL.into_iter().find(|a| a.name == name).filter(fits),
        None => ALL.into_iter().find(fits),
    }
}

pub(super) fn run(
    g: &Geometry,
    a: NativeAttn,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<(&Tensor, &[usize])>,
    out: &Tensor,
) -> Result<()> {
    let device = q.device().clone();
    let br = a.br as usize;
    let nqb = g.lq.div_ceil(br);
    let blocks = numel(g.batch_shape) * nqb;
    let msq = mask.map_or(0, |(_, s)| s[s.len() - 2]);
    // The kernel's Params: eight words, then the batch shape and the Q, K, V and mask strides
    // (`Geometry::batch_params`'s lists; the mask's are zeros without one).
    let params = Params::new()
        .u32(g.lq)
        .u32(g.lk)
        .u32(nqb)
        .u32(blocks)
        .u32(g.causal as u32)
        .f32(g.scale * std::f32::consts::LOG2_E)
        .u32(g.batch_shape.len())
        .u32(msq);
    let params = g.batch_params(params, mask.map(|(_, s)| s));
    let module = module_name(a, mask.is_some());
    let pipe = crate::native_kernels::pipeline(&device, &format!("attention_native:f16:{module}"), &module)?;
    let groups = crate::exec::grid(blocks as u64, device.limits().max_compute_workgroups_per_dimension)?;
    let mut tensors = vec![q, k, v];
    tensors.extend(mask.map(|(m, _)| m));
    tensors.push(out);
    let bindings: Vec<Binding> = tensors
        .iter()
        .enumerate()
        .map(|(slot, t)| Binding { slot: slot as u32, buffer: t.raw(), size: None })
        .collect();
    device.dispatch(&pipe, &bindings, Some((tensors.len() as u32, params.bytes())), groups, None)?;
    Ok(())
}

/// The variants' names, for the benchmark's rows and the tests that force each one.
pub fn attention_native_variants() -> Vec<&'static str> {
    ALL.iter().map(|a| a.name).collect()
}

/// Whether `device` can run the variant named `name` for head sizes `d`, `dv`.
pub fn attention_native_available(device: &Device, name: &str, d: usize, dv: usize) -> bool {
    ALL.into_iter().any(|a| a.name == name && a.hd as usize == d && a.hdv as usize == dv && runs_on(device, a, false))
}

thread_local! {
    /// `with_attention_native`'s variant for this thread.
    static FORCED: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with the native attention kernel's variant `name` (`attention_native_variants`)
/// chosen on this thread wherever the native path runs and that variant fits: the benchmark
/// compares them in one process (`KILN_ATTN_NATIVE` does the same for a whole process).
#[doc(hidden)]
pub fn with_attention_native<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    let before = FORCED.with(|c| c.replace(Some(name)));
    let r = f();
    FORCED.with(|c| c.set(before));
    r
}

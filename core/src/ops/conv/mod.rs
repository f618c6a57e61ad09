//! `conv2d`, `max_pool2d` and `avg_pool2d` over NCHW tensors (PyTorch semantics). Unbatched
//! [C, H, W] input is taken too and gives an unbatched result.
//!
//! conv2d runs one of five kernels ([`ConvPath`]; `Auto` picks). Measured on the H100 at
//! 32x64x56x56 against PyTorch/cuDNN in the same run (bench rows `conv2d_*`): 3x3 f32 27.5
//! TFLOP/s (0.89), f16 76.1 (0.62); 1x1 to 256 channels 0.77 / 0.50; 3x3 stride 2 to 128
//! channels 0.81 / 0.68; 3x3 in 4 groups 2.1 / 3.1; depthwise 3x3 over 128 channels 1.34 / 0.54.
//! - implicit GEMM (`gemm`, `shaders/conv_gemm.wgsl`): per group, out [O/g, N*OH*OW] =
//!   w [O/g, C/g*KH*KW] @ patches, the patch tiles gathered from x into workgroup memory (no
//!   im2col buffer), register-tiled; floats (f16 widened to f32). Grouped convolutions too:
//!   4 groups of 16 channels 20.8 TFLOP/s against the direct kernel's 1.6. Where a group's
//!   channels are a multiple of 16, K runs (ky, kx, c) so that a K step shares one tap
//!   (`GemmLaunch::by_tap`; 3x3 f32 20.0 -> 27.5 TFLOP/s, f16 on tensor cores 45.2 -> 76.1).
//! - the same on cooperative matrices (`coop`, `shaders/conv_coop.wgsl`): f16 where the device
//!   has them (tensor cores).
//! - matmul: a 1x1 kernel with stride 1, no padding and no groups is w [O, C] @ x [N, C, H*W]
//!   in place, on `ops::matmul` (its vec4 loads beat the gather there). An im2col pass in front
//!   of the matmul for other shapes measured slower than the implicit GEMM everywhere (H100,
//!   32x64x56x56 3x3: 10.1 against 20.1 TFLOP/s f32, 13.5 against 38.1 f16), so it is gone;
//!   with the product on the native tier (NV cooperative matrix 2) it lost too (H200, 3x3 s2 to
//!   128 channels f16: 37.9 against the cooperative kernel's 51.2; BENCHMARKS.md).
//! - depthwise (`depthwise`, `shaders/conv_depthwise.wgsl`): one input channel per group,
//!   each output tile's input window in workgroup memory; floats. 0.094 ms against the direct
//!   kernel's 0.195 at 32x128x56x56 3x3 (f16: 0.085 against 0.186).
//! - direct (`shaders/conv.wgsl`): one thread per output, every tap from global memory; every
//!   dtype, and Auto's choice for integers, small problems, and grouped convolutions with few
//!   output channels per group that the depthwise kernel does not take.

mod coop;
mod depthwise;
mod gemm;
mod pool;

pub use coop::conv_coop_source_for_tests;
pub use pool::{avg_pool2d, max_pool2d};

use crate::dtype::DType;
use crate::exec::{check_f16, check_indexable, check_same_device, enables, groups_1d, Launch, Params};
use crate::pipeline::render;
use crate::shape::window_out_size as out_size;
use crate::tensor::Tensor;
use crate::{Error, Result};

const CONV: &str = include_str!("../../../../shaders/conv.wgsl");
/// The parameter block and window decode shared by conv.wgsl and pool.wgsl (the
/// block is built by `Geometry::params`).
const WINDOW_COMMON: &str = include_str!("../../../../shaders/window_common.wgsl");
/// The matmul path from this many multiply-adds (below, the direct kernel is as fast)...
const GEMM_MIN_MACS: usize = 1 << 22;

/// ... and this many output channels per group.
const GEMM_MIN_OG: usize = 4;

/// The most taps a window (C/groups x KH x KW) the implicit GEMM is trusted with on a CPU
/// adapter: measured right there on lavapipe (llvmpipe's loop limiter; see `conv2d_on_path`).
const IMPLICIT_CPU_MAX_TAPS: usize = 270_000;

/// `KILN_CONV_PATH=direct|matmul|implicit|coop`: the path `Auto` takes (for tuning), read once.
fn env_path() -> Option<ConvPath> {
    static P: std::sync::OnceLock<Option<ConvPath>> = std::sync::OnceLock::new();
    *P.get_or_init(|| match std::env::var("KILN_CONV_PATH").ok()?.as_str() {
        "direct" => Some(ConvPath::Direct),
        "matmul" => Some(ConvPath::Matmul),
        "depthwise" => Some(ConvPath::Depthwise),
        "implicit" => Some(ConvPath::Implicit),
        "coop" => Some(ConvPath::Coop),
        _ => None,
    })
}

/// Whether `ConvPath::Coop` runs on `device` (f16 conv2d on cooperative matrices).
pub fn conv2d_has_cooperative_matrix(device: &crate::device::Device) -> bool {
    coop::pick(device, 64, 128, 1).is_some()
}

/// Which kernel runs a conv2d (see the module doc); anything but `Auto` is for tests and tuning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvPath {
    Auto,
    Direct,
    Matmul,
    Depthwise,
    Implicit,
    Coop,
}

fn acc_type(dtype: DType) -> &'static str {
    if dtype.is_float() {
        "f32"
    } else {
        dtype.wgsl()
    }
}

/// [N, C, H, W] of a 3-D or 4-D input, and whether it was batched.
fn nchw(op: &str, x: &Tensor) -> Result<([usize; 4], bool)> {
    match *x.shape() {
        [n, c, h, w] => Ok(([n, c, h, w], true)),
        [c, h, w] => Ok(([1, c, h, w], false)),
        _ => Err(Error::ShapeMismatch(format!("{op}: input must be [N, C, H, W] or [C, H, W], got {:?}", x.shape()))),
    }
}

fn check_positive(op: &str, what: &str, v: [usize; 2]) -> Result<()> {
    if v.contains(&0) {
        return Err(Error::InvalidArgument(format!("{op}: {what} {v:?} must be at least 1")));
    }
    Ok(())
}

/// 2-D convolution (cross-correlation, as PyTorch): x [N, C, H, W], w [O, C/groups, KH, KW],
/// bias [O]; gives [N, O, OH, OW] with OH = (H + 2 ph - dh (KH - 1) - 1) / sh + 1.
pub fn conv2d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<Tensor> {
    conv2d_on_path(x, w, bias, stride, padding, dilation, groups, ConvPath::Auto)
}

/// `conv2d` on a chosen kernel. InvalidArgument where the kernel does not take the dtype
/// (integers run only `Direct`, `Coop` only f16) or the shape (`Matmul`: 1x1, stride 1, no
/// padding, no groups); Unsupported
/// where the device has no cooperative matrices for `Coop`.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_on_path(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
    path: ConvPath,
) -> Result<Tensor> {
    let mut all = vec![x, w];
    all.extend(bias);
    let device = check_same_device(&all)?;
    let dtype = x.dtype();
    if all.iter().any(|t| t.dtype() != dtype) {
        return Err(Error::DTypeMismatch(format!(
            "conv2d: input {dtype}, weight {}{}: dtypes must match",
            w.dtype(),
            bias.map_or(String::new(), |b| format!(", bias {}", b.dtype()))
        )));
    }
    if dtype == DType::Bool {
        return Err(Error::DTypeMismatch(
            "conv2d is not defined on bool tensors: cast to a numeric dtype first".into(),
        ));
    }
    check_f16(&device, &[dtype])?;
    check_positive("conv2d", "stride", stride)?;
    check_positive("conv2d", "dilation", dilation)?;
    if groups == 0 {
        return Err(Error::InvalidArgument("conv2d: groups must be at least 1".into()));
    }
    let ([n, c, h, wd], batched) = nchw("conv2d", x)?;
    let [o, cg, kh, kw] = match *w.shape() {
        [o, cg, kh, kw] => [o, cg, kh, kw],
        _ => {
            return Err(Error::ShapeMismatch(format!(
                "conv2d: weight must be [O, C/groups, KH, KW], got {:?}",
                w.shape()
            )))
        }
    };
    if c % groups != 0 || o % groups != 0 {
        return Err(Error::ShapeMismatch(format!(
            "conv2d: input channels {c} and output channels {o} must both be divisible by groups {groups}"
        )));
    }
    if cg * groups != c {
        return Err(Error::ShapeMismatch(format!(
            "conv2d: weight {:?} expects {} input channels per group, the input has {c} channels in {groups} groups",
            w.shape(),
            cg
        )));
    }
    if let Some(b) = bias {
        if b.shape() != [o] {
            return Err(Error::ShapeMismatch(format!("conv2d: bias must be [{o}], got {:?}", b.shape())));
        }
    }
    if kh == 0 || kw == 0 {
        return Err(Error::ShapeMismatch(format!("conv2d: empty kernel {:?}", w.shape())));
    }
    let oh = out_size(h, kh, stride[0], padding[0], dilation[0])?;
    let ow = out_size(wd, kw, stride[1], padding[1], dilation[1])?;
    let out_shape: Vec<usize> = if batched { vec![n, o, oh, ow] } else { vec![o, oh, ow] };
    let out = Tensor::empty_on(&device, &out_shape, dtype)?;
    let total = out.numel();
    if total == 0 {
        return Ok(out);
    }
    check_indexable(total)?;
    check_indexable(x.numel())?;
    let geo = Geometry { n, c, h, w: wd, o, oh, ow, kh, kw, stride, padding, dilation, groups };
    geo.check("conv2d")?;
    let taps = cg * kh * kw;
    let float = dtype.is_float();
    let pointwise = groups == 1 && [kh, kw] == [1, 1] && stride == [1, 1] && padding == [0, 0];
    let depthwise = cg == 1 && depthwise::tile_rows(&geo).is_some();
    let refuse = |why: &str| Err(Error::InvalidArgument(format!("conv2d on path {path:?}: {why}")));
    // The tuning override, where that path takes this convolution.
    let path = match (path, env_path()) {
        (ConvPath::Auto, Some(ConvPath::Coop)) if dtype != DType::F16 => ConvPath::Auto,
        (ConvPath::Auto, Some(ConvPath::Matmul)) if !pointwise => ConvPath::Auto,
        (ConvPath::Auto, Some(ConvPath::Depthwise)) if !depthwise => ConvPath::Auto,
        (ConvPath::Auto, Some(p)) if float => p,
        (p, _) => p,
    };
    let path = match path {
        // Few output channels per group leave most of a GEMM tile empty (depthwise 3x3 at
        // 32x128x56x56: 0.83 ms through the implicit GEMM, 0.19 direct, 0.094 depthwise).
        ConvPath::Auto if float && depthwise && o / groups < GEMM_MIN_OG && total * taps >= GEMM_MIN_MACS => {
            ConvPath::Depthwise
        }
        ConvPath::Auto if !float || total * taps < GEMM_MIN_MACS || o / groups < GEMM_MIN_OG => ConvPath::Direct,
        // A 1x1 kernel with stride 1 and no padding is a plain matmul over x in place (no im2col
        // buffer), and the matmul kernels' vec4 loads beat the gather: on the H100 at
        // 32x64x56x56 -> 256 channels, 21.1 TFLOP/s against 10.5 (f16: 33.6 against 14.4).
        ConvPath::Auto if pointwise => ConvPath::Matmul,
        ConvPath::Auto if dtype == DType::F16 && coop::pick(&device, o / groups, n * oh * ow, groups).is_some() => {
            ConvPath::Coop
        }
        // The implicit GEMM walks all C/groups x KH x KW taps in one invocation (about one loop
        // pass per 16): right on lavapipe at 270000 taps, not measured past that, where a CPU
        // adapter takes the direct kernel, which splits its channels over dispatches there
        // (core/src/loop_budget.rs).
        ConvPath::Auto if crate::loop_budget::limited(&device) && taps > IMPLICIT_CPU_MAX_TAPS => ConvPath::Direct,
        ConvPath::Auto => ConvPath::Implicit,
        ConvPath::Direct => ConvPath::Direct,
        _ if !float => return refuse("integers run only the direct kernel"),
        ConvPath::Depthwise if !depthwise => {
            return refuse("one input channel per group and an input window that fits workgroup memory")
        }
        ConvPath::Matmul if !pointwise => return refuse("only 1x1 kernels with stride 1, no padding and no groups"),
        ConvPath::Coop if dtype != DType::F16 => return refuse("cooperative matrices take f16 only"),
        p => p,
    };
    match path {
        ConvPath::Matmul => return Ok(pointwise_matmul(x, w, bias, &geo)?.with_shape(out_shape)),
        ConvPath::Depthwise => {
            depthwise::run(x, w, bias, &out, &geo)?;
            return Ok(out);
        }
        ConvPath::Implicit | ConvPath::Coop => {
            let launch = gemm::GemmLaunch { x, w, bias, out: &out, geo: &geo };
            if path == ConvPath::Coop {
                let Some(tiles) = coop::pick(&device, o / groups, n * oh * ow, groups) else {
                    return Err(Error::Unsupported(format!(
                        "conv2d: the adapter {} has no cooperative matrices this kernel can use",
                        device.info().name
                    )));
                };
                coop::run(&launch, tiles)?;
            } else {
                gemm::run(&launch, gemm::pick(&device, o / groups))?;
            }
            return Ok(out);
        }
        _ => {}
    }
    let max_steps = crate::loop_budget::steps_per_dispatch(&device, geo.direct_passes_per_channel(), 0);
    let cranges = crate::loop_budget::chunks(cg, 1, max_steps);
    if cranges.len() > 1 && dtype == DType::F16 {
        // Split channels carry the sums in `out`: in f16 they would be rounded between
        // dispatches, so the conv runs in f32 (the f16 kernel accumulates in f32 too) and is
        // rounded once at the end, as the f16 kernel does.
        let f32s = |t: &Tensor| crate::ops::cast(t, DType::F32);
        let b32 = bias.map(f32s).transpose()?;
        let y =
            conv2d_on_path(&f32s(x)?, &f32s(w)?, b32.as_ref(), stride, padding, dilation, groups, ConvPath::Direct)?;
        return crate::ops::cast(&y, DType::F16);
    }
    let has_bias = bias.is_some();
    let mut tensors: Vec<&Tensor> = vec![x, w];
    tensors.extend(bias);
    tensors.push(&out);
    let out_slot = tensors.len() - 1;
    let acc = acc_type(dtype);
    let source = move || {
        let (decl, init) = if has_bias {
            (
                format!("@group(0) @binding(2) var<storage, read> bias: array<{}>;", dtype.wgsl()),
                format!("{acc}(bias[oc])"),
            )
        } else {
            (String::new(), format!("{acc}(0)"))
        };
        render(
            CONV,
            &[
                ("ENABLE", enables(&[dtype])),
                ("WINDOW_COMMON", WINDOW_COMMON),
                ("T", dtype.wgsl()),
                ("ACC", acc),
                ("BIAS_DECL", &decl),
                ("BIAS_INIT", &init),
                ("OUT", &out_slot.to_string()),
                ("PARAMS", &(out_slot + 1).to_string()),
            ],
        )
    };
    for (cbegin, cend) in cranges {
        Launch {
            key: format!("conv2d:{dtype}:{has_bias}"),
            source: Box::new(source),
            tensors: &tensors,
            params: Some(geo.params_channels(total, cbegin, cend)),
            groups: groups_1d(&device, total)?,
        }
        .run(&device)?;
    }
    Ok(out)
}

/// The sizes of one convolution.
struct Geometry {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
}

impl Geometry {
    /// The kernels index windows in 32-bit integers (`oh * stride - padding + kh * dilation`):
    /// a geometry past that would silently wrap, so it is refused here.
    /// Also charges the session the op's real work (`macs`) before anything is launched.
    fn check(&self, op: &str) -> Result<()> {
        let reach = |i: usize| -> Option<usize> {
            let last = [self.oh, self.ow][i].saturating_sub(1).checked_mul(self.stride[i])?;
            last.checked_add(([self.kh, self.kw][i] - 1).checked_mul(self.dilation[i])?)
        };
        let fields = [self.stride, self.padding, self.dilation].concat();
        let fits = |v: usize| v <= i32::MAX as usize;
        if !fields.into_iter().all(fits) || ![0, 1].into_iter().all(|i| reach(i).is_some_and(fits)) {
            return Err(Error::InvalidArgument(format!(
                "{op}: stride {:?}, padding {:?} and dilation {:?} reach past 2^31 (the kernels index in 32 bits)",
                self.stride, self.padding, self.dilation
            )));
        }
        crate::exec::charge_work(op, self.macs())
    }

    /// Multiply-adds (or window taps, for a pool): every output element of every image reads
    /// C/groups x KH x KW taps. A 1023x1023 filter over a 1024x1024 image is ~1e12 of them in
    /// a million outputs.
    fn macs(&self) -> u64 {
        let taps = crate::exec::work_of(&[self.c / self.groups.max(1), self.kh, self.kw]);
        crate::exec::work_of(&[self.n, self.o, self.oh, self.ow]).saturating_mul(taps)
    }

    /// The parameter block of `shaders/window_common.wgsl` for a launch over `total` elements
    /// that folds the input channels [cbegin, cend) of each group (conv) or the window rows
    /// [cbegin, cend) (pools).
    fn params_channels(&self, total: usize, cbegin: usize, cend: usize) -> Params {
        Params::new()
            .u32(total)
            .u32(self.c)
            .u32(self.h)
            .u32(self.w)
            .u32(self.o)
            .u32(self.oh)
            .u32(self.ow)
            .u32(self.kh)
            .u32(self.kw)
            .u32(self.stride[0])
            .u32(self.stride[1])
            .u32(self.padding[0])
            .u32(self.padding[1])
            .u32(self.dilation[0])
            .u32(self.dilation[1])
            .u32(self.c / self.groups)
            .u32(self.o / self.groups)
            .u32(cbegin)
            .u32(cend)
    }

    /// Loop passes (core/src/loop_budget.rs) conv.wgsl's invocation makes per input channel:
    /// the channel loop's own, the rows' loop and each row's loop over taps (counted with one
    /// pass to spare each, for the `continue`s).
    fn direct_passes_per_channel(&self) -> u64 {
        let (kh, kw) = (self.kh as u64, self.kw as u64);
        2 + (kh + 2) + kh * (kw + 2)
    }
}

/// A 1x1 float conv2d with stride 1, no padding and no groups as w [O, C] @ x [N, C, H*W]
/// (f16 on the f16 matmul: tensor cores where the device has them); gives [N, O, H*W].
fn pointwise_matmul(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, g: &Geometry) -> Result<Tensor> {
    let y = crate::ops::matmul(&w.with_shape(vec![g.o, g.c]), &x.with_shape(vec![g.n, g.c, g.h * g.w]))?;
    match bias {
        Some(b) => crate::ops::add(&y, &b.with_shape(vec![g.o, 1])),
        None => Ok(y),
    }
}

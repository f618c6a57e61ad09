//! The op table: every op of the shared API as data, declared once. Each row names the op, its
//! family, its bindings' names and its arguments in the core call's order, each typed ([`Ty`])
//! with its default and one doc line. `kiln-gen` (gen/) writes from it the bindings' plain
//! wrappers, kiln-core's by-name dispatch (ops/by_name_gen.rs), the conformance suite's op list
//! and docs/ops-api.md; a binding writes an op by hand only where its idiom differs (`~` below).

//! The types the rows are written in: `table/types.rs`.

mod types;

use super::{BinaryOp, UnaryOp};

pub use types::{a, Arg, Dflt, OpInfo, Out, Ty};
use Dflt::{Bool as B, Float as F, Int as I};
use Ty::*;

/// Argument shorthands shared by many rows.
const X: Arg = a("x", Tensor, "the input");
const X1: Arg = a("x1", Tensor, "the first input");
const X2: Arg = a("x2", Tensor, "the second input");
const SHAPE: Arg = a("shape", Shape, "the shape of the result");
const DTYPE: Arg = a("dtype", DType, "the dtype of the result");
/// A new tensor's dtype, which Nx's creation functions default to f32.
const NEW_DTYPE: Arg = DTYPE.nx("{:f, 32}");
const AXES: Arg = a("axes", OptAxes, "the axes to reduce (None: every axis)").or(Dflt::None);
const KEEPDIMS: Arg = a("keepdims", Bool, "keep the reduced axes with size 1").or(B(false));
const DDOF: Arg = a("ddof", Size, "delta degrees of freedom (0: population, 1: sample)").or(I(0)).py("correction");
const ARG_AXIS: Arg = a("axis", OptAxis, "the axis (None: the flattened tensor)").or(Dflt::None);
const AXIS: Arg = a("axis", Axis, "the axis (negative counts from the end)");
const FORMAT: Arg = a("format", Format, "the GGUF block format (\"q4_0\", …)");
const SCAN_AXIS: Arg = a("axis", OptAxis, "the axis (None only for a 1-D input)").or(Dflt::None).nx("0");
const SCAN_DTYPE: Arg = a("dtype", OptDType, "the dtype of the result (None: x's)").or(Dflt::None);
const INCLUDE_INITIAL: Arg = a("include_initial", Bool, "start with the identity (the result one longer)").or(B(false));
/// An axis defaulting to the last one.
const AXIS_LAST: Arg = a("axis", Axis, "the axis (negative counts from the end)").or(I(-1));
const DESCENDING: Arg = a("descending", Bool, "largest first").or(B(false));
const KERNEL: Arg = a("kernel", Pair, "the window (height, width)").py("kernel_size");
const POOL_STRIDE: Arg = a("stride", Pair, "the step (height, width)").or(Dflt::Same("kernel"));
const PADDING: Arg = a("padding", Pair, "zeros added on each side (height, width)").or(I(0)).c_stem("pad");
const WEIGHT: Arg = a("weight", OptTensor, "the scale (None: 1)").or(Dflt::None);
const BIAS: Arg = a("bias", OptTensor, "the shift (None: 0)").or(Dflt::None);

const REDUCE: &[Arg] = &[X, AXES, KEEPDIMS];

/// The ops with their own signatures (creation, random); the unary and binary ops come from the
/// tables in elementwise/table.rs.
const BEFORE_ELEMENTWISE: &[OpInfo] = &[
    OpInfo::new("zeros", "creation", "any", &[SHAPE, NEW_DTYPE])
        .doc("a tensor of zeros").elixir("zeros").python_creation("A tensor of ``shape`` filled with zeros.").jl_owns("Kiln.zeros(Type{Float32}, Int)")
        .julia("A KilnArray of `dtype` (Float32 when left out) and size `shape` filled with zeros.")
        .c("kiln_full with 0. `shape` may be NULL when `ndim` is 0. `out`: non-null."),
    OpInfo::new("ones", "creation", "any", &[SHAPE, NEW_DTYPE])
        .doc("a tensor of ones").elixir("ones").python_creation("A tensor of ``shape`` filled with ones.").jl_owns("Kiln.ones(Type{Float32}, Int)")
        .julia("A KilnArray of `dtype` (Float32 when left out) and size `shape` filled with ones.")
        .c("kiln_full with 1. `shape` may be NULL when `ndim` is 0. `out`: non-null."),
    OpInfo::new("full", "creation", "any", &[SHAPE, NEW_DTYPE, a("value", F64, "the value of every element").py("fill_value")])
        .doc("a tensor filled with `value`").py_keywords().elixir("full").jl_owns("Kiln.full(Type{Float32}, Float64, Int)")
        .julia("A KilnArray of `dtype` and size `shape` filled with `value` (converted to `dtype`; `Kiln.fill(v, dims...)` takes `v`'s type).")
        .c("A tensor of shape `shape[0..ndim]` and `dtype` filled with `value` (converted to the dtype). `shape` may be NULL when `ndim` is 0. `out`: non-null."),
    OpInfo::new(
        "arange",
        "creation",
        "any",
        &[a("start", F64, "the first value"), a("stop", F64, "the bound, not included"), a("step", F64, "the difference between neighbours (non-zero)"), DTYPE],
    )
    .doc("`start, start + step, …` below `stop` (numpy's arange)").py_own("numpy's arange(start, /, stop, step, *, dtype)").jl_owns(":arange")
    .c("`start, start + step, …` below `stop` (numpy `arange`) as a 1-D tensor of `dtype`. `step` must be non-zero and all three finite. `out`: non-null."),
    OpInfo::new(
        "random_uniform",
        "random",
        "float",
        &[SHAPE, NEW_DTYPE, a("seed", U64, "the seed (same seed, same numbers)").nx("0"), a("low", F64, "the lower bound").or(F(0.0)), a("high", F64, "the upper bound, not included").or(F(1.0))],
    )
    .doc("uniform numbers in [low, high), the same on every device").py_keywords().jl_owns("Kiln.rand(Type{Float32}, Int)")
    .c("Uniform random numbers in [low, high) of shape `shape[0..ndim]` (float dtypes). Counter based: the same `seed` gives the same numbers on every device. `shape` may be NULL when `ndim` is 0. `out`: non-null.")
    .names(["~random_uniform", "~random_uniform", "~rand"])
    .elixir("random_uniform")
    .julia_named("rand", "Uniform random numbers in `[low, high)` of `dtype` (Float32 when left out) and size `shape`. Counter based: the same seed gives the same numbers on every device."),
    OpInfo::new(
        "random_normal",
        "random",
        "float",
        &[SHAPE, NEW_DTYPE, a("seed", U64, "the seed (same seed, same numbers)").nx("0"), a("mean", F64, "the mean").or(F(0.0)), a("std", F64, "the standard deviation").or(F(1.0))],
    )
    .doc("normal numbers, the same on every device").py_keywords().jl_owns("Kiln.randn(Type{Float32}, Int)")
    .c("Normal random numbers with mean `mean` and standard deviation `std` (float dtypes), as kiln_random_uniform. `shape` may be NULL when `ndim` is 0. `out`: non-null.")
    .names(["~random_normal", "~random_normal", "~randn"])
    .elixir("random_normal")
    .julia_named("randn", "Normal random numbers with `mean` and `std` of `dtype` (Float32 when left out) and size `shape` (counter based, as [`Kiln.rand`](@ref))."),
];

const AFTER_ELEMENTWISE: &[OpInfo] = &[
    OpInfo::new("where", "select", "any, bool included", &[a("cond", Tensor, "the condition (bool, or non-zero = true)"), a("a", Tensor, "where cond holds"), a("b", Tensor, "elsewhere")])
        .core("where_")
        .doc("`cond ? a : b` elementwise with broadcasting (cond bool, or any dtype non-zero = true)")
        .c("`cond ? a : b` elementwise, broadcasting all three (numpy `where`); `cond` is KILN_BOOL, or any dtype true where non-zero; `a` and `b` must have one dtype. `cond`, `a`, `b`, `out`: non-null.")
        .names(["~where", "~where", "~ifelse"]),
    OpInfo::new("clip", "select", "any", &[X, a("min", OptTensor, "the lower bound (None: none)").or(Dflt::None), a("max", OptTensor, "the upper bound (None: none)").or(Dflt::None)])
        .note("(clip_scalar: min: f64 = -inf, max: f64 = inf)")
        .hand("two forms: tensor bounds (kiln_clip) or number bounds (kiln_clip_scalar); by_name picks one by the inputs given")
        .doc("`x` limited to [min, max] (NaN in x or a bound gives NaN)")
        .names(["~clip", "~clip", "~clamp"]),
    OpInfo::new("cast", "cast", "any, bool included", &[X, DTYPE])
        .doc("conversion to `dtype` (float to int truncates, saturating; to bool: non-zero is true; from bool: 0 or 1)").jl_owns(":cast")
        .names(["~astype", "~cast", "~convert"])
        .elixir("cast")
        .c("Converts `x` to `dtype` (float to integer truncates toward zero, saturating). `x`, `out`: non-null."),
    OpInfo::new("matmul", "matmul", "any", &[a("a", Tensor, "the left operand"), a("b", Tensor, "the right operand")])
        .doc("numpy matmul (1-D operands promoted, batch dims broadcast)").jl_owns(":matmul")
        .names(["~matmul", "~matmul", "~*"])
        .array_api("numpy ``matmul``: 1-D operands are promoted, batch dimensions broadcast.")
        .elixir("matmul")
        .c("Matrix product with numpy `matmul` rules: 1-D operands are promoted, batch dimensions broadcast; [.., M, K] x [.., K, N] gives [.., M, N]. `a`, `b`, `out`: non-null."),
    OpInfo::new("sum", "reduce", "any", REDUCE)
        .doc("sum over axes").py_keywords()
        .elixir("sum")
        .c("Sum over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`: non-null; `axes` may be NULL only when `naxes` is 0."),
    OpInfo::new("mean", "reduce", "float", REDUCE)
        .doc("mean over axes").jl_owns("Statistics.mean(KA)")
        .array_api("Mean over ``axis`` (None: all axes).")
        .elixir("mean")
        .c("Mean over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`: non-null; `axes` may be NULL only when `naxes` is 0."),
    OpInfo::new("max", "reduce", "any, bool included", REDUCE)
        .doc("maximum over axes")
        .names(["~max", "max", "~maximum"])
        .array_api("Maximum over ``axis`` (None: all axes).")
        .c("Maximum over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`: non-null; `axes` may be NULL only when `naxes` is 0."),
    OpInfo::new("min", "reduce", "any, bool included", REDUCE)
        .doc("minimum over axes")
        .names(["~min", "min", "~minimum"])
        .array_api("Minimum over ``axis`` (None: all axes).")
        .c("Minimum over the axes `axes[0..naxes]` (negative counts from the end; `axes = NULL, naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`: non-null; `axes` may be NULL only when `naxes` is 0."),
    OpInfo::new("all", "reduce", "any, bool included (gives bool)", REDUCE)
        .doc("whether every element over axes is true (non-zero); true over an empty axis").jl_owns("all(KB)")
        .array_api("Whether every element over ``axis`` is true (non-zero, NaN included), as a bool tensor; True over an empty axis.")
        .elixir("all")
        .c("Whether every element over the axes `axes[0..naxes]` is true (non-zero, NaN included) as a KILN_BOOL tensor; true over an empty axis (negative axes count from the end; `axes = NULL, naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`: non-null; `axes` may be NULL only when `naxes` is 0."),
    OpInfo::new("any", "reduce", "any, bool included (gives bool)", REDUCE)
        .doc("whether some element over axes is true (non-zero); false over an empty axis").jl_owns("any(KB)")
        .array_api("Whether some element over ``axis`` is true (non-zero, NaN included), as a bool tensor; False over an empty axis.")
        .elixir("any")
        .c("Whether some element over the axes `axes[0..naxes]` is true (non-zero, NaN included) as a KILN_BOOL tensor; false over an empty axis (negative axes count from the end; `axes = NULL, naxes = 0` reduces every axis). With `keepdims` the reduced axes stay with size 1. `x`, `out`: non-null; `axes` may be NULL only when `naxes` is 0."),
    OpInfo::new("var", "reduce", "float", &[X, AXES, KEEPDIMS, DDOF])
        .doc("variance over axes").py_keywords().jl_owns("Statistics.var(KA)")
        .elixir("var")
        .c("Variance over `axes[0..naxes]` (as kiln_sum) with `ddof` delta degrees of freedom (0: population, 1: sample). `x`, `out`: non-null."),
    OpInfo::new("argmax", "reduce", "any, bool included", &[X, ARG_AXIS, KEEPDIMS])
        .doc("index (i32) of the largest element")
        .array_api("Index (int32) of the maximum along ``axis``; None: index into the flattened tensor.")
        .elixir("argmax")
        .c("Index (i32) of the largest element along `*axis`, or in the flattened tensor when `axis` is NULL (ties: the first). With `keepdims` the reduced axis stays with size 1. `x`, `out`: non-null; `axis` nullable."),
    OpInfo::new("argmin", "reduce", "any, bool included", &[X, ARG_AXIS, KEEPDIMS])
        .doc("index (i32) of the smallest element")
        .array_api("Index (int32) of the minimum along ``axis``; None: index into the flattened tensor.")
        .elixir("argmin")
        .c("Index (i32) of the smallest element along `*axis`, or in the flattened tensor when `axis` is NULL (ties: the first). With `keepdims` the reduced axis stays with size 1. `x`, `out`: non-null; `axis` nullable."),
    OpInfo::new("softmax", "norm", "float", &[X, AXIS_LAST])
        .doc("softmax along an axis")
        .julia("Softmax along `dims` (the first dimension by default, as NNlib).")
        .elixir("softmax")
        .python("``exp(x - max) / sum(exp(x - max))`` along ``axis``.")
        .c("Softmax along `axis` (negative counts from the end). `x`, `out`: non-null."),
    OpInfo::new("log_softmax", "norm", "float", &[X, AXIS_LAST])
        .doc("log-softmax along an axis")
        .julia("Log-softmax along `dims` (the first dimension by default, as NNlib; also `Kiln.logsoftmax`).")
        .elixir("log_softmax")
        .python("``x - logsumexp(x)`` along ``axis``.")
        .c("Log-softmax along `axis`. `x`, `out`: non-null."),
    OpInfo::new("layer_norm", "norm", "float", &[X, WEIGHT, BIAS, a("eps", F32, "added to the variance").or(F(1e-5))])
        .doc("layer normalization over the last axis")
        .julia("Normalizes over the first dimension (features first, as Flux): `(x - mean) / sqrt(var + eps) * weight + bias`, with `weight` and `bias` vectors of length `size(x, 1)`.")
        .elixir("layer_norm")
        .python("Layer normalisation over the last axis: ``(x - mean) / sqrt(var + eps) * weight + bias`` (biased variance; ``weight`` and ``bias`` have the last axis' length, or are None).")
        .c("Layer normalization over the last axis: (x - mean) / sqrt(var + eps) * weight + bias. `weight` and `bias` (shape [last dim]) are optional (NULL = 1 and 0). `x`, `out`: non-null."),
    OpInfo::new("rms_norm", "norm", "float", &[X, WEIGHT, a("eps", F32, "added to the mean square").or(F(1e-6))])
        .doc("RMS normalization over the last axis")
        .julia("`x / sqrt(mean(x²) + eps) * weight` over the first dimension.")
        .elixir("rms_norm")
        .python("RMS normalisation over the last axis: ``x / sqrt(mean(x**2) + eps) * weight``.")
        .c("RMS normalization over the last axis: x / sqrt(mean(x^2) + eps) * weight. `weight` optional (NULL = 1). `x`, `out`: non-null."),
    OpInfo::new("batch_norm", "norm", "float", &[X, a("mean", Tensor, "the running mean [C]"), a("var", Tensor, "the running variance [C]"), WEIGHT, BIAS, a("eps", F32, "added to the variance").or(F(1e-5))])
        .doc("batch normalization (inference) of [N, C, ...] with stats [C]")
        .julia("Inference batch normalization of `x` of size `(…, C, N)` (channels next to last, as Flux's WHCN) with per-channel vectors of length `C`.")
        .elixir("batch_norm")
        .python("Inference batch norm for ``x`` of shape [N, C, ...] with per-channel ``mean``, ``var``, ``weight`` and ``bias`` of shape [C].")
        .c("Batch normalization (inference) of `x` [N, C, ...] with per-channel `mean` and `var` [C] and optional `weight`, `bias` [C] (NULL = 1 and 0). `x`, `mean`, `var`, `out`: non-null."),
    OpInfo::new(
        "conv2d",
        "conv/pool",
        "any",
        &[X, a("w", Tensor, "the filters [O, C/groups, KH, KW]"), a("bias", OptTensor, "added per output channel (None: none)").or(Dflt::None), a("stride", Pair, "the step (height, width)").or(I(1)), PADDING, a("dilation", Pair, "the spacing of the filter taps (height, width)").or(I(1)), a("groups", Size, "the channel groups").or(I(1))],
    )
    .doc("2-D convolution, NCHW")
    .python("2-D convolution (cross-correlation, as PyTorch) of ``x`` [N, C, H, W] (or [C, H, W]) with ``w`` [O, C/groups, KH, KW] and optional ``bias`` [O]. ``stride``, ``padding`` and ``dilation`` are ints or (h, w) pairs.")
    .julia("2-D cross-correlation (as PyTorch; no kernel flip) of `x` of size `(W, H, C, N)` with `w` of size `(KW, KH, C ÷ groups, O)`; gives `(OW, OH, O, N)`. `stride`, `pad` and `dilation` are integers or `(w, h)` tuples, in the same order as the dimensions.")
    .elixir("conv2d")
    .c("2-D convolution (cross-correlation, as PyTorch) of `x` [N, C, H, W] with `w` [O, C/groups, KH, KW] and optional `bias` [O] (NULL = none); gives [N, O, OH, OW]. Strides and dilations must be >= 1, `groups` must divide C and O. `x`, `w`, `out`: non-null."),
    OpInfo::new("max_pool2d", "conv/pool", "any", &[X, KERNEL, POOL_STRIDE, PADDING])
        .doc("max pooling, NCHW")
        .python("Max over each ``kernel_size`` window of ``x`` [N, C, H, W] (or [C, H, W]); ``stride`` defaults to ``kernel_size`` (PyTorch semantics).")
        .julia("Max pooling of `x` `(W, H, C, N)` with a `kernel = (kw, kh)` window (also `Kiln.maxpool`).")
        .elixir("max_pool2d")
        .c("Max pooling (padding never wins) of `x` [N, C, H, W] with a `kernel_h` x `kernel_w` window. `x`, `out`: non-null."),
    OpInfo::new("avg_pool2d", "conv/pool", "any", &[X, KERNEL, POOL_STRIDE, PADDING])
        .doc("average pooling (padding counts), NCHW")
        .python("Mean over each ``kernel_size`` window (padding counts in the divisor, as PyTorch's default); ``stride`` defaults to ``kernel_size``.")
        .julia("Average pooling (padding counts in the average) of `x` `(W, H, C, N)` with a `kernel = (kw, kh)` window (also `Kiln.meanpool`).")
        .elixir("avg_pool2d")
        .c("Average pooling (padding counts in the average, as PyTorch's default) of `x` [N, C, H, W] with a `kernel_h` x `kernel_w` window. `x`, `out`: non-null."),
    OpInfo::new("reshape", "movement", "any, bool included", &[X, a("shape", NewShape, "the new shape (one entry may be -1)")])
        .doc("the same data with another shape (one -1 inferred)").jl_owns("reshape(KA, Dims{2})")
        .c("The same data with shape `shape[0..ndim]` (no copy; one entry may be -1 and is inferred). The result shares `x`'s buffer but is a separate handle to free. `x`, `out`: non-null; `shape` may be NULL when `ndim` is 0."),
    OpInfo::new("permute", "movement", "any, bool included", &[X, a("axes", Axes, "result axis i is input axis axes[i]")])
        .doc("axes reordered").python_named("permute_dims", "Reorders the axes: output axis i is input axis ``axes[i]``.").jl_owns("permutedims(KA, Vector{Int})")
        .c("Permutes the axes: result axis i is `x` axis `axes[i]` (`naxes` must equal the rank). `x`, `out`: non-null; `axes` may be NULL when `naxes` is 0.")
        .names(["permute_dims", "~permute", "~permutedims"]),
    OpInfo::new("transpose", "movement", "any, bool included", &[X, a("axis0", Axis, "one axis").py("axis1"), a("axis1", Axis, "the other axis").py("axis2")])
        .doc("two axes swapped (numpy's swapaxes)").python_named("swapaxes", "Swaps two axes (numpy ``swapaxes``; kiln-core's ``transpose``).").jl_owns(":swapdims")
        .c("Swaps axes `axis0` and `axis1`. `x`, `out`: non-null.")
        .names(["swapaxes", "~transpose", "~swapdims"]),
    OpInfo::new("concat", "movement", "any, bool included", &[a("tensors", Tensors, "the tensors to join"), AXIS.nx("0")])
        .doc("tensors joined along an axis").py_keywords().jl_owns("cat(KA, KA)")
        .c("Joins `tensors[0..n]` (n >= 1, one dtype, equal shapes except along `axis`) along `axis`. `tensors`, its entries and `out`: non-null.")
        .names(["~concat", "concat", "~cat"]),
    OpInfo::new("slice", "movement", "any, bool included", &[X, AXIS, a("start", Int, "the first index"), a("stop", Int, "the bound, not included"), a("step", Int, "the step (>= 1)").or(I(1))])
        .doc("`x[start:stop:step]` along an axis").jl_owns("getindex(KA, Colon, UnitRange{Int})")
        .c("`x[start:stop:step]` along `axis` (numpy clamping of start/stop, negative values count from the end, `step` >= 1). `x`, `out`: non-null.")
        .names(["~slice", "~slice", "~getindex"]),
    OpInfo::new("index_select", "movement", "any, bool included", &[X, AXIS, a("indices", Tensor, "1-D i32/u32 indices")])
        .doc("entries picked by 1-D indices (numpy take; negative i32 indices count from the end)").jl_owns("getindex(KA, Colon, Vector{Int})")
        .elixir("index_select")
        .python("kiln-core's ``index_select(x, axis, indices)`` (``take`` with the axis first).")
        .c("Picks entries along `axis` by the 1-D i32/u32 `indices` (numpy `take`; out-of-range indices read as 0). `x`, `indices`, `out`: non-null."),
    OpInfo::new("gather", "movement", "any, bool included", &[X, AXIS, a("index", Tensor, "i32/u32 indices of x's rank").positions()])
        .doc("torch.gather along an axis (numpy take_along_axis; negative i32 indices count from the end)")
        .julia("`out[I] = x[I with dimension dims replaced by index[I]]` (torch.gather in Julia terms); `index` holds 1-based positions and has `x`'s number of dimensions; an index outside `1:size(x, dims)` (0 and negative ones included: they never count from the end) reads 0.")
        .elixir("gather")
        .python("torch ``gather``: ``out[i][j] = x[index[i][j]][j]`` for ``axis=0`` (``index`` has x's rank).")
        .c("torch.gather along `axis`: `index` (i32/u32) has `x`'s rank and gives the result's shape. `x`, `index`, `out`: non-null."),
    OpInfo::new("embedding", "nn", "any, bool included", &[a("weight", Tensor, "the table [V, D]"), a("ids", Tensor, "i32/u32 row numbers").positions()])
        .doc("rows of weight [V, D] picked by ids (ids outside [0, V), negative ones included: zeros)")
        .julia("Columns of `weight` (size `(D, V)`, as Flux's `Embedding`) picked by the 1-based `ids` (any shape): gives `(D, size(ids)...)`. Out-of-range ids read as 0.")
        .elixir("embedding")
        .python("Rows of ``weight`` [V, D] picked by int32/uint32 ``ids`` of any shape: shape ``ids.shape + (D,)``.")
        .c("Rows of `weight` [V, D] picked by `ids` (i32/u32, any shape): gives [..ids, D]. `weight`, `ids`, `out`: non-null."),
    OpInfo::new("rope", "nn", "float", &[X, a("pos_offset", Size, "the position of the first row").or(I(0)), a("base", F32, "the frequency base").or(F(10000.0))])
        .doc("rotary position embedding (rotate-half)")
        .julia("Rotary position embedding of `x` of size `(D, L, batch...)`: features `i` and `i + D/2` rotate by `(pos_offset + l) * base^(-2i/D)` at position `l` (0-based).")
        .elixir("rope")
        .python("Rotary position embedding of ``x`` [..., L, D] (rotate-half pairs (i, i + D/2), angle ``(pos_offset + l) * base**(-2i/D)``).")
        .c("Rotary position embedding of `x` [..., L, D] (rotate-half pairs (i, i + D/2), angle (pos_offset + l) * base^(-2i/D)). `x`, `out`: non-null."),
    OpInfo::new("attention", "nn", "float", &[a("q", Tensor, "the queries [..., Lq, D]"), a("k", Tensor, "the keys [..., Lk, D]"), a("v", Tensor, "the values [..., Lk, Dv]"), a("causal", Bool, "mask key j > query i").or(B(false)), a("scale", OptF32, "the score scale (None: 1/sqrt(D))").or(Dflt::None)])
        .doc("scaled dot-product attention")
        .julia("Scaled dot-product attention with `q` `(D, Lq, batch...)`, `k` `(D, Lk, batch...)`, `v` `(Dv, Lk, batch...)`; gives `(Dv, Lq, batch...)`. `causal` masks keys after the query; `scale` defaults to `1/sqrt(D)`.")
        .elixir("attention")
        .python("Scaled dot-product attention: ``softmax(q @ k.mT * scale) @ v`` for q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv]; ``scale`` defaults to 1/sqrt(D); ``causal`` masks key j > query i.")
        .c("Scaled dot-product attention: softmax(q k^T * scale [+ causal mask]) v for q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv]. `*scale` when `scale` is non-null, else 1/sqrt(D); `causal` masks key j > query i. `q`, `k`, `v`, `out`: non-null."),
    // C's kiln_quant_from_bytes takes a host pointer and a length: hand-written.
    OpInfo::new("quant_from_bytes", "quant", "raw GGUF bytes", &[a("data", Bytes, "the GGUF blocks"), FORMAT, a("rows", Size, "the matrix's rows"), a("cols", Size, "the matrix's columns")])
        .doc("GGUF blocks (q4_0, q4_1, q8_0, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k) of a [rows, cols] matrix as a u32 tensor").jl_owns(":quant_from_bytes"),
    OpInfo::new("quantize", "quant", "float", &[X, FORMAT])
        .doc("a float [rows, cols] quantized as ggml's reference quantizer does")
        .julia("`x` of size `(k, n)` (Float32/Float16, `k` a multiple of 32) quantized column by column as ggml's reference quantizer does: a `KilnVector{UInt32}` of the GGUF bytes.")
        .elixir("quantize")
        .python("``x`` [rows, cols] (float32/float16) quantized as ggml's reference quantizer does: uint32 tensor of the GGUF bytes.")
        .c("`x` [rows, cols] (f32/f16, cols a multiple of 32) quantized in `format` as ggml's reference quantizer does: the u32 tensor of its GGUF bytes. `x`, `format`, `out`: non-null."),
    OpInfo::new("dequantize", "quant", "u32 (quantized)", &[a("w", Tensor, "the quantized matrix (u32)"), FORMAT, a("rows", Size, "the matrix's rows"), a("cols", Size, "the matrix's columns")])
        .doc("f32 [rows, cols] from a quantized matrix").jl_owns(":dequantize")
        .elixir("dequantize")
        .python("float32 [rows, cols] from a quantized matrix.")
        .c("f32 [rows, cols] from the quantized matrix `w` (u32) in `format`. `w`, `format`, `out`: non-null."),
    OpInfo::new("quant_matmul", "quant", "float x, u32 (quantized) w", &[X, a("w", Tensor, "the quantized weight [n, K] (u32)"), FORMAT, a("n", Size, "the weight's rows")])
        .doc("x [..., K] times Wᵀ for W quantized [N, K], accumulated in f32")
        .julia("`transpose(W) * x` for `W` the quantized `(k, n)` matrix `w` and `x` of size `(k, batch...)`: `(n, batch...)` in `x`'s element type, accumulated in Float32 (ggml_mul_mat's convention).")
        .elixir("quant_matmul")
        .python("``x`` [..., K] times ``w``ᵀ for ``w`` quantized [n, K] (nn.Linear's layout): [..., n] in x's dtype, accumulated in float32.")
        .c("`x` [..., K] (f32/f16) times W^T for `w` quantized [n, K] in `format` (nn.Linear's layout): [..., n] in x's dtype, accumulated in f32. `x`, `w`, `format`, `out`: non-null."),
    OpInfo::new("quant_embedding", "quant", "u32 (quantized) w, i32/u32 ids", &[a("w", Tensor, "the quantized table [V, d] (u32)"), FORMAT, a("d", Size, "the table's columns"), a("ids", Tensor, "i32/u32 row numbers").positions()])
        .doc("rows of a quantized table [V, D] picked by ids (out of range: zeros)")
        .julia("Columns of the quantized `(d, V)` table `w` picked by the 1-based `ids` (any shape): Float32 `(d, size(ids)...)`. Out-of-range ids give zeros.")
        .elixir("quant_embedding")
        .python("Rows of a quantized table ``w`` [V, d] picked by int32/uint32 ``ids``: float32 ``ids.shape + (d,)``; ids outside [0, V) give zeros.")
        .c("Rows of the quantized table `w` [V, d] in `format` picked by `ids` (i32/u32, any shape): f32 [..ids, d]; ids outside [0, V) give zeros. `w`, `format`, `ids`, `out`: non-null."),
    // Searching, sorting and sets (ops/sort.rs, search.rs, sets.rs).
    OpInfo::new("sort", "sort", "any, bool included", &[X, AXIS_LAST, DESCENDING])
        .doc("`x` sorted along an axis, stable (NaNs last; descending: the reverse order, ties in index order)").py_keywords()
        .c("`x` sorted along `axis` (negative counts from the end), ascending or `descending`, stable: NaNs last ascending, first descending (the exact reverse order, ties still in index order). `x`, `out`: non-null."),
    OpInfo::new("argsort", "sort", "any, bool included", &[X, AXIS_LAST, DESCENDING])
        .doc("i32 indices that sort `x` along an axis, stable (ties keep index order, descending too)").py_keywords()
        .c("The i32 indices that sort `x` along `axis` (as kiln_sort; ties keep index order). `x`, `out`: non-null.")
        .names(["~argsort", "~argsort", "~sortperm"]),
    OpInfo::new("topk", "sort", "any, bool included", &[X, a("k", Size, "how many (at most the axis' length)"), AXIS_LAST, a("largest", Bool, "the largest (else the smallest)").or(B(true))])
        .out(Out::Tuple(&["values", "indices"]))
        .position_outputs(&["indices"])
        .doc("the k largest (or smallest) elements along an axis and their i32 indices, sorted (ties: the lower index first; NaN is the largest, as in sort)")
        .julia("The `k` largest (`largest=false`: smallest) elements of `x` along `dims` and their 1-based positions along it (`Int32`), sorted, as `(values=, indices=)` KilnArrays with `size(x, dims) == k`: ties keep the lower position first and NaN is the largest value (as `sort(x; rev=true)`; Base's `partialsortperm(x, 1:k; rev=true)` for a vector without ties).")
        .elixir("top_k")
        .python("``(values, indices)``: the ``k`` largest (``largest=False``: smallest) elements along ``axis`` and their int32 positions, sorted; ties keep the lower index first and NaN counts as the largest value (as ``sort``). ``k`` past the axis' length raises.")
        .c("The `k` largest (or, with `largest` false, smallest) elements of `x` along `axis` (negative counts from the end) and their i32 positions, sorted, both of x's shape with the axis `k` long: ties keep the lower index first, NaN is the largest value (as kiln_sort). `k` past the axis' length is KILN_ERR_INVALID_ARGUMENT. `x`: non-null."),
    OpInfo::new("searchsorted", "sort", "any, bool included (x1 1-D sorted, x2 of its dtype)", &[X1, X2, a("right", Bool, "after equal elements (numpy's side='right')").or(B(false))])
        .doc("i32 insertion points of x2 in x1 (numpy searchsorted; right: side='right')").py_own("numpy's side='left' / 'right' for right").python_private("searchsorted on operands of one dtype (kiln._sorting.searchsorted promotes them).").jl_owns("searchsortedfirst(KilnArray{Float32,1}, KA); searchsortedlast(KilnArray{Float32,1}, KA)")
        .c("numpy searchsorted: i32 insertion points of each element of `x2` in the sorted 1-D `x1` (of x2's dtype), before equal elements or, with `right`, after them. `x1`, `x2`, `out`: non-null.")
        .names(["~searchsorted", "~searchsorted", "~searchsortedfirst"]),
    OpInfo::new("count_nonzero", "sort", "any, bool included", REDUCE)
        .doc("the number (i32) of non-zero elements over axes")
        .names(["~count_nonzero", "count_nonzero", "~count"])
        .array_api("The number (int32) of non-zero elements over ``axis`` (an int, a tuple or None = all).")
        .c("The number (i32) of non-zero elements over `axes[0..naxes]` (as kiln_sum). `x`, `out`: non-null."),
    OpInfo::new("nonzero", "sort", "any, bool included", &[X])
        .out(Out::PerDim)
        .doc("a tuple of i32 coordinate arrays, one per dimension, of the non-zero elements (the count is read back to the host)").jl_owns(":nonzero")
        .c("numpy nonzero: `outs[d]` receives the i32 coordinates along dimension d of the non-zero elements (NaN counts), in row-major order; `nouts` must be x's rank (at least 1). The count is read back to the host (the output size depends on the data). `x`: non-null.")
        .names(["~nonzero", "~nonzero", "~findall"]),
    // Each binding's result record is its own (a Python named tuple, an Elixir map, the browser's readback).
    OpInfo::new("unique_all", "set", "any, bool included", &[X])
        .out(Out::Tuple(&["values", "indices", "inverse_indices", "counts"])).core_struct("Unique").position_outputs(&["indices", "inverse_indices"])
        .doc("(values, indices, inverse_indices, counts) of the distinct values (-0 == +0; each NaN distinct; the count is read back)")
        .julia("The Array API's `unique_all`: `(values=, indices=, inverse_indices=, counts=)`, the distinct values sorted, the 1-based linear index of each one's first occurrence, the 1-based index into `values` of every element (`x`'s size) and the counts (`Int32`). -0.0 and 0.0 are one value; every NaN is distinct (not Base's `isequal`).")
        .c("The Array API's unique_all of `x` (flattened): the distinct values sorted (-0 == +0; each NaN distinct), the i32 flat index of each one's first occurrence, the i32 index into values of every element of x (x's shape) and the i32 counts. The count of values is read back to the host. `x`: non-null."),
    OpInfo::new("unique_counts", "set", "any, bool included", &[X])
        .out(Out::Tuple(&["values", "counts"]))
        .doc("(values, counts) of the distinct values").elixir("unique_counts")
        .julia("`(values=, counts=)` of `Kiln.unique_all(x)`: the distinct values sorted and how often each occurs (`Int32`).")
        .c("kiln_unique_all's values and counts: the distinct values of `x` (flattened, sorted; -0 == +0, each NaN distinct) and the i32 count of each. The count of values is read back to the host. `x`: non-null."),
    OpInfo::new("unique_inverse", "set", "any, bool included", &[X])
        .out(Out::Tuple(&["values", "inverse_indices"]))
        .position_outputs(&["inverse_indices"])
        .doc("(values, inverse_indices) of the distinct values").elixir("unique_inverse")
        .julia("`(values=, inverse_indices=)` of `Kiln.unique_all(x)`: the distinct values sorted and the 1-based index into `values` of every element (`x`'s size).")
        .c("kiln_unique_all's values and inverse indices: the distinct values of `x` (flattened, sorted; -0 == +0, each NaN distinct) and the i32 index into values of every element of `x` (x's shape). The count of values is read back to the host. `x`: non-null."),
    OpInfo::new("unique_values", "set", "any, bool included", &[X])
        .doc("the distinct values, sorted (each NaN kept)").jl_owns("unique(KA)")
        .names(["~unique_values", "unique_values", "~unique"])
        .julia("The distinct values of `x`, sorted (as `Kiln.unique_all`; `unique(x)` is Base's, in order of first occurrence).")
        .array_api("The distinct values of ``x`` (flattened), sorted; -0 and +0 are one value, each NaN is its own. Their number is read back to the host.")
        .c("kiln_unique_all's values: the distinct values of `x`, sorted. `x`, `out`: non-null."),
    OpInfo::new("isin", "set", "any, bool included (one dtype)", &[X1, X2, a("invert", Bool, "give the negation").or(B(false))])
        .doc("whether each element of x1 is in x2 (bool; NaN never is)").py_keywords().python_private("isin on operands of one dtype (kiln._sorting.isin promotes them).")
        .julia("Whether each element of `x1` equals an element of `x2` (a `KilnArray{Bool}` of `x1`'s size, one element type), as `in.(x1, Ref(x2))` with `==` (NaN is never found); `invert=true` negates.")
        .elixir("isin")
        .c("Whether each element of `x1` equals an element of `x2` (bool, x1's shape; one dtype; NaN is never found); `invert` negates. `x1`, `x2`, `out`: non-null."),
    // Scans (core/src/ops/scan.rs).
    OpInfo::new("cumulative_sum", "scan", "any", &[X, SCAN_AXIS, SCAN_DTYPE, INCLUDE_INITIAL])
        .doc("running sum along an axis (an axis is required past 1-D; integers wrap)")
        .names(["~cumulative_sum", "~cumulative_sum", "~cumsum"]).elixir("cumulative_sum")
        .array_api("Running sum along ``axis`` (required past 1-D), in ``dtype`` (None: x's; x is converted first), with a leading 0 when ``include_initial``. Integer sums wrap as numpy's do.")
        .c("Cumulative sum along `*axis` (negative counts from the end; `axis` may be NULL only for a 1-D `x`), in `*dtype` (NULL: x's dtype; x is converted first), with a leading 0 (the run one longer) when `include_initial`. Integer sums wrap. `x`, `out`: non-null; `axis`, `dtype` nullable."),
    OpInfo::new("cumulative_prod", "scan", "any", &[X, SCAN_AXIS, SCAN_DTYPE, INCLUDE_INITIAL])
        .doc("running product along an axis (an axis is required past 1-D; integers wrap)")
        .names(["~cumulative_prod", "~cumulative_product", "~cumprod"]).elixir("cumulative_product")
        .array_api("Running product along ``axis``, as ``cumulative_sum`` (a leading 1 when ``include_initial``).")
        .c("Cumulative product, as kiln_cumulative_sum (a leading 1 when `include_initial`). `x`, `out`: non-null; `axis`, `dtype` nullable."),
    // Statistics beside the reductions above (core/src/ops/reduce.rs).
    OpInfo::new("prod", "reduce", "any", &[X, AXES, KEEPDIMS, a("dtype", OptDType, "the dtype of the result (None: x's)").or(Dflt::None)])
        .doc("product over axes (integers wrap; 1 over an empty axis)")
        .names(["~prod", "product", "~prod"])
        .array_api("Product over ``axis`` in ``dtype`` (None: x's; x is converted first); integer products wrap, an empty axis gives 1.")
        .c("Product over the axes `axes[0..naxes]` (as kiln_sum) in `*dtype` (NULL: x's dtype; x is converted first). Integer products wrap; an empty axis gives 1. `x`, `out`: non-null; `axes` may be NULL only when `naxes` is 0; `dtype` nullable."),
    OpInfo::new("std", "reduce", "float", &[X, AXES, KEEPDIMS, DDOF])
        .doc("standard deviation over axes, sqrt(var)").py_keywords().jl_owns("Statistics.std(KA)")
        .c("Standard deviation over `axes[0..naxes]` (as kiln_var, whose square root it is) with `ddof` delta degrees of freedom. `x`, `out`: non-null.")
        .names(["~std", "standard_deviation", "~std"]),
    OpInfo::new("diff", "stats", "any", &[X, a("axis", Axis, "the axis (negative counts from the end)").or(I(-1)), a("n", Size, "how many times to difference").or(I(1)), a("prepend", OptTensor, "joined before x along the axis").or(Dflt::None), a("append", OptTensor, "joined after x along the axis").or(Dflt::None)])
        .doc("n-th forward difference along an axis (x[1:] - x[:-1], n times)")
        .array_api("The ``n``-th forward difference along ``axis`` (``x[1:] - x[:-1]``, ``n`` times), with ``prepend`` / ``append`` (x's dtype and shape but for the axis) joined at either end first.")
        .elixir("diff")
        .c("The `n`-th forward difference along `axis` (negative counts from the end): `x[1:] - x[:-1]` `n` times, after joining `prepend` and `append` (nullable; x's dtype and shape but for the axis) at either end. `x`, `out`: non-null."),
    // Linear algebra lowered to the kernels above (core/src/ops/linalg.rs).
    OpInfo::new("vecdot", "linalg", "any", &[X1.key("a"), X2.key("b"), a("axis", Axis, "the axis of the vectors").or(I(-1))])
        .doc("dot product of the vectors along an axis, with broadcasting (sum(x1 * x2, axis))")
        .array_api("Dot product of the vectors along ``axis`` with broadcasting: ``sum(x1 * x2, axis)``.")
        .julia("Dot product of the vectors along `dims` with broadcasting: `sum(x1 .* x2; dims)` without the reduced dimension, on the GPU (kiln-core's vecdot).")
        .elixir("vecdot")
        .c("Dot product of the vectors along `axis` (negative counts from the end of the broadcast shape): `sum(x1 * x2, axis)` with broadcasting; the sizes along the axis must be equal. `x1`, `x2`, `out`: non-null."),
    OpInfo::new("tensordot", "linalg", "any", &[X1, X2, a("axes", Other("the last n of x1 with the first n of x2 (n = 2), or two lists of axes"), "which axes to contract")])
        .doc("tensor contraction over paired axes (numpy's tensordot), one matmul").jl_owns(":tensordot")
        .names(["~tensordot", "~dot", "~tensordot"]),
];

const UNARY_ARGS: &[Arg] = &[X];
const BINARY_ARGS: &[Arg] = &[a("a", Tensor, "the left operand"), a("b", Tensor, "the right operand")];

/// Every op of the shared API, in the order of docs/ops-api.md: the single table each binding's
/// generated surface, the conformance suite and the docs are made from (`make gen`).
pub fn op_table() -> Vec<OpInfo> {
    let mut t: Vec<OpInfo> = BEFORE_ELEMENTWISE.to_vec();
    for u in UnaryOp::ALL {
        let (family, dtypes) = if u.gives_bool() {
            ("predicate", "any, bool included (gives bool)")
        } else if u.is_bitwise() {
            ("bitwise", "i32, u32, bool")
        } else if u.allows_int() {
            ("unary", "any")
        } else {
            ("unary", "float")
        };
        t.push(OpInfo::new(u.name(), family, dtypes, UNARY_ARGS).doc(u.doc_phrase()).names(u.binding_names()));
    }
    for b in BinaryOp::ALL {
        let (family, dtypes) = if b.is_comparison() {
            ("compare", "any, bool included (gives bool)")
        } else if b.is_logical() {
            ("logical", "any, bool included (gives bool; non-zero is true)")
        } else if b.allows_bool_bits() {
            ("bitwise", "i32, u32, bool")
        } else if b.is_bitwise() {
            ("bitwise", "i32, u32")
        } else if matches!(b, BinaryOp::Maximum | BinaryOp::Minimum) {
            ("binary", "any, bool included (or / and)")
        } else if b.allows_int() {
            ("binary", "any")
        } else {
            ("binary", "float")
        };
        t.push(OpInfo::new(b.name(), family, dtypes, BINARY_ARGS).doc(b.doc_phrase()).names(b.binding_names()));
    }
    t.extend_from_slice(AFTER_ELEMENTWISE);
    t
}

/// The names of [`op_table`], in its order. The conformance suite checks each binding against it.
pub fn op_names() -> Vec<&'static str> {
    op_table().iter().map(|o| o.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_are_unique_and_parse() {
        let names = op_names();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
        }
        for u in UnaryOp::ALL {
            assert_eq!(UnaryOp::parse(u.name()), Ok(u));
        }
        for b in BinaryOp::ALL {
            assert_eq!(BinaryOp::parse(b.name()), Ok(b));
        }
    }

    #[test]
    fn arguments_are_unique_and_defaults_trail() {
        for o in op_table() {
            for (i, x) in o.args.iter().enumerate() {
                assert!(
                    !o.args[..i].iter().any(|y| y.name == x.name || y.key == x.key),
                    "{}: {} twice",
                    o.name,
                    x.name
                );
                assert!(!x.doc.is_empty(), "{}: {} has no doc line", o.name, x.name);
            }
            // After the first argument with a default, every one but a tensor input has one
            // (Python keywords need it).
            if let Some(f) = o.args.iter().position(|x| x.default != Dflt::Required) {
                for x in &o.args[f..] {
                    assert!(x.default != Dflt::Required || x.ty.is_input(), "{}: {} lacks a default", o.name, x.name);
                }
            }
            assert!(!o.doc.is_empty(), "{} has no doc line", o.name);
        }
    }

    #[test]
    fn defaults_read_as_before() {
        assert_eq!(Dflt::Float(1e-5).text().unwrap(), "1e-5");
        assert_eq!(Dflt::Float(10000.0).text().unwrap(), "10000");
        assert_eq!(Dflt::Float(f64::NEG_INFINITY).text().unwrap(), "-inf");
        assert_eq!(Dflt::Int(-1).text().unwrap(), "-1");
        assert_eq!(Dflt::Required.text(), None);
    }
}

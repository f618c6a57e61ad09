//! The op library. Each family is one module with its kernels under `shaders/` and its CPU
//! reference under `reference/`.

pub mod attention;
pub mod by_name;
pub mod conv;
pub mod diff;
pub mod elementwise;
pub mod kv_cache;
pub mod linalg;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod quant;
mod quant_coop;
mod quant_format;
pub(crate) mod quant_kquants;
pub mod quant_matvec_k;
pub mod quant_matvec_wide;
pub mod random;
pub mod reduce;
pub mod sample;
pub mod scan;
pub mod search;
pub mod sets;
pub mod sort;

pub use attention::*;
pub use conv::*;
pub use diff::*;
pub use elementwise::*;
pub use kv_cache::*;
pub use linalg::*;
pub use matmul::*;
pub use movement::*;
pub use norm::*;
pub use quant::*;
pub use random::*;
pub use reduce::*;
pub use sample::{sample_token, sample_token_host, SampleParams, SAMPLE_MAX_RECENT};
pub use scan::*;
pub use search::*;
pub use sets::*;
pub use sort::*;

/// One op of the shared API, as every binding names and documents it. `kiln gen`
/// (cli/src/gen.rs) writes the bindings' repetitive surfaces, the conformance suite's op list
/// and the table of docs/ops-api.md from [`op_table`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The core name (C adds `kiln_`).
    pub name: &'static str,
    pub family: &'static str,
    /// Tensor inputs (0 for creation ops; `n` for concat's list is written 1).
    pub arity: usize,
    /// The dtypes it takes: "any" (every dtype but bool unless it says so), "float" (f32, f16),
    /// "int" (i32, u32) or a phrase.
    pub dtypes: &'static str,
    /// The parameters after the tensors, with their types and defaults (`name: type = default`).
    pub params: &'static str,
    /// One line saying what it computes.
    pub doc: &'static str,
    /// `[python, elixir, julia]` names; a leading `~` marks a hand-written wrapper in that
    /// binding (other semantics or extra parameters), which `kiln gen` lists but does not write
    /// (one `~` only: Julia's `~` written by hand is `~~`).
    pub names: [&'static str; 3],
}

impl OpInfo {
    /// The Python name (without the `~` mark).
    pub fn py(&self) -> &'static str {
        self.names[0].strip_prefix('~').unwrap_or(self.names[0])
    }
    /// The Elixir name: Nx's where Nx has the op (`subtract`, `greater_equal`, …).
    pub fn ex(&self) -> &'static str {
        self.names[1].strip_prefix('~').unwrap_or(self.names[1])
    }
    /// The Julia function (Base's where Base has it).
    pub fn jl(&self) -> &'static str {
        self.names[2].strip_prefix('~').unwrap_or(self.names[2])
    }
}

const fn op(
    name: &'static str,
    family: &'static str,
    arity: usize,
    dtypes: &'static str,
    params: &'static str,
    doc: &'static str,
    names: [&'static str; 3],
) -> OpInfo {
    OpInfo { name, family, arity, dtypes, params, doc, names }
}

/// The ops with their own signatures (creation, random, where, cast, and every kernel family
/// but elementwise); the unary and binary ops come from the tables in elementwise.rs.
const BEFORE_ELEMENTWISE: &[OpInfo] = &[
    op("zeros", "creation", 0, "any", "shape, dtype", "a tensor of zeros", ["~zeros", "~zeros", "~zeros"]),
    op("ones", "creation", 0, "any", "shape, dtype", "a tensor of ones", ["~ones", "~ones", "~ones"]),
    op(
        "full",
        "creation",
        0,
        "any",
        "shape, dtype, value: f64",
        "a tensor filled with `value`",
        ["~full", "~full", "~full"],
    ),
    op(
        "arange",
        "creation",
        0,
        "any",
        "start: f64, stop: f64, step: f64, dtype",
        "`start, start + step, …` below `stop` (numpy's arange)",
        ["~arange", "~arange", "~arange"],
    ),
    op(
        "random_uniform",
        "random",
        0,
        "float",
        "shape, dtype, seed: u64, low: f64 = 0, high: f64 = 1",
        "uniform numbers in [low, high), the same on every device",
        ["~random_uniform", "~random_uniform", "~rand"],
    ),
    op(
        "random_normal",
        "random",
        0,
        "float",
        "shape, dtype, seed: u64, mean: f64 = 0, std: f64 = 1",
        "normal numbers, the same on every device",
        ["~random_normal", "~random_normal", "~randn"],
    ),
];

const AFTER_ELEMENTWISE: &[OpInfo] = &[
    op("where", "select", 3, "any, bool included", "", "`cond ? a : b` elementwise with broadcasting (cond bool, or any dtype non-zero = true)", ["~where", "~where", "~ifelse"]),
    op("clip", "select", 1, "any", "min: Option<&Tensor>, max: Option<&Tensor> (clip_scalar: min: f64 = -inf, max: f64 = inf)", "`x` limited to [min, max] (NaN in x or a bound gives NaN)", ["~clip", "~clip", "~clamp"]),
    op("cast", "cast", 1, "any, bool included", "dtype", "conversion to `dtype` (float to int truncates, saturating; to bool: non-zero is true; from bool: 0 or 1)", ["~astype", "~cast", "~convert"]),
    op("matmul", "matmul", 2, "any", "", "numpy matmul (1-D operands promoted, batch dims broadcast)", ["~matmul", "~matmul", "~*"]),
    op("sum", "reduce", 1, "any", "axes: Option<&[isize]> = None, keepdims: bool = false", "sum over axes", ["~sum", "~sum", "~sum"]),
    op("mean", "reduce", 1, "float", "axes: Option<&[isize]> = None, keepdims: bool = false", "mean over axes", ["~mean", "~mean", "~mean"]),
    op("max", "reduce", 1, "any, bool included", "axes: Option<&[isize]> = None, keepdims: bool = false", "maximum over axes", ["~max", "~max", "~maximum"]),
    op("min", "reduce", 1, "any, bool included", "axes: Option<&[isize]> = None, keepdims: bool = false", "minimum over axes", ["~min", "~min", "~minimum"]),
    op("all", "reduce", 1, "any, bool included (gives bool)", "axes: Option<&[isize]> = None, keepdims: bool = false", "whether every element over axes is true (non-zero); true over an empty axis", ["~all", "~all", "~all"]),
    op("any", "reduce", 1, "any, bool included (gives bool)", "axes: Option<&[isize]> = None, keepdims: bool = false", "whether some element over axes is true (non-zero); false over an empty axis", ["~any", "~any", "~any"]),
    op("var", "reduce", 1, "float", "axes: Option<&[isize]> = None, keepdims: bool = false, ddof: usize = 0", "variance over axes", ["~var", "~var", "~var"]),
    op("argmax", "reduce", 1, "any, bool included", "axis: Option<isize> = None, keepdims: bool = false", "index (i32) of the largest element", ["~argmax", "~argmax", "~argmax"]),
    op("argmin", "reduce", 1, "any, bool included", "axis: Option<isize> = None, keepdims: bool = false", "index (i32) of the smallest element", ["~argmin", "~argmin", "~argmin"]),
    op("softmax", "norm", 1, "float", "axis: isize", "softmax along an axis", ["~softmax", "~softmax", "~softmax"]),
    op("log_softmax", "norm", 1, "float", "axis: isize", "log-softmax along an axis", ["~log_softmax", "~log_softmax", "~log_softmax"]),
    op("layer_norm", "norm", 1, "float", "weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f32 = 1e-5", "layer normalization over the last axis", ["~layer_norm", "~layer_norm", "~layer_norm"]),
    op("rms_norm", "norm", 1, "float", "weight: Option<&Tensor>, eps: f32 = 1e-6", "RMS normalization over the last axis", ["~rms_norm", "~rms_norm", "~rms_norm"]),
    op("batch_norm", "norm", 3, "float", "weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f32 = 1e-5", "batch normalization (inference) of [N, C, ...] with stats [C]", ["~batch_norm", "~batch_norm", "~batch_norm"]),
    op("conv2d", "conv/pool", 2, "any", "bias: Option<&Tensor>, stride: [usize; 2] = 1, padding: [usize; 2] = 0, dilation: [usize; 2] = 1, groups: usize = 1", "2-D convolution, NCHW", ["~conv2d", "~conv2d", "~conv2d"]),
    op("max_pool2d", "conv/pool", 1, "any", "kernel: [usize; 2], stride: [usize; 2] = kernel, padding: [usize; 2] = 0", "max pooling, NCHW", ["~max_pool2d", "~max_pool2d", "~max_pool2d"]),
    op("avg_pool2d", "conv/pool", 1, "any", "kernel: [usize; 2], stride: [usize; 2] = kernel, padding: [usize; 2] = 0", "average pooling (padding counts), NCHW", ["~avg_pool2d", "~avg_pool2d", "~avg_pool2d"]),
    op("reshape", "movement", 1, "any, bool included", "shape: &[isize]", "the same data with another shape (one -1 inferred)", ["~reshape", "~reshape", "~reshape"]),
    op("permute", "movement", 1, "any, bool included", "axes: &[isize]", "axes reordered", ["~permute_dims", "~permute", "~permutedims"]),
    op("transpose", "movement", 1, "any, bool included", "axis0: isize, axis1: isize", "two axes swapped (numpy's swapaxes)", ["~swapaxes", "~transpose", "~swapdims"]),
    op("concat", "movement", 1, "any, bool included", "axis: isize", "tensors joined along an axis", ["~concat", "~concat", "~cat"]),
    op("slice", "movement", 1, "any, bool included", "axis: isize, start: isize, stop: isize, step: isize = 1", "`x[start:stop:step]` along an axis", ["~slice", "~slice", "~getindex"]),
    op("index_select", "movement", 2, "any, bool included", "axis: isize", "entries picked by 1-D indices (numpy take; negative i32 indices count from the end)", ["~index_select", "~index_select", "~index_select"]),
    op("gather", "movement", 2, "any, bool included", "axis: isize", "torch.gather along an axis (numpy take_along_axis; negative i32 indices count from the end)", ["~gather", "~gather", "~gather"]),
    op("embedding", "nn", 2, "any, bool included", "", "rows of weight [V, D] picked by ids (ids outside [0, V), negative ones included: zeros)", ["~embedding", "~embedding", "~embedding"]),
    op("rope", "nn", 1, "float", "pos_offset: usize = 0, base: f32 = 10000", "rotary position embedding (rotate-half)", ["~rope", "~rope", "~rope"]),
    op("attention", "nn", 3, "float", "causal: bool = false, scale: Option<f32> = None", "scaled dot-product attention", ["~attention", "~attention", "~attention"]),
    op("quant_from_bytes", "quant", 0, "raw GGUF bytes", "format, rows: usize, cols: usize", "GGUF blocks (q4_0, q4_1, q8_0, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k) of a [rows, cols] matrix as a u32 tensor", ["~quant_from_bytes", "~quant_from_bytes", "~quant_from_bytes"]),
    op("quantize", "quant", 1, "float", "format", "a float [rows, cols] quantized as ggml's reference quantizer does", ["~quantize", "~quantize", "~quantize"]),
    op("dequantize", "quant", 1, "u32 (quantized)", "format, rows: usize, cols: usize", "f32 [rows, cols] from a quantized matrix", ["~dequantize", "~dequantize", "~dequantize"]),
    op("quant_matmul", "quant", 2, "float x, u32 (quantized) w", "format, n: usize", "x [..., K] times Wᵀ for W quantized [N, K], accumulated in f32", ["~quant_matmul", "~quant_matmul", "~quant_matmul"]),
    op("quant_embedding", "quant", 2, "u32 (quantized) w, i32/u32 ids", "format, d: usize", "rows of a quantized table [V, D] picked by ids (out of range: zeros)", ["~quant_embedding", "~quant_embedding", "~quant_embedding"]),
    // Searching, sorting and sets (ops/sort.rs, search.rs, sets.rs).
    op("sort", "sort", 1, "any, bool included", "axis: isize = -1, descending: bool = false", "`x` sorted along an axis, stable (NaNs last; descending: the reverse order, ties in index order)", ["~sort", "~sort", "~sort"]),
    op("argsort", "sort", 1, "any, bool included", "axis: isize = -1, descending: bool = false", "i32 indices that sort `x` along an axis, stable (ties keep index order, descending too)", ["~argsort", "~argsort", "~sortperm"]),
    op("searchsorted", "sort", 2, "any, bool included (x1 1-D sorted, x2 of its dtype)", "right: bool = false", "i32 insertion points of x2 in x1 (numpy searchsorted; right: side='right')", ["~searchsorted", "~searchsorted", "~searchsortedfirst"]),
    op("count_nonzero", "sort", 1, "any, bool included", "axes: Option<&[isize]> = None, keepdims: bool = false", "the number (i32) of non-zero elements over axes", ["~count_nonzero", "~count_nonzero", "~count"]),
    op("nonzero", "sort", 1, "any, bool included", "", "a tuple of i32 coordinate arrays, one per dimension, of the non-zero elements (the count is read back to the host)", ["~nonzero", "~nonzero", "~findall"]),
    op("unique_all", "set", 1, "any, bool included", "", "(values, indices, inverse_indices, counts) of the distinct values (-0 == +0; each NaN distinct; the count is read back)", ["~unique_all", "~unique_all", "~unique_all"]),
    op("unique_counts", "set", 1, "any, bool included", "", "(values, counts) of the distinct values", ["~unique_counts", "~unique_counts", "~unique_counts"]),
    op("unique_inverse", "set", 1, "any, bool included", "", "(values, inverse_indices) of the distinct values", ["~unique_inverse", "~unique_inverse", "~unique_inverse"]),
    op("unique_values", "set", 1, "any, bool included", "", "the distinct values, sorted (each NaN kept)", ["~unique_values", "~unique_values", "~unique"]),
    op("isin", "set", 2, "any, bool included (one dtype)", "invert: bool = false", "whether each element of x1 is in x2 (bool; NaN never is)", ["~isin", "~isin", "~isin"]),
    // Scans (core/src/ops/scan.rs).
    op("cumulative_sum", "scan", 1, "any", "axis: Option<isize> = None, dtype: Option<DType> = None, include_initial: bool = false", "running sum along an axis (an axis is required past 1-D; integers wrap)", ["~cumulative_sum", "~cumulative_sum", "~cumsum"]),
    op("cumulative_prod", "scan", 1, "any", "axis: Option<isize> = None, dtype: Option<DType> = None, include_initial: bool = false", "running product along an axis (an axis is required past 1-D; integers wrap)", ["~cumulative_prod", "~cumulative_product", "~cumprod"]),
    // Statistics beside the reductions above (core/src/ops/reduce.rs).
    op("prod", "reduce", 1, "any", "axes: Option<&[isize]> = None, keepdims: bool = false, dtype: Option<DType> = None", "product over axes (integers wrap; 1 over an empty axis)", ["~prod", "~product", "~prod"]),
    op("std", "reduce", 1, "float", "axes: Option<&[isize]> = None, keepdims: bool = false, ddof: usize = 0", "standard deviation over axes, sqrt(var)", ["~std", "~standard_deviation", "~std"]),
    op("diff", "stats", 1, "any", "axis: isize = -1, n: usize = 1, prepend: Option<&Tensor> = None, append: Option<&Tensor> = None", "n-th forward difference along an axis (x[1:] - x[:-1], n times)", ["~diff", "~diff", "~diff"]),
    // Linear algebra lowered to the kernels above (core/src/ops/linalg.rs).
    op("vecdot", "linalg", 2, "any", "axis: isize = -1", "dot product of the vectors along an axis, with broadcasting (sum(x1 * x2, axis))", ["~vecdot", "~vecdot", "~vecdot"]),
    op("tensordot", "linalg", 2, "any", "axes: the last n of x1 with the first n of x2 (n = 2), or two lists of axes", "tensor contraction over paired axes (numpy's tensordot), one matmul", ["~tensordot", "~dot", "~tensordot"]),
];

/// Every op of the shared API, in the order of docs/ops-api.md: the single table each binding's
/// generated surface, the conformance suite and the docs are made from (`make gen`).
pub fn op_table() -> Vec<OpInfo> {
    let mut t = BEFORE_ELEMENTWISE.to_vec();
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
        t.push(op(u.name(), family, 1, dtypes, "", u.doc_phrase(), u.binding_names()));
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
        t.push(op(b.name(), family, 2, dtypes, "", b.doc_phrase(), b.binding_names()));
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
    #[test]
    fn op_names_are_unique_and_parse() {
        let names = super::op_names();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
        }
        for u in super::UnaryOp::ALL {
            assert_eq!(super::UnaryOp::parse(u.name()), Ok(u));
        }
        for b in super::BinaryOp::ALL {
            assert_eq!(super::BinaryOp::parse(b.name()), Ok(b));
        }
    }
}

//! The elementwise op tables: every unary and binary op as one line (its name, dtype rule,
//! binding names, doc phrase and WGSL expression per dtype), from which the `UnaryOp` and
//! `BinaryOp` enums, their accessors and the op functions (`ops::exp`, `ops::add`, …) are made.

use super::{binary, binary_scalar, unary};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Counts the identifiers given (the length of the `ALL` arrays).
macro_rules! count {
    () => { 0 };
    ($head:ident $($tail:ident)*) => { 1 + count!($($tail)*) };
}

/// The unary op table: one line per op, in the style of candle's `unary_op!`. Each line gives
///
/// `Variant name rule ["python" "elixir" "julia"] "doc phrase" { dtype pattern => "WGSL", … }`
///
/// and produces the enum variant (with the doc comment above the line), its name and the
/// function `ops::name`, its dtype rule
/// (`any`: every numeric dtype; `float`: f32 and f16 only; `pred`: every dtype, bool included,
/// giving bool; `bits`: i32, u32 and bool, the dtype kept), its name in each binding and its WGSL
/// expression of `x0` per dtype (the `k_` functions are in shaders/elementwise_special.wgsl).
/// A binding name starting with `~` is written by hand in that binding (it takes extra
/// parameters or has other semantics there); `kiln-gen` lists it but writes no wrapper.
/// `kiln-gen` (gen/) reads these tables through [`UnaryOp::ALL`] and the accessors.
macro_rules! unary_ops {
    ($(
        $(#[$doc:meta])*
        $v:ident $f:ident $rule:ident [$py:literal $ex:literal $jl:literal] $phrase:literal
            { $($dt:pat => $wgsl:literal),+ $(,)? }
    )*) => {
        /// Unary elementwise ops. Floats follow IEEE 754, the Array API standard's special-case
        /// tables and numpy: NaN in gives NaN out, the sign of zero is kept where the standard
        /// keeps it (`neg`, `abs`, `sqrt(-0) = -0`, `sin`, `tanh`, `floor`, …), and ±inf give the
        /// limits. The special values are recognised from the bits, so they hold whatever a
        /// GPU's float compares assume. A GPU may read subnormal operands of arithmetic as ±0 and
        /// flush subnormal results to ±0 (WGSL allows both, the H100 does it); `neg` (a sign-bit
        /// flip), `exp`, `log`, `sqrt`, `rsqrt`, `sin`, `cos`, `tanh`, `relu`, `floor` and the
        /// activations read subnormal inputs from the bits and round subnormal results from the
        /// bits, exactly on every device (docs/elementwise-accuracy.md). No WGSL builtin whose
        /// precision is the implementation's (exp, log, sqrt, `/`, …) decides a result: the
        /// `k_` functions give the same bits on every adapter (lavapipe, SwiftShader), `sqrt` and
        /// `reciprocal` correctly rounded. f16 tensors are computed in f32 and rounded once on
        /// store (overflow gives ±inf).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $( $(#[$doc])* $v, )*
        }

        impl UnaryOp {
            /// Every unary op, in table order.
            pub const ALL: [UnaryOp; count!($($v)*)] = [$(UnaryOp::$v),*];

            pub fn name(self) -> &'static str {
                match self { $(UnaryOp::$v => stringify!($f),)* }
            }

            /// Whether the op is defined on integer tensors (the rest need a float dtype).
            pub fn allows_int(self) -> bool {
                match self { $(UnaryOp::$v => matches!(stringify!($rule), "any" | "pred" | "bits"),)* }
            }

            /// Whether the op is bitwise (`bits`: i32, u32 and bool only, the dtype kept).
            pub fn is_bitwise(self) -> bool {
                match self { $(UnaryOp::$v => stringify!($rule) == "bits",)* }
            }

            /// Whether the op is a predicate or logical op: bool out, every dtype (bool too) in.
            pub fn gives_bool(self) -> bool {
                match self { $(UnaryOp::$v => stringify!($rule) == "pred",)* }
            }

            /// Names in the bindings: `[python, elixir, julia]` (`~`: written by hand there).
            pub fn binding_names(self) -> [&'static str; 3] {
                match self { $(UnaryOp::$v => [$py, $ex, $jl],)* }
            }

            /// What the op computes, as the C header's doc comment says it ("Elementwise …").
            pub fn doc_phrase(self) -> &'static str {
                match self { $(UnaryOp::$v => $phrase,)* }
            }

            /// The WGSL for `op(x0)` (the `k_` functions are in shaders/elementwise_special.wgsl).
            pub(super) fn expr(self, dtype: DType) -> &'static str {
                #[allow(unused_imports)]
                use DType::*;
                match self { $(UnaryOp::$v => match dtype { $($dt => $wgsl,)+ },)* }
            }
        }

        $(
            #[doc = concat!("Elementwise `", stringify!($f), "`: ", $phrase, " (see [`UnaryOp::", stringify!($v), "`]).")]
            pub fn $f(x: &Tensor) -> Result<Tensor> {
                unary(UnaryOp::$v, x)
            }
        )*
    };
}

unary_ops! {
    /// `-x`; flips the sign bit (`-(+0) = -0`); integers wrap (`-i32::MIN = i32::MIN`).
    Neg neg any ["negative" "negate" "-"] "-x" { U32 => "0u - x0", I32 => "-x0", _ => "k_flip_sign(x0)" }
    /// `|x|`; clears the sign bit; integers wrap (`abs(i32::MIN) = i32::MIN`).
    Abs abs any ["abs" "abs" "abs"] "|x|" { U32 => "x0", _ => "abs(x0)" }
    /// `e^x`: `exp(±0) = 1`, `exp(-inf) = +0`, `exp(+inf) = +inf`, overflow gives +inf.
    Exp exp float ["exp" "exp" "exp"] "e^x" { _ => "k_exp(x0)" }
    /// Natural log: `log(±0) = -inf`, `log(x < 0) = NaN`, `log(+inf) = +inf`, `log(1) = +0`.
    Log log float ["log" "log" "log"] "natural logarithm ln(x)" { _ => "k_log(x0)" }
    /// `sqrt(±0) = ±0`, `sqrt(x < 0) = NaN`, `sqrt(+inf) = +inf`.
    Sqrt sqrt float ["sqrt" "sqrt" "sqrt"] "square root" { _ => "k_sqrt(x0)" }
    /// `1 / sqrt(x)`: `rsqrt(±0) = ±inf`, `rsqrt(x < 0) = NaN`, `rsqrt(+inf) = +0`.
    Rsqrt rsqrt float ["rsqrt" "rsqrt" "rsqrt"] "1 / sqrt(x)" { _ => "k_rsqrt(x0)" }
    /// `sin(±0) = ±0`, `sin(±inf) = NaN`. The argument is reduced exactly (Payne-Hanek in
    /// integer arithmetic, no builtin `sin`), so the error is the same at every magnitude: at
    /// most 1.2e-7 absolute measured on lavapipe and on an H100 from 2^-20 to `f32::MAX` (tested
    /// to 2.5e-7; docs/elementwise-accuracy.md); results always lie in [-1, 1].
    Sin sin float ["sin" "sin" "sin"] "sin(x)" { _ => "k_sin_cos(x0, false)" }
    /// `cos(±0) = 1`, `cos(±inf) = NaN`; accuracy as for [`UnaryOp::Sin`].
    Cos cos float ["cos" "cos" "cos"] "cos(x)" { _ => "k_sin_cos(x0, true)" }
    /// `sin(x) / cos(x)` from the exactly reduced [`UnaryOp::Sin`] and [`UnaryOp::Cos`] and the
    /// correctly rounded division: `tan(±0) = ±0`, `tan(±inf) = NaN`; within 4.2 ULP (2.9e-7
    /// relative) on lavapipe, next to the poles too.
    Tan tan float ["tan" "tan" "tan"] "tan(x)" { _ => "k_tan(x0)" }
    /// `tanh(±0) = ±0`, `tanh(±inf) = ±1`.
    Tanh tanh float ["tanh" "tanh" "tanh"] "tanh(x)" { _ => "k_tanh(x0)" }
    /// `1 / (1 + e^-x)`: `sigmoid(-inf) = +0`, `sigmoid(+inf) = 1`.
    Sigmoid sigmoid float ["sigmoid" "sigmoid" "sigmoid"] "logistic sigmoid 1 / (1 + e^-x)" { _ => "k_sigmoid(x0)" }
    /// numpy's `maximum(x, 0)`: `relu(NaN) = NaN`, `relu(-0) = +0`.
    Relu relu any ["relu" "relu" "relu"] "max(x, 0)" { U32 => "x0", I32 => "max(x0, 0)", _ => "k_relu(x0)" }
    /// GELU with the exact erf (erf to 1.5e-7 absolute). `gelu(-inf) = -0` (the limit; the
    /// formula would give `-inf * 0 = NaN`), `gelu(+inf) = +inf`, `gelu(±0) = ±0`.
    Gelu gelu float ["~gelu" "gelu" "gelu"] "GELU with the exact erf" { _ => "k_gelu(x0)" }
    /// GELU with the tanh approximation; special values as [`UnaryOp::Gelu`].
    GeluTanh gelu_tanh float ["gelu_tanh" "gelu_tanh" "gelu_tanh"] "GELU with the tanh approximation" { _ => "k_gelu_tanh(x0)" }
    /// `x / (1 + e^-x)`; special values as [`UnaryOp::Gelu`].
    Silu silu float ["silu" "silu" "silu"] "x * sigmoid(x)" { _ => "k_silu(x0)" }
    /// The largest whole number not above `x`, computed from the bits (exact on every device,
    /// subnormals included: `floor(-1e-45) = -1`): `floor(±0) = ±0`, `floor(±inf) = ±inf`,
    /// `floor(NaN) = NaN`, `floor(-0.5) = -1`, `floor(0.5) = +0`.
    Floor floor any ["floor" "floor" "floor"] "floor(x), the largest whole number not above x" { U32 | I32 => "x0", _ => "k_floor(x0)" }
    /// Arcsine (musl's asinf): `|x| > 1 -> NaN`, `asin(±0) = ±0`, `asin(±1) = ±pi/2`.
    Asin asin float ["asin" "asin" "asin"] "arcsine" { _ => "k_asin(x0)" }
    /// Arccosine (musl's acosf): `|x| > 1 -> NaN`, `acos(1) = +0`, `acos(-1) = pi`.
    Acos acos float ["acos" "acos" "acos"] "arccosine" { _ => "k_acos(x0)" }
    /// Arctangent (fdlibm's atanf): `atan(±0) = ±0`, `atan(±inf) = ±pi/2`.
    Atan atan float ["atan" "atan" "atan"] "arctangent" { _ => "k_atan(x0)" }
    /// `sinh(±0) = ±0`, `sinh(±inf) = ±inf`; exact exp reduction, so no overflow of `e^|x|`
    /// between 88.7 and 89.4 where `sinh` itself is still finite.
    Sinh sinh float ["sinh" "sinh" "sinh"] "hyperbolic sine" { _ => "k_sinh(x0)" }
    /// `cosh(±0) = 1`, `cosh(±inf) = +inf`.
    Cosh cosh float ["cosh" "cosh" "cosh"] "hyperbolic cosine" { _ => "k_cosh(x0)" }
    /// `asinh(±0) = ±0`, `asinh(±inf) = ±inf`.
    Asinh asinh float ["asinh" "asinh" "asinh"] "inverse hyperbolic sine" { _ => "k_asinh(x0)" }
    /// `acosh(x < 1) = NaN`, `acosh(1) = +0`, `acosh(+inf) = +inf`.
    Acosh acosh float ["acosh" "acosh" "acosh"] "inverse hyperbolic cosine" { _ => "k_acosh(x0)" }
    /// `atanh(|x| > 1) = NaN`, `atanh(±1) = ±inf`, `atanh(±0) = ±0`.
    Atanh atanh float ["atanh" "atanh" "atanh"] "inverse hyperbolic tangent" { _ => "k_atanh(x0)" }
    /// `ln(1 + x)`, accurate near 0 (musl's log1pf, not `log(1 + x)`): `log1p(±0) = ±0`,
    /// `log1p(-1) = -inf`, `log1p(x < -1) = NaN`, `log1p(+inf) = +inf`.
    Log1p log1p float ["log1p" "log1p" "log1p"] "ln(1 + x), accurate near 0" { _ => "k_log1p(x0)" }
    /// `e^x - 1`, accurate near 0: `expm1(±0) = ±0`, `expm1(-inf) = -1`, `expm1(+inf) = +inf`.
    Expm1 expm1 float ["expm1" "expm1" "expm1"] "e^x - 1, accurate near 0" { _ => "k_expm1(x0)" }
    /// Base-2 log, special values as [`UnaryOp::Log`]; exact for powers of two.
    Log2 log2 float ["log2" "log2" "log2"] "base-2 logarithm" { _ => "k_log_base(x0, false)" }
    /// Base-10 log, special values as [`UnaryOp::Log`].
    Log10 log10 float ["log10" "log10" "log10"] "base-10 logarithm" { _ => "k_log_base(x0, true)" }
    /// The smallest whole number not below `x`, from the bits (exact): `ceil(-0.5) = -0`,
    /// `ceil(±0) = ±0`, `ceil(±inf) = ±inf`; integers unchanged.
    Ceil ceil any ["ceil" "ceil" "ceil"] "ceil(x), the smallest whole number not below x" { U32 | I32 => "x0", _ => "k_ceil(x0)" }
    /// `x` rounded toward zero, from the bits (exact): `trunc(-0.5) = -0`; integers unchanged.
    Trunc trunc any ["trunc" "trunc" "trunc"] "x rounded toward zero" { U32 | I32 => "x0", _ => "k_trunc(x0)" }
    /// The nearest whole number, ties to even (the standard's and numpy's `round`, not C's):
    /// `round(2.5) = 2`, `round(-0.5) = -0`; integers unchanged.
    Round round any ["round" "round" "round"] "x rounded to the nearest whole number, ties to even" { U32 | I32 => "x0", _ => "k_round(x0)" }
    /// -1, 0 or 1 by the sign of `x` (numpy's `sign`): `sign(NaN) = NaN`, `sign(±0) = +0`.
    Sign sign any ["sign" "sign" "sign"] "the sign of x: -1, 0 or 1" { U32 => "select(0u, 1u, x0 > 0u)", I32 => "k_sign_i32(x0)", _ => "k_sign(x0)" }
    /// `1 / x` (IEEE: `1 / ±0 = ±inf`).
    Reciprocal reciprocal float ["reciprocal" "reciprocal" "inv"] "1 / x" { _ => "k_div(1.0, x0)" }
    /// `x * x`; integers wrap.
    Square square any ["square" "square" "abs2"] "x * x" { _ => "x0 * x0" }
    /// `!x` (bool): true where x is false or zero (numpy: any nonzero number, NaN included, is
    /// true; `-0` is false), read from the bits for floats.
    LogicalNot logical_not pred ["logical_not" "logical_not" "~!"] "logical not (x == 0, as bool)" {
        F32 | F16 => "(bitcast<u32>(x0) & 0x7fffffffu) == 0u",
        _ => "x0 == 0",
    }
    /// Whether x is NaN (bool), from the bits; false for integers and bool.
    IsNan isnan pred ["isnan" "is_nan" "isnan"] "whether x is NaN (bool)" {
        F32 | F16 => "(bitcast<u32>(x0) & 0x7fffffffu) > 0x7f800000u",
        _ => "false",
    }
    /// Whether x is +inf or -inf (bool); false for integers and bool.
    IsInf isinf pred ["isinf" "is_infinity" "isinf"] "whether x is +inf or -inf (bool)" {
        F32 | F16 => "(bitcast<u32>(x0) & 0x7fffffffu) == 0x7f800000u",
        _ => "false",
    }
    /// Whether x is neither NaN nor ±inf (bool); true for integers and bool.
    IsFinite isfinite pred ["isfinite" "is_finite" "isfinite"] "whether x is finite (bool)" {
        F32 | F16 => "(bitcast<u32>(x0) & 0x7fffffffu) < 0x7f800000u",
        _ => "true",
    }
    /// Whether the sign bit is set (bool): true for -0, -inf and a NaN with its sign bit set;
    /// `x < 0` for i32; false for u32 and bool.
    Signbit signbit pred ["signbit" "signbit" "signbit"] "whether the sign bit of x is set (bool)" {
        F32 | F16 => "(bitcast<u32>(x0) >> 31u) == 1u",
        I32 => "x0 < 0",
        _ => "false",
    }
    /// `~x`: every bit flipped (i32, u32); logical not for bool.
    BitwiseInvert bitwise_invert bits ["bitwise_invert" "bitwise_not" "~~"] "bitwise not ~x (bool: logical not)" {
        Bool => "1u - x0",
        _ => "~x0",
    }
}

impl UnaryOp {
    pub fn parse(name: &str) -> Result<UnaryOp> {
        Self::ALL
            .into_iter()
            .find(|op| op.name() == name)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown unary op {name:?}")))
    }
}

/// The binary op table: one line per op, as [`unary_ops!`]:
///
/// `Variant name name_scalar kind ["python" "elixir" "julia"] "doc phrase" { dtype pattern => "WGSL", … }`
///
/// `kind` is `arith` (the result has the operands' dtype), `float` (the same, for float
/// operands only), `compare` (bool), `logical` (bool; each operand is true where non-zero, as
/// numpy's `logical_*`), `bits` (i32, u32 and bool, the dtype kept) or `shift` (i32, u32). The WGSL is
/// `x0 OP x1` on operands of the dtype. Float comparisons, maximum and minimum order the
/// operands by their bits (NaN apart): WGSL's `!=` becomes an ordered compare in naga's SPIR-V
/// (NaN != NaN gave false), and a GPU that flushes subnormals compares them as 0.
macro_rules! binary_ops {
    ($(
        $(#[$doc:meta])*
        $v:ident $f:ident $fs:ident $kind:ident [$py:literal $ex:literal $jl:literal] $phrase:literal
            { $($dt:pat => $wgsl:literal),+ $(,)? }
    )*) => {
        /// Binary elementwise ops and comparisons (numpy broadcasting; both operands of one dtype).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $( $(#[$doc])* $v, )*
        }

        impl BinaryOp {
            /// Every binary op, in table order.
            pub const ALL: [BinaryOp; count!($($v)*)] = [$(BinaryOp::$v),*];

            pub fn name(self) -> &'static str {
                match self { $(BinaryOp::$v => stringify!($f),)* }
            }

            /// Comparisons give bool whatever the input dtype.
            pub fn is_comparison(self) -> bool {
                match self { $(BinaryOp::$v => stringify!($kind) == "compare",)* }
            }

            /// Logical ops (`logical_and`, …): bool out, any dtype in.
            pub fn is_logical(self) -> bool {
                match self { $(BinaryOp::$v => stringify!($kind) == "logical",)* }
            }

            /// Comparisons and logical ops give bool.
            pub fn gives_bool(self) -> bool {
                self.is_comparison() || self.is_logical()
            }

            /// Whether the op is defined on integer tensors (`float` ops need f32 or f16).
            pub fn allows_int(self) -> bool {
                match self { $(BinaryOp::$v => stringify!($kind) != "float",)* }
            }

            /// Whether the op is bitwise: `bits` (i32, u32 and bool) or `shift` (i32, u32).
            pub fn is_bitwise(self) -> bool {
                match self { $(BinaryOp::$v => matches!(stringify!($kind), "bits" | "shift"),)* }
            }

            /// Whether a bitwise op takes bool tensors too (`bits`).
            pub fn allows_bool_bits(self) -> bool {
                match self { $(BinaryOp::$v => stringify!($kind) == "bits",)* }
            }

            /// Names in the bindings: `[python, elixir, julia]` (`~`: written by hand there).
            pub fn binding_names(self) -> [&'static str; 3] {
                match self { $(BinaryOp::$v => [$py, $ex, $jl],)* }
            }

            /// What the op computes, as the C header's doc comment says it ("Elementwise …").
            pub fn doc_phrase(self) -> &'static str {
                match self { $(BinaryOp::$v => $phrase,)* }
            }

            /// The WGSL for `x0 OP x1` on operands of `dtype` (the `k_` functions are in
            /// shaders/elementwise_special.wgsl).
            pub(super) fn expr(self, dtype: DType) -> &'static str {
                #[allow(unused_imports)]
                use DType::*;
                match self { $(BinaryOp::$v => match dtype { $($dt => $wgsl,)+ },)* }
            }
        }

        $(
            #[doc = concat!("Elementwise ", $phrase, " with numpy broadcasting (see [`BinaryOp::", stringify!($v), "`]).")]
            pub fn $f(a: &Tensor, b: &Tensor) -> Result<Tensor> {
                binary(BinaryOp::$v, a, b)
            }
            #[doc = concat!("`", stringify!($f), "` with a scalar right operand.")]
            pub fn $fs(a: &Tensor, s: f64) -> Result<Tensor> {
                binary_scalar(BinaryOp::$v, a, s, false)
            }
        )*
    };
}

binary_ops! {
    Add add add_scalar arith ["add" "add" "+"] "a + b" { _ => "x0 + x1" }
    Sub sub sub_scalar arith ["subtract" "subtract" "-"] "a - b" { _ => "x0 - x1" }
    Mul mul mul_scalar arith ["multiply" "multiply" "*"] "a * b" { F32 | F16 => "k_mul(x0, x1)", _ => "x0 * x1" }
    /// Floats: IEEE division, correctly rounded on every device (subnormals included), as a
    /// CPU gives it (`x / ±0 = ±inf`, `0 / 0 = NaN`). Integers: numpy's floor
    /// division `//`, rounding toward -inf (`-7 div 2 = -4`, `7 div -2 = -4`); `x div 0 = 0`
    /// (numpy's result, which also warns) and `i32::MIN div -1 = i32::MIN` (wraps, as numpy).
    Div div div_scalar arith ["~divide" "divide" "~/"] "a / b (integers: floor division as numpy's //, x / 0 = 0)" {
        I32 => "k_floor_div_i32(x0, x1)",
        U32 => "k_floor_div_u32(x0, x1)",
        _ => "k_div(x0, x1)",
    }
    /// Floats: C99 / IEEE 754 `pow`, every special case of the Array API standard:
    /// `x^±0 = 1` and `1^y = 1` even for NaN; a negative base with a whole exponent gives the
    /// signed power (`(-2)^3 = -8`, `(-2)^2 = 4`), with a fractional one NaN; `(±0)^y` is
    /// ±0 / +0 for y > 0 and ±inf / +inf for y < 0 (the sign only for odd y); `(-1)^±inf = 1`;
    /// `|x| < 1` or `> 1` against ±inf give +0 or +inf; `(±inf)^y` likewise. Whole exponents
    /// with |y| <= 32 are computed by repeated squaring (exact where the result is), others as
    /// the GPU's `pow(|x|, y)`. Integers (i32, u32): numpy's integer power, wrapping modulo
    /// 2^32 (`3^40` as numpy), `0^0 = 1`; a negative i32 exponent, which numpy refuses, gives
    /// the integer part of `1 / x^|y|`: 1 for x = 1, ±1 for x = -1, else 0 (0 for x = 0 too).
    Pow pow pow_scalar arith ["pow" "pow" "~^"] "a raised to b" {
        I32 => "k_pow_i32(x0, x1)",
        U32 => "k_pow_u32(x0, x1)",
        _ => "k_pow(x0, x1)",
    }
    /// numpy's `maximum`: NaN if either operand is NaN; on a tie (`-0` vs `+0`) the second.
    Maximum maximum maximum_scalar arith ["maximum" "maximum" "max"] "the larger of a and b" { F32 | F16 => "k_max(x0, x1)", _ => "max(x0, x1)" }
    /// numpy's `minimum`: NaN if either operand is NaN; on a tie the second.
    Minimum minimum minimum_scalar arith ["minimum" "minimum" "min"] "the smaller of a and b" { F32 | F16 => "k_min(x0, x1)", _ => "min(x0, x1)" }
    /// `==` (bool): false for NaN; `-0 == +0`.
    Eq eq eq_scalar compare ["equal" "equal" "=="] "a == b" { F32 | F16 => "select(0u, 1u, k_eq(x0, x1))", _ => "select(0u, 1u, x0 == x1)" }
    /// `!=`: true when either operand is NaN.
    Ne ne ne_scalar compare ["not_equal" "not_equal" "!="] "a != b" { F32 | F16 => "select(1u, 0u, k_eq(x0, x1))", _ => "select(0u, 1u, x0 != x1)" }
    /// `<` (false for NaN, like every ordered comparison).
    Lt lt lt_scalar compare ["less" "less" "<"] "a < b" { F32 | F16 => "select(0u, 1u, k_lt(x0, x1))", _ => "select(0u, 1u, x0 < x1)" }
    Le le le_scalar compare ["less_equal" "less_equal" "<="] "a <= b" { F32 | F16 => "select(0u, 1u, k_le(x0, x1))", _ => "select(0u, 1u, x0 <= x1)" }
    Gt gt gt_scalar compare ["greater" "greater" ">"] "a > b" { F32 | F16 => "select(0u, 1u, k_lt(x1, x0))", _ => "select(0u, 1u, x0 > x1)" }
    Ge ge ge_scalar compare ["greater_equal" "greater_equal" ">="] "a >= b" { F32 | F16 => "select(0u, 1u, k_le(x1, x0))", _ => "select(0u, 1u, x0 >= x1)" }
    /// Both operands true (non-zero; NaN is true, ±0 false), as bool.
    LogicalAnd logical_and logical_and_scalar logical ["logical_and" "logical_and" "~&"] "logical and of a and b" {
        F32 | F16 => "(bitcast<u32>(x0) & 0x7fffffffu) != 0u && (bitcast<u32>(x1) & 0x7fffffffu) != 0u",
        _ => "x0 != 0 && x1 != 0",
    }
    /// Either operand true (non-zero), as bool.
    LogicalOr logical_or logical_or_scalar logical ["logical_or" "logical_or" "~|"] "logical or of a and b" {
        F32 | F16 => "(bitcast<u32>(x0) & 0x7fffffffu) != 0u || (bitcast<u32>(x1) & 0x7fffffffu) != 0u",
        _ => "x0 != 0 || x1 != 0",
    }
    /// Exactly one operand true (non-zero), as bool.
    LogicalXor logical_xor logical_xor_scalar logical ["logical_xor" "logical_xor" "~xor"] "logical exclusive or of a and b" {
        F32 | F16 => "((bitcast<u32>(x0) & 0x7fffffffu) != 0u) != ((bitcast<u32>(x1) & 0x7fffffffu) != 0u)",
        _ => "(x0 != 0) != (x1 != 0)",
    }
    /// `atan2(a, b)`, the angle of the point (b, a) (fdlibm's atan2f, every special case of C99
    /// and the standard: `atan2(±0, -0) = ±pi`, `atan2(±inf, -inf) = ±3pi/4`, …). Float only.
    Atan2 atan2 atan2_scalar float ["atan2" "atan2" "atan"] "atan2(a, b), the angle of the point (b, a)" { _ => "k_atan2(x0, x1)" }
    /// `sqrt(a^2 + b^2)` without overflow or underflow in between; `hypot(±inf, NaN) = +inf`.
    Hypot hypot hypot_scalar float ["hypot" "hypot" "hypot"] "sqrt(a^2 + b^2) without overflow" { _ => "k_hypot(x0, x1)" }
    /// `log(e^a + e^b)` (numpy's): NaN with a NaN, `+inf` with a `+inf`, the other operand
    /// against `-inf`.
    Logaddexp logaddexp logaddexp_scalar float ["logaddexp" "logaddexp" "logaddexp"] "log(e^a + e^b)" { _ => "k_logaddexp(x0, x1)" }
    /// `|a|` with the sign bit of `b` (NaN's sign bit too).
    Copysign copysign copysign_scalar float ["copysign" "copysign" "copysign"] "|a| with the sign of b" { _ => "k_with_sign(x0, x1)" }
    /// The next value of the dtype after `a` toward `b`, from the bits (f16 steps for f16):
    /// NaN with a NaN, `b` when `a == b`, the smallest subnormal of `b`'s sign from ±0.
    Nextafter nextafter nextafter_scalar float ["nextafter" "nextafter" "nextafter"] "the next representable value after a toward b" {
        F16 => "k_nextafter_f16(x0, x1)",
        _ => "k_nextafter(x0, x1)",
    }
    /// numpy's `remainder` (Python's `%`): the sign of the divisor. Floats: from the exact
    /// `fmod` (integer shift-and-subtract, so `1e30 % 7` is right); NaN for a NaN, an infinite
    /// `a` or a zero `b`; a zero result takes `b`'s sign; finite `a` against ±inf gives `a` or
    /// ±inf by the signs. Integers: `x % 0 = 0`, as numpy.
    Remainder remainder remainder_scalar arith ["~remainder" "mod" "mod"] "a mod b with the sign of b (numpy's remainder, Python's %)" {
        I32 => "k_remainder_i32(x0, x1)",
        U32 => "k_remainder_u32(x0, x1)",
        _ => "k_remainder(x0, x1)",
    }
    /// numpy's `floor_divide` (Python's `//`). Floats: numpy's `npy_divmod` in f32, from the
    /// exact `fmod`: `x // ±0 = x / ±0`, NaN for a NaN or an infinite `a`, `-1 // inf = -1`,
    /// `1 // 0.1 = 9` (numpy's, not `floor(1 / 0.1) = 10`). Integers: as [`BinaryOp::Div`].
    FloorDivide floor_divide floor_divide_scalar arith ["~floor_divide" "floor_div" "fld"] "floor(a / b) (numpy's floor_divide, Python's //)" {
        I32 => "k_floor_div_i32(x0, x1)",
        U32 => "k_floor_div_u32(x0, x1)",
        _ => "k_floor_divide(x0, x1)",
    }
    // The bitwise ops (the Array API's, numpy's): i32 and u32, and bool for and / or / xor.
    /// `a & b`.
    BitwiseAnd bitwise_and bitwise_and_scalar bits ["bitwise_and" "bitwise_and" "&"] "bitwise and a & b" { _ => "x0 & x1" }
    /// `a | b`.
    BitwiseOr bitwise_or bitwise_or_scalar bits ["bitwise_or" "bitwise_or" "|"] "bitwise or a | b" { _ => "x0 | x1" }
    /// `a ^ b`.
    BitwiseXor bitwise_xor bitwise_xor_scalar bits ["bitwise_xor" "bitwise_xor" "xor"] "bitwise exclusive or a ^ b" { _ => "x0 ^ x1" }
    /// `a << b`, numpy's: a count outside [0, 32) (negative included) gives 0 (WGSL would take
    /// it modulo 32).
    BitwiseLeftShift bitwise_left_shift bitwise_left_shift_scalar shift ["bitwise_left_shift" "left_shift" "<<"] "a shifted left by b bits (0 for b outside [0, 32))" {
        I32 => "select(0i, x0 << u32(x1), u32(x1) < 32u)",
        _ => "select(0u, x0 << u32(x1), u32(x1) < 32u)",
    }
    /// `a >> b`, arithmetic for i32 (the sign bit fills in), numpy's: a count outside [0, 32)
    /// gives -1 for a negative i32, else 0.
    BitwiseRightShift bitwise_right_shift bitwise_right_shift_scalar shift ["bitwise_right_shift" "right_shift" ">>"] "a shifted right by b bits, arithmetic for i32 (all sign bits for b outside [0, 32))" {
        I32 => "select(select(0i, -1i, x0 < 0i), x0 >> u32(x1), u32(x1) < 32u)",
        _ => "select(0u, x0 >> u32(x1), u32(x1) < 32u)",
    }
}

impl BinaryOp {
    pub fn parse(name: &str) -> Result<BinaryOp> {
        Self::ALL
            .into_iter()
            .find(|op| op.name() == name)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown binary op {name:?}")))
    }
}

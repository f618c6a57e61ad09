//! The op library. Each family is one module with its kernels under `shaders/` and its CPU
//! reference under `reference/`.

pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod random;
pub mod reduce;

pub use attention::*;
pub use conv::*;
pub use elementwise::*;
pub use matmul::*;
pub use movement::*;
pub use norm::*;
pub use random::*;
pub use reduce::*;

/// Every op of the shared API, by its name in every binding (C adds the `kiln_` prefix, Elixir
/// and Julia follow their own casing). The conformance suite checks each binding against it.
pub const OP_NAMES: &[&str] = &[
    // creation and random
    "zeros", "ones", "full", "arange", "random_uniform", "random_normal",
    // unary
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu",
    // binary and comparisons
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "where", "cast",
    // linear algebra, reductions, normalisation
    "matmul", "sum", "mean", "max", "min", "var", "argmax", "argmin",
    "softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm",
    // convolution and pooling
    "conv2d", "max_pool2d", "avg_pool2d",
    // data movement
    "reshape", "permute", "transpose", "concat", "slice", "index_select", "gather",
    // nn
    "embedding", "rope", "attention",
];

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
mod quant_rope;
pub mod random;
pub mod reduce;
pub mod sample;
pub mod scan;
pub mod search;
pub mod sets;
pub mod sort;
mod table;

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
pub use table::{op_names, op_table, Arg, Dflt, OpInfo, Out, Ty};

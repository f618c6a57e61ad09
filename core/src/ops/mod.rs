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

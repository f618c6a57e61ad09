//! CPU references for every op, in f64 over plain slices. They are written from the op's
//! definition (numpy semantics), not from the kernels, and are what the tests and `kiln demo`
//! check the GPU against.

pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod linalg;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod quant;
pub mod random;
pub mod reduce;
pub mod scan;
pub mod sort;

pub use crate::numeric::round_to;

/// Index into an input of shape `in_shape` for element `i` of the broadcast output `out`.
pub fn broadcast_index(i: usize, out: &[usize], in_shape: &[usize]) -> usize {
    let off = out.len() - in_shape.len();
    let mut rem = i;
    let mut idx = 0;
    let mut stride = 1;
    for d in (0..out.len()).rev() {
        let c = rem % out[d];
        rem /= out[d];
        if d >= off {
            let n = in_shape[d - off];
            if n != 1 {
                idx += c * stride;
            }
            stride *= n;
        }
    }
    idx
}

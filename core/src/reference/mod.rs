//! CPU references for every op, in f64 over plain slices. They are written from the op's
//! definition (numpy semantics), not from the kernels, and are what the tests and `kiln demo`
//! check the GPU against.

pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod random;
pub mod reduce;

use crate::DType;

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

/// Rounds an f64 to what `dtype` can hold (f32 / f16 rounding, integer truncation).
pub fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::I32 => v as i32 as f64,
        DType::U32 => v as u32 as f64,
    }
}

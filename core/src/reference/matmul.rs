//! CPU reference for `matmul` (numpy semantics), in f64 over plain row-major slices.

use crate::shape::broadcast_shapes;
pub use crate::shape::matmul_shape;
use crate::Result;

/// numpy `matmul`: 1-D operands promoted (and their dimension dropped from the result), batch
/// dimensions broadcast. Sums in f64, in k order.
pub fn matmul(a: &[f64], a_shape: &[usize], b: &[f64], b_shape: &[usize]) -> Result<(Vec<f64>, Vec<usize>)> {
    let out_shape = matmul_shape(a_shape, b_shape)?;
    let a2: Vec<usize> = if a_shape.len() == 1 { vec![1, a_shape[0]] } else { a_shape.to_vec() };
    let b2: Vec<usize> = if b_shape.len() == 1 { vec![b_shape[0], 1] } else { b_shape.to_vec() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let n = b2[b2.len() - 1];
    let ab = &a2[..a2.len() - 2];
    let bb = &b2[..b2.len() - 2];
    let batch_shape = broadcast_shapes(ab, bb)?;
    let batch: usize = batch_shape.iter().product();
    let mut out = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let ai = super::broadcast_index(bi, &batch_shape, ab);
        let bj = super::broadcast_index(bi, &batch_shape, bb);
        let am = &a[ai * m * k..(ai + 1) * m * k];
        let bm = &b[bj * k * n..(bj + 1) * k * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for l in 0..k {
                    s += am[i * k + l] * bm[l * n + j];
                }
                out[(bi * m + i) * n + j] = s;
            }
        }
    }
    Ok((out, out_shape))
}

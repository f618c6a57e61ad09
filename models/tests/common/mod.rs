//! Helpers shared by kiln-models' integration tests.

/// Per row of `dim` values: (cosine, max abs difference) of `got` against `want`, in f64.
pub fn compare(got: &[f32], want: &[f32], dim: usize) -> Vec<(f64, f64)> {
    got.chunks(dim)
        .zip(want.chunks(dim))
        .map(|(g, w)| {
            let dot: f64 = g.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum();
            let ng: f64 = g.iter().map(|&a| (a as f64).powi(2)).sum::<f64>().sqrt();
            let nw: f64 = w.iter().map(|&a| (a as f64).powi(2)).sum::<f64>().sqrt();
            let maxd = g.iter().zip(w).map(|(&a, &b)| (a as f64 - b as f64).abs()).fold(0.0, f64::max);
            (dot / (ng * nw), maxd)
        })
        .collect()
}

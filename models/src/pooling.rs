//! sentence-transformers' Pooling module on the GPU: the encoder's token embeddings [B, L, D]
//! of a right-padded batch to one vector per text, each [`PoolingMode`] in turn, concatenated in
//! order ([B, modes * D]), as its `Pooling.forward` does.

use crate::config::PoolingMode;
use crate::error::Result;
use kiln_core::{ops, Tensor};

/// `hidden` [B, L, D] f32; `lens[r]` real tokens of row r (at least 1: every text has its
/// special tokens).
pub fn pool(hidden: &Tensor, lens: &[usize], modes: &[PoolingMode]) -> Result<Tensor> {
    let device = hidden.device().clone();
    let (b, l) = (hidden.shape()[0], hidden.shape()[1]);
    let mask: Vec<f32> = (0..b * l).map(|i| if i % l < lens[i / l] { 1.0 } else { 0.0 }).collect();
    // sentence-transformers divides by the mask sum clamped at 1e-9.
    let counts: Vec<f32> = lens.iter().map(|&n| (n as f32).max(1e-9)).collect();
    let mut parts = Vec::with_capacity(modes.len());
    for mode in modes {
        // Modes that are a weighted sum over tokens, then a division: (weights [B, L], divisors [B]).
        let weighted = |weights: Vec<f32>, divisors: Vec<f32>| -> Result<Tensor> {
            let w = Tensor::from_slice_on(&device, &weights, &[b, l, 1])?;
            let summed = ops::sum(&ops::mul(hidden, &w)?, Some(&[1]), false)?; // [B, D]
            Ok(ops::div(&summed, &Tensor::from_slice_on(&device, &divisors, &[b, 1])?)?)
        };
        let part = match mode {
            PoolingMode::Mean => weighted(mask.clone(), counts.clone())?,
            PoolingMode::MeanSqrtLen => weighted(mask.clone(), counts.iter().map(|c| c.sqrt()).collect())?,
            PoolingMode::WeightedMean => {
                // Weights 1, 2, ... by position (right padding: no pad offset to take away).
                let w: Vec<f32> = mask.iter().enumerate().map(|(i, m)| m * ((i % l) + 1) as f32).collect();
                let sums = w.chunks(l.max(1)).map(|r| r.iter().sum::<f32>().max(1e-9)).collect();
                weighted(w, sums)?
            }
            // One-hot weights: h * 1 plus zeros is h exactly.
            PoolingMode::LastToken => {
                let w = (0..b * l).map(|i| if i % l + 1 == lens[i / l] { 1.0 } else { 0.0 }).collect();
                weighted(w, vec![1.0; b])?
            }
            PoolingMode::Cls => ops::slice(hidden, 1, 0, 1, 1)?.reshape(&[b as isize, -1])?,
            PoolingMode::Max => {
                // masked_fill(-inf) then max: padding never wins.
                let fill: Vec<f32> = mask.iter().map(|&m| if m > 0.0 { 0.0 } else { f32::NEG_INFINITY }).collect();
                let fill = Tensor::from_slice_on(&device, &fill, &[b, l, 1])?;
                ops::max(&ops::add(hidden, &fill)?, Some(&[1]), false)?
            }
        };
        parts.push(part);
    }
    Ok(if parts.len() == 1 { parts.pop().unwrap() } else { ops::concat(&parts.iter().collect::<Vec<_>>(), 1)? })
}

/// torch.nn.functional.normalize over the last axis: x / max(||x||, 1e-12), each row of `x`
/// [B, D] f32 (sentence embeddings, CLIP's image and text embeddings).
pub fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    let norm = ops::sqrt(&ops::sum(&ops::mul(x, x)?, Some(&[-1]), true)?)?;
    Ok(ops::div(x, &ops::maximum_scalar(&norm, 1e-12)?)?)
}

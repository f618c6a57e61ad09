//! CPU reference for scaled dot-product attention, in f64 over plain row-major slices.

use crate::shape::broadcast_shapes;
use crate::{Error, Result};

/// softmax(q kᵀ · scale, masked) v for q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv]; the
/// leading dimensions broadcast. `causal` masks key j > query i (top-left aligned, as PyTorch's
/// `is_causal`). `scale` defaults to 1/sqrt(D). A row with no key gives zeros.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &[f64],
    q_shape: &[usize],
    k: &[f64],
    k_shape: &[usize],
    v: &[f64],
    v_shape: &[usize],
    causal: bool,
    scale: Option<f64>,
) -> Result<(Vec<f64>, Vec<usize>)> {
    attention_with_mask(q, q_shape, k, k_shape, v, v_shape, None, causal, scale)
}

/// `attention` with an additive mask (data and shape) broadcast to [..., Lq, Lk] and added to
/// the scaled scores. A row whose keys are all masked (every score -inf, or none left by
/// `causal`) gives zeros.
#[allow(clippy::too_many_arguments)]
pub fn attention_with_mask(
    q: &[f64],
    q_shape: &[usize],
    k: &[f64],
    k_shape: &[usize],
    v: &[f64],
    v_shape: &[usize],
    mask: Option<(&[f64], &[usize])>,
    causal: bool,
    scale: Option<f64>,
) -> Result<(Vec<f64>, Vec<usize>)> {
    attention_scored(q, q_shape, k, k_shape, v, v_shape, mask, causal, scale, None, None)
}

/// `attention_with_mask` with Gemma 2's score changes (kiln-core's `ops::ScoreOptions`):
/// `softcap` replaces each scaled score s by cap * tanh(s / cap) before the mask is added, and
/// `window` keeps only the last `window` of the keys a query would otherwise see (under
/// `causal`, keys i - window + 1 ..= i of query i).
#[allow(clippy::too_many_arguments)]
pub fn attention_scored(
    q: &[f64],
    q_shape: &[usize],
    k: &[f64],
    k_shape: &[usize],
    v: &[f64],
    v_shape: &[usize],
    mask: Option<(&[f64], &[usize])>,
    causal: bool,
    scale: Option<f64>,
    softcap: Option<f64>,
    window: Option<usize>,
) -> Result<(Vec<f64>, Vec<usize>)> {
    if q_shape.len() < 2 || k_shape.len() < 2 || v_shape.len() < 2 {
        return Err(Error::ShapeMismatch("attention: q, k and v need at least 2 dimensions".into()));
    }
    let (lq, d) = (q_shape[q_shape.len() - 2], q_shape[q_shape.len() - 1]);
    let (lk, dk) = (k_shape[k_shape.len() - 2], k_shape[k_shape.len() - 1]);
    let (lv, dv) = (v_shape[v_shape.len() - 2], v_shape[v_shape.len() - 1]);
    if d != dk || lk != lv {
        return Err(Error::ShapeMismatch(format!(
            "attention: q {q_shape:?}, k {k_shape:?}, v {v_shape:?} do not agree"
        )));
    }
    let qb = &q_shape[..q_shape.len() - 2];
    let kb = &k_shape[..k_shape.len() - 2];
    let vb = &v_shape[..v_shape.len() - 2];
    let batch_shape = broadcast_shapes(&broadcast_shapes(qb, kb)?, vb)?;
    let batch: usize = batch_shape.iter().product();
    let mut scores_shape = batch_shape.clone();
    scores_shape.extend([lq, lk]);
    if let Some((_, ms)) = mask {
        if ms.len() > scores_shape.len() || broadcast_shapes(ms, &scores_shape)? != scores_shape {
            return Err(Error::ShapeMismatch(format!("attention: mask {ms:?} does not broadcast to {scores_shape:?}")));
        }
    }
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let mut out = vec![0.0; batch * lq * dv];
    let mut scores = vec![0.0; lk];
    for bi in 0..batch {
        let qo = super::broadcast_index(bi, &batch_shape, qb) * lq * d;
        let ko = super::broadcast_index(bi, &batch_shape, kb) * lk * d;
        let vo = super::broadcast_index(bi, &batch_shape, vb) * lk * dv;
        for i in 0..lq {
            let nk = if causal { lk.min(i + 1) } else { lk };
            let first = window.map_or(0, |w| nk.saturating_sub(w));
            let mut mx = f64::NEG_INFINITY;
            for j in 0..nk {
                if j < first {
                    scores[j] = f64::NEG_INFINITY;
                    continue;
                }
                let mut s = 0.0;
                for t in 0..d {
                    s += q[qo + i * d + t] * k[ko + j * d + t];
                }
                scores[j] = s * scale;
                if let Some(cap) = softcap {
                    scores[j] = cap * (scores[j] / cap).tanh();
                }
                if let Some((m, ms)) = mask {
                    scores[j] += m[super::broadcast_index((bi * lq + i) * lk + j, &scores_shape, ms)];
                }
                mx = mx.max(scores[j]);
            }
            if mx == f64::NEG_INFINITY {
                continue; // every key masked: zeros
            }
            let mut sum = 0.0;
            for s in scores.iter_mut().take(nk) {
                *s = (*s - mx).exp();
                sum += *s;
            }
            let o = &mut out[(bi * lq + i) * dv..(bi * lq + i + 1) * dv];
            for j in 0..nk {
                let p = scores[j] / sum;
                for t in 0..dv {
                    o[t] += p * v[vo + j * dv + t];
                }
            }
        }
    }
    let mut shape = batch_shape;
    shape.push(lq);
    shape.push(dv);
    Ok((out, shape))
}

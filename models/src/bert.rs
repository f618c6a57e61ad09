//! A BERT encoder (Hugging Face `BertModel`, absolute positions, erf GELU) from kiln-core ops.
//!
//! The padding mask is an additive bias (0 for a real key, -1e30 for padding) broadcast over
//! heads and queries, given to `ops::attention_with_mask` (added to the scaled scores before the
//! softmax, inside the fused kernel).

use crate::config::BertConfig;
use crate::error::Result;
use crate::weights::Checkpoint;
use kiln_core::{ops, DType, Tensor};

/// What a masked key adds to its score. exp(-1e30 - max) is 0 in f32, as with PyTorch's
/// finfo.min; every row keeps at least one real key ([CLS]), so no row is all-masked.
const MASK_BIAS: f32 = -1e30;

struct Layer {
    /// [D, 3D]: query, key and value weights side by side, transposed once at load so that
    /// x [N, D] @ w gives q | k | v.
    qkv_w: Tensor,
    qkv_b: Tensor,
    out_w: Tensor,
    out_b: Tensor,
    ln1_w: Tensor,
    ln1_b: Tensor,
    ff1_w: Tensor,
    ff1_b: Tensor,
    ff2_w: Tensor,
    ff2_b: Tensor,
    ln2_w: Tensor,
    ln2_b: Tensor,
}

pub struct Bert {
    pub config: BertConfig,
    /// The dtype of the weights and activations: f32, or f16 (cast once at load; matmuls,
    /// norms and softmax accumulate in f32 inside the kernels either way).
    pub dtype: DType,
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    emb_ln_w: Tensor,
    emb_ln_b: Tensor,
    layers: Vec<Layer>,
}

/// A PyTorch Linear weight [out, in] as [in, out], so that `matmul(x, w)` is `x @ W.T`.
fn linear(ck: &Checkpoint, name: &str, out: usize, inp: usize) -> Result<Tensor> {
    let w = ck.get(&format!("{name}.weight"), &[out, inp])?;
    Ok(ops::transpose(&w, 0, 1)?)
}

impl Bert {
    /// The encoder's weights from `ck`, uploaded as `dtype` (f32 or f16; f16 needs an adapter
    /// with SHADER_F16).
    pub fn load(
        config: BertConfig,
        ck: &Checkpoint,
        dtype: DType,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Bert> {
        config.check()?;
        let (d, f) = (config.hidden_size, config.intermediate_size);
        let cast = |t: Tensor| -> Result<Tensor> { Ok(if dtype == DType::F32 { t } else { ops::cast(&t, dtype)? }) };
        let get = |name: &str, shape: &[usize]| cast(ck.get(name, shape)?);
        let lin = |name: &str, out: usize, inp: usize| cast(linear(ck, name, out, inp)?);
        let word = get("embeddings.word_embeddings.weight", &[config.vocab_size, d])?;
        let position = get("embeddings.position_embeddings.weight", &[config.max_position_embeddings, d])?;
        let token_type = get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, d])?;
        let emb_ln_w = get("embeddings.LayerNorm.weight", &[d])?;
        let emb_ln_b = get("embeddings.LayerNorm.bias", &[d])?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            progress(i, config.num_hidden_layers);
            let p = format!("encoder.layer.{i}");
            let a = format!("{p}.attention.self");
            let qkv_w = ops::concat(
                &[
                    &lin(&format!("{a}.query"), d, d)?,
                    &lin(&format!("{a}.key"), d, d)?,
                    &lin(&format!("{a}.value"), d, d)?,
                ],
                1,
            )?;
            let qkv_b = ops::concat(
                &[
                    &get(&format!("{a}.query.bias"), &[d])?,
                    &get(&format!("{a}.key.bias"), &[d])?,
                    &get(&format!("{a}.value.bias"), &[d])?,
                ],
                0,
            )?;
            layers.push(Layer {
                qkv_w,
                qkv_b,
                out_w: lin(&format!("{p}.attention.output.dense"), d, d)?,
                out_b: get(&format!("{p}.attention.output.dense.bias"), &[d])?,
                ln1_w: get(&format!("{p}.attention.output.LayerNorm.weight"), &[d])?,
                ln1_b: get(&format!("{p}.attention.output.LayerNorm.bias"), &[d])?,
                ff1_w: lin(&format!("{p}.intermediate.dense"), f, d)?,
                ff1_b: get(&format!("{p}.intermediate.dense.bias"), &[f])?,
                ff2_w: lin(&format!("{p}.output.dense"), d, f)?,
                ff2_b: get(&format!("{p}.output.dense.bias"), &[d])?,
                ln2_w: get(&format!("{p}.output.LayerNorm.weight"), &[d])?,
                ln2_b: get(&format!("{p}.output.LayerNorm.bias"), &[d])?,
            });
        }
        progress(config.num_hidden_layers, config.num_hidden_layers);
        Ok(Bert { config, dtype, word, position, token_type, emb_ln_w, emb_ln_b, layers })
    }

    /// The last hidden state [B, L, D] of a padded batch: `ids` and `type_ids` [B, L] (u32),
    /// `mask` [B * L] (1 real token, 0 padding; host side).
    pub fn forward(&self, ids: &Tensor, type_ids: &Tensor, mask: &[f32]) -> Result<Tensor> {
        self.forward_marked(ids, type_ids, mask, &mut |_| Ok(()))
    }

    /// [`forward`](Self::forward), calling `mark(step)` after each step has been recorded (a
    /// profiler times the GPU work between two marks; `kiln bench`'s embed breakdown does).
    pub fn forward_marked(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &[f32],
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        let c = &self.config;
        let (b, l) = (ids.shape()[0], ids.shape()[1]);
        let (d, h) = (c.hidden_size, c.num_attention_heads);
        let dh = d / h;
        let eps = c.layer_norm_eps as f32;
        let n = b * l;

        let positions = ops::slice(&self.position, 0, 0, l as isize, 1)?; // [L, D]
        let x = ops::add(&ops::embedding(&self.word, ids)?, &positions)?;
        let x = ops::add(&x, &ops::embedding(&self.token_type, type_ids)?)?;
        let mut x =
            ops::layer_norm(&x, Some(&self.emb_ln_w), Some(&self.emb_ln_b), eps)?.reshape(&[n as isize, d as isize])?;
        mark("embeddings + layer_norm")?;

        let bias: Vec<f32> = mask.iter().map(|&m| if m > 0.0 { 0.0 } else { MASK_BIAS }).collect();
        // -1e30 becomes -inf in f16: still exp(-inf) = 0 after the row max is taken.
        let bias = Tensor::from_slice_on(ids.device(), &bias, &[b, 1, 1, l])?;
        let bias = if self.dtype == DType::F32 { bias } else { ops::cast(&bias, self.dtype)? };
        let scale = 1.0 / (dh as f64).sqrt();
        let (bi, li, hi, dhi) = (b as isize, l as isize, h as isize, dh as isize);

        for layer in &self.layers {
            // [N, 3D] -> [B, L, 3, H, dh] -> [3, B, H, L, dh]
            let qkv = ops::add(&ops::matmul(&x, &layer.qkv_w)?, &layer.qkv_b)?;
            mark("qkv matmul + bias")?;
            let qkv = ops::permute(&qkv.reshape(&[bi, li, 3, hi, dhi])?, &[2, 0, 3, 1, 4])?;
            let part =
                |i: isize| -> Result<Tensor> { Ok(ops::slice(&qkv, 0, i, i + 1, 1)?.reshape(&[bi, hi, li, dhi])?) };
            let (q, k, v) = (part(0)?, part(1)?, part(2)?);
            mark("qkv split (permute, slices)")?;
            // One fused kernel: q kᵀ / sqrt(dh) + mask bias, softmax, p v, without the [B, H, L, L]
            // scores in memory (flash attention; the matmul + softmax + matmul it replaced spent
            // 15.5 of 48 ms of a 256 x 128 batch on the H100 and held ~800 MiB of scores).
            let ctx = ops::attention_with_mask(&q, &k, &v, Some(&bias), false, Some(scale as f32))?;
            let ctx = ops::permute(&ctx, &[0, 2, 1, 3])?.reshape(&[n as isize, d as isize])?;
            mark("attention (flash, masked) + permute")?;
            let attn = ops::add(&ops::add(&ops::matmul(&ctx, &layer.out_w)?, &layer.out_b)?, &x)?;
            let x1 = ops::layer_norm(&attn, Some(&layer.ln1_w), Some(&layer.ln1_b), eps)?;
            mark("out matmul + bias + residual + layer_norm")?;
            let ff = ops::gelu(&ops::add(&ops::matmul(&x1, &layer.ff1_w)?, &layer.ff1_b)?)?;
            mark("ff1 matmul + bias + gelu")?;
            let ff = ops::add(&ops::add(&ops::matmul(&ff, &layer.ff2_w)?, &layer.ff2_b)?, &x1)?;
            x = ops::layer_norm(&ff, Some(&layer.ln2_w), Some(&layer.ln2_b), eps)?;
            mark("ff2 matmul + bias + residual + layer_norm")?;
        }
        Ok(x.reshape(&[bi, li, d as isize])?)
    }
}

//! A BERT-family encoder from kiln-core ops: Hugging Face's `BertModel`, `RobertaModel` /
//! `XLMRobertaModel` and `MPNetModel` ([`Family`]), which share one layer (post-norm attention
//! and feed-forward blocks, erf GELU) and differ in weight names, position ids, token types and
//! MPNet's relative position bias.
//!
//! The padding mask is an additive bias (0 for a real key, -1e30 for padding) broadcast over
//! heads and queries, given to `ops::attention_with_mask` (added to the scaled scores before the
//! softmax, inside the fused kernel); MPNet's relative bias [1, H, L, L] is added to it, as
//! transformers adds both to the scores.

use crate::config::{BertConfig, Family};
use crate::error::Result;
use crate::weights::Checkpoint;
use kiln_core::{ops, DType, Tensor};

/// What a masked key adds to its score. exp(-1e30 - max) is 0 in f32, as with PyTorch's
/// finfo.min; every row keeps at least one real key ([CLS]), so no row is all-masked.
const MASK_BIAS: f32 = -1e30;

/// The buckets MPNet's encoder indexes: transformers' `compute_position_bias` is called with its
/// default 32 whatever relative_attention_num_buckets says (the table has that many rows).
pub const MPNET_BUCKETS: usize = 32;
/// ... and the distance from which every offset shares the last bucket of its sign.
const MPNET_MAX_DISTANCE: i64 = 128;

/// MPNet's (T5's) bucket of the relative position `memory - context`, as transformers'
/// `MPNetEncoder.relative_position_bucket` computes it: half the buckets per sign, exact below 8,
/// logarithmic up to 128. The logarithm in f32, as torch's, so that the boundaries truncate alike
/// (checked against transformers' own table for -600..600 in tests/encoders.rs).
pub fn mpnet_relative_bucket(relative_position: i64) -> u32 {
    let half = (MPNET_BUCKETS / 2) as i64;
    let n = -relative_position;
    let mut ret = if n < 0 { half } else { 0 };
    let n = n.abs();
    let max_exact = half / 2;
    ret += if n < max_exact {
        n
    } else {
        let ratio = (n as f32 / max_exact as f32).ln() / ((MPNET_MAX_DISTANCE as f64 / max_exact as f64).ln() as f32);
        (max_exact + (ratio * (half - max_exact) as f32) as i64).min(half - 1)
    };
    ret as u32
}

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
    pub family: Family,
    /// The dtype of the weights and activations: f32, or f16 (cast once at load; matmuls,
    /// norms and softmax accumulate in f32 inside the kernels either way).
    pub dtype: DType,
    word: Tensor,
    position: Tensor,
    /// None for MPNet (no token types).
    token_type: Option<Tensor>,
    /// MPNet's relative attention bias table [buckets, H].
    relative_bias: Option<Tensor>,
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
        let family = config.family()?;
        let (d, f) = (config.hidden_size, config.intermediate_size);
        let cast = |t: Tensor| -> Result<Tensor> { Ok(if dtype == DType::F32 { t } else { ops::cast(&t, dtype)? }) };
        let get = |name: &str, shape: &[usize]| cast(ck.get(name, shape)?);
        let lin = |name: &str, out: usize, inp: usize| cast(linear(ck, name, out, inp)?);
        let word = get("embeddings.word_embeddings.weight", &[config.vocab_size, d])?;
        let position = get("embeddings.position_embeddings.weight", &[config.max_position_embeddings, d])?;
        let token_type = match family {
            Family::Mpnet => None,
            _ => Some(get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, d])?),
        };
        let relative_bias = match family {
            Family::Mpnet => Some(get(
                "encoder.relative_attention_bias.weight",
                &[config.relative_attention_num_buckets.unwrap_or(MPNET_BUCKETS), config.num_attention_heads],
            )?),
            _ => None,
        };
        let emb_ln_w = get("embeddings.LayerNorm.weight", &[d])?;
        let emb_ln_b = get("embeddings.LayerNorm.bias", &[d])?;
        // Module names per family: (self-attention q, k, v; attention output; its LayerNorm).
        let (q, k, v, o, ln1) = match family {
            Family::Bert | Family::Roberta => (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
                "attention.output.LayerNorm",
            ),
            Family::Mpnet => {
                ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm")
            }
        };
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            progress(i, config.num_hidden_layers);
            let p = format!("encoder.layer.{i}");
            let qkv_w = ops::concat(
                &[&lin(&format!("{p}.{q}"), d, d)?, &lin(&format!("{p}.{k}"), d, d)?, &lin(&format!("{p}.{v}"), d, d)?],
                1,
            )?;
            let qkv_b = ops::concat(
                &[
                    &get(&format!("{p}.{q}.bias"), &[d])?,
                    &get(&format!("{p}.{k}.bias"), &[d])?,
                    &get(&format!("{p}.{v}.bias"), &[d])?,
                ],
                0,
            )?;
            layers.push(Layer {
                qkv_w,
                qkv_b,
                out_w: lin(&format!("{p}.{o}"), d, d)?,
                out_b: get(&format!("{p}.{o}.bias"), &[d])?,
                ln1_w: get(&format!("{p}.{ln1}.weight"), &[d])?,
                ln1_b: get(&format!("{p}.{ln1}.bias"), &[d])?,
                ff1_w: lin(&format!("{p}.intermediate.dense"), f, d)?,
                ff1_b: get(&format!("{p}.intermediate.dense.bias"), &[f])?,
                ff2_w: lin(&format!("{p}.output.dense"), d, f)?,
                ff2_b: get(&format!("{p}.output.dense.bias"), &[d])?,
                ln2_w: get(&format!("{p}.output.LayerNorm.weight"), &[d])?,
                ln2_b: get(&format!("{p}.output.LayerNorm.bias"), &[d])?,
            });
        }
        progress(config.num_hidden_layers, config.num_hidden_layers);
        Ok(Bert { config, family, dtype, word, position, token_type, relative_bias, emb_ln_w, emb_ln_b, layers })
    }

    /// Position ids [B * L] of a right-padded batch (`ids` [B * L], `lens` the real tokens per
    /// row), as transformers makes them: 0, 1, 2, ... for BERT; for RoBERTa and MPNet
    /// `padding_idx + (count of non-padding ids so far)` on non-padding ids and `padding_idx` on
    /// padding ids, a literal pad token inside the text included (fairseq's `make_positions`).
    pub fn position_ids(&self, ids: &[u32], lens: &[usize]) -> Vec<u32> {
        let l = ids.len().checked_div(lens.len()).unwrap_or(0);
        let mut out = vec![0u32; ids.len()];
        for (r, &len) in lens.iter().enumerate() {
            let row = &mut out[r * l..(r + 1) * l];
            match self.config.position_offset() {
                None => row.iter_mut().enumerate().for_each(|(i, p)| *p = i as u32),
                Some(pad) => {
                    let mut count = 0;
                    for (i, p) in row.iter_mut().enumerate() {
                        let id = ids[r * l + i] as usize;
                        *p = if i < len && id != pad {
                            count += 1;
                            (pad + count) as u32
                        } else {
                            pad as u32
                        };
                    }
                }
            }
        }
        out
    }

    /// The last hidden state [B, L, D] of a right-padded batch [B, L] given on the host: `ids`
    /// and `type_ids` (u32), `lens` the real tokens of each row.
    pub fn forward(&self, ids: &[u32], type_ids: &[u32], lens: &[usize]) -> Result<Tensor> {
        self.forward_marked(ids, type_ids, lens, &mut |_| Ok(()))
    }

    /// [`forward`](Self::forward), calling `mark(step)` after each step has been recorded (a
    /// profiler times the GPU work between two marks; `kiln bench`'s embed breakdown does).
    pub fn forward_marked(
        &self,
        ids: &[u32],
        type_ids: &[u32],
        lens: &[usize],
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        let c = &self.config;
        let b = lens.len();
        let l = ids.len().checked_div(b).unwrap_or(0);
        let (d, h) = (c.hidden_size, c.num_attention_heads);
        let dh = d / h;
        let eps = c.layer_norm_eps as f32;
        let n = b * l;
        // The weights' device: a model loaded on another GPU (`with_device`) runs there from
        // any thread.
        let device = self.word.device().clone();
        let mask: Vec<f32> = (0..n).map(|i| if i % l.max(1) < lens[i / l.max(1)] { 1.0 } else { 0.0 }).collect();

        let ids_t = Tensor::from_slice_on(&device, ids, &[b, l])?;
        let pos_t = Tensor::from_slice_on(&device, &self.position_ids(ids, lens), &[b, l])?;
        let mut x = ops::add(&ops::embedding(&self.word, &ids_t)?, &ops::embedding(&self.position, &pos_t)?)?;
        if let Some(tt) = &self.token_type {
            let types_t = Tensor::from_slice_on(&device, type_ids, &[b, l])?;
            x = ops::add(&x, &ops::embedding(tt, &types_t)?)?;
        }
        let mut x =
            ops::layer_norm(&x, Some(&self.emb_ln_w), Some(&self.emb_ln_b), eps)?.reshape(&[n as isize, d as isize])?;
        mark("embeddings + layer_norm")?;

        let bias: Vec<f32> = mask.iter().map(|&m| if m > 0.0 { 0.0 } else { MASK_BIAS }).collect();
        // -1e30 becomes -inf in f16: still exp(-inf) = 0 after the row max is taken.
        let bias = Tensor::from_slice_on(&device, &bias, &[b, 1, 1, l])?;
        let bias = match &self.relative_bias {
            None => bias,
            Some(table) => {
                // [L, L] buckets of key - query -> [L, L, H] -> [1, H, L, L], plus the padding.
                let buckets: Vec<u32> =
                    (0..l * l).map(|i| mpnet_relative_bucket((i % l) as i64 - (i / l) as i64)).collect();
                let buckets = Tensor::from_slice_on(&device, &buckets, &[l, l])?;
                let rel = ops::embedding(table, &buckets)?;
                let rel = if rel.dtype() == DType::F32 { rel } else { ops::cast(&rel, DType::F32)? };
                let rel = ops::permute(&rel, &[2, 0, 1])?.reshape(&[1, h as isize, l as isize, l as isize])?;
                ops::add(&rel, &bias)?
            }
        };
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

//! CLIP's two towers from kiln-core ops: transformers' `CLIPVisionTransformer` (patch embedding
//! as a stride-patch conv2d without bias, a class token, positions, `pre_layrnorm`, the encoder,
//! `post_layernorm` on the class token) and `CLIPTextTransformer` (token and position
//! embeddings, the encoder under a causal mask, `final_layer_norm`, the row at the pooled
//! token), both followed by their projection (no bias). One encoder layer serves both:
//! pre-norm self-attention and MLP blocks, each added to the residual stream.

use super::config::{Activation, TowerConfig};
use crate::error::Result;
use crate::weights::Checkpoint;
use kiln_core::{ops, Tensor};

/// A PyTorch Linear weight [out, in] as [in, out], so that `matmul(x, w)` is `x @ W.T`.
fn linear(ck: &Checkpoint, name: &str, out: usize, inp: usize) -> Result<Tensor> {
    Ok(ops::transpose(&ck.get(name, &[out, inp])?, 0, 1)?)
}

struct Layer {
    ln1: (Tensor, Tensor),
    /// [D, 3D]: q | k | v projections side by side, and their biases [3D].
    qkv_w: Tensor,
    qkv_b: Tensor,
    out_w: Tensor,
    out_b: Tensor,
    ln2: (Tensor, Tensor),
    fc1_w: Tensor,
    fc1_b: Tensor,
    fc2_w: Tensor,
    fc2_b: Tensor,
}

/// The pre-norm transformer both towers run (`CLIPEncoder`).
pub struct Encoder {
    layers: Vec<Layer>,
    heads: usize,
    eps: f32,
    act: Activation,
}

fn norm(ck: &Checkpoint, name: &str, d: usize) -> Result<(Tensor, Tensor)> {
    Ok((ck.get(&format!("{name}.weight"), &[d])?, ck.get(&format!("{name}.bias"), &[d])?))
}

impl Encoder {
    /// `prefix` is "text_model" or "vision_model".
    fn load(ck: &Checkpoint, prefix: &str, c: &TowerConfig, act: Activation) -> Result<Encoder> {
        let (d, f) = (c.hidden_size, c.intermediate_size);
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for i in 0..c.num_hidden_layers {
            let p = format!("{prefix}.encoder.layers.{i}");
            let proj = |n: &str| linear(ck, &format!("{p}.self_attn.{n}.weight"), d, d);
            let bias = |n: &str| ck.get(&format!("{p}.self_attn.{n}.bias"), &[d]);
            layers.push(Layer {
                ln1: norm(ck, &format!("{p}.layer_norm1"), d)?,
                qkv_w: ops::concat(&[&proj("q_proj")?, &proj("k_proj")?, &proj("v_proj")?], 1)?,
                qkv_b: ops::concat(&[&bias("q_proj")?, &bias("k_proj")?, &bias("v_proj")?], 0)?,
                out_w: proj("out_proj")?,
                out_b: bias("out_proj")?,
                ln2: norm(ck, &format!("{p}.layer_norm2"), d)?,
                fc1_w: linear(ck, &format!("{p}.mlp.fc1.weight"), f, d)?,
                fc1_b: ck.get(&format!("{p}.mlp.fc1.bias"), &[f])?,
                fc2_w: linear(ck, &format!("{p}.mlp.fc2.weight"), d, f)?,
                fc2_b: ck.get(&format!("{p}.mlp.fc2.bias"), &[d])?,
            });
        }
        Ok(Encoder { layers, heads: c.num_attention_heads, eps: c.layer_norm_eps as f32, act })
    }

    /// `x` [B, L, D] through every layer; `causal` for the text tower (transformers' causal
    /// mask: with right padding, a real token never sees a pad, so no padding mask is needed).
    fn forward(&self, x: Tensor, causal: bool) -> Result<Tensor> {
        let (b, l, d) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let (h, dh) = (self.heads, d / self.heads);
        let (bi, li, hi, dhi, di) = (b as isize, l as isize, h as isize, dh as isize, d as isize);
        let scale = 1.0 / (dh as f32).sqrt();
        let mut x = x.reshape(&[(b * l) as isize, di])?;
        for layer in &self.layers {
            let y = ops::layer_norm(&x, Some(&layer.ln1.0), Some(&layer.ln1.1), self.eps)?;
            // [N, 3D] -> [B, L, 3, H, dh] -> [3, B, H, L, dh]
            let qkv = ops::add(&ops::matmul(&y, &layer.qkv_w)?, &layer.qkv_b)?;
            let qkv = ops::permute(&qkv.reshape(&[bi, li, 3, hi, dhi])?, &[2, 0, 3, 1, 4])?;
            let part =
                |i: isize| -> Result<Tensor> { Ok(ops::slice(&qkv, 0, i, i + 1, 1)?.reshape(&[bi, hi, li, dhi])?) };
            let ctx = ops::attention_with_mask(&part(0)?, &part(1)?, &part(2)?, None, causal, Some(scale))?;
            let ctx = ops::permute(&ctx, &[0, 2, 1, 3])?.reshape(&[(b * l) as isize, di])?;
            x = ops::add(&ops::add(&ops::matmul(&ctx, &layer.out_w)?, &layer.out_b)?, &x)?;
            let y = ops::layer_norm(&x, Some(&layer.ln2.0), Some(&layer.ln2.1), self.eps)?;
            let y = ops::add(&ops::matmul(&y, &layer.fc1_w)?, &layer.fc1_b)?;
            let y = match self.act {
                // x * sigmoid(1.702 x), from the elementwise ops Kiln has (no fused kernel).
                Activation::QuickGelu => ops::mul(&y, &ops::sigmoid(&ops::mul_scalar(&y, 1.702)?)?)?,
                Activation::Gelu => ops::gelu(&y)?,
            };
            x = ops::add(&ops::add(&ops::matmul(&y, &layer.fc2_w)?, &layer.fc2_b)?, &x)?;
        }
        Ok(x.reshape(&[bi, li, di])?)
    }
}

pub struct VisionTower {
    pub config: TowerConfig,
    /// [D, 3, P, P]
    patch: Tensor,
    /// [1, 1, D]
    class: Tensor,
    /// [1 + grid², D]
    position: Tensor,
    pre_ln: (Tensor, Tensor),
    encoder: Encoder,
    post_ln: (Tensor, Tensor),
    /// [D, projection_dim]
    projection: Tensor,
}

impl VisionTower {
    pub fn load(ck: &Checkpoint, c: TowerConfig, act: Activation, projection_dim: usize) -> Result<VisionTower> {
        let (d, p) = (c.hidden_size, c.patch_size);
        let e = "vision_model.embeddings";
        let tokens = c.grid() * c.grid() + 1;
        Ok(VisionTower {
            patch: ck.get(&format!("{e}.patch_embedding.weight"), &[d, 3, p, p])?,
            class: ck.get(&format!("{e}.class_embedding"), &[d])?.reshape(&[1, 1, d as isize])?,
            position: ck.get(&format!("{e}.position_embedding.weight"), &[tokens, d])?,
            pre_ln: norm(ck, "vision_model.pre_layrnorm", d)?,
            encoder: Encoder::load(ck, "vision_model", &c, act)?,
            post_ln: norm(ck, "vision_model.post_layernorm", d)?,
            projection: linear(ck, "visual_projection.weight", projection_dim, d)?,
            config: c,
        })
    }

    pub fn projection_dim(&self) -> usize {
        self.projection.shape()[1]
    }

    /// `pixels` [B, 3, S, S] f32 to the projected image embeddings [B, projection_dim].
    pub fn forward(&self, pixels: &Tensor) -> Result<Tensor> {
        let c = &self.config;
        let (b, d, p, g) = (pixels.shape()[0], c.hidden_size, c.patch_size, c.grid());
        let patches = ops::conv2d(pixels, &self.patch, None, [p, p], [0, 0], [1, 1], 1)?; // [B, D, g, g]
        let patches = ops::permute(&patches.reshape(&[b as isize, d as isize, (g * g) as isize])?, &[0, 2, 1])?;
        // The class token for every image: zeros [B, 1, D] + class, broadcast.
        let class = ops::add(&ops::zeros(&[b, 1, d], kiln_core::DType::F32)?, &self.class)?;
        let x = ops::add(&ops::concat(&[&class, &patches], 1)?, &self.position)?;
        let x = ops::layer_norm(&x, Some(&self.pre_ln.0), Some(&self.pre_ln.1), self.encoder.eps)?;
        let x = self.encoder.forward(x, false)?;
        let cls = ops::slice(&x, 1, 0, 1, 1)?.reshape(&[b as isize, d as isize])?;
        let cls = ops::layer_norm(&cls, Some(&self.post_ln.0), Some(&self.post_ln.1), self.encoder.eps)?;
        Ok(ops::matmul(&cls, &self.projection)?)
    }
}

pub struct TextTower {
    pub config: TowerConfig,
    token: Tensor,
    position: Tensor,
    encoder: Encoder,
    final_ln: (Tensor, Tensor),
    projection: Tensor,
}

impl TextTower {
    pub fn load(ck: &Checkpoint, c: TowerConfig, act: Activation, projection_dim: usize) -> Result<TextTower> {
        let d = c.hidden_size;
        let e = "text_model.embeddings";
        Ok(TextTower {
            token: ck.get(&format!("{e}.token_embedding.weight"), &[c.vocab_size, d])?,
            position: ck.get(&format!("{e}.position_embedding.weight"), &[c.max_position_embeddings, d])?,
            encoder: Encoder::load(ck, "text_model", &c, act)?,
            final_ln: norm(ck, "text_model.final_layer_norm", d)?,
            projection: linear(ck, "text_projection.weight", projection_dim, d)?,
            config: c,
        })
    }

    /// transformers' pooled position of one row of ids: the first `eos_token_id`, or (configs
    /// with eos_token_id 2, from before its PR #24773) the largest id's first position; the
    /// last token where the row has no eos.
    pub fn pooled_position(&self, ids: &[u32]) -> usize {
        let first_max = |it: &mut dyn Iterator<Item = (usize, u32)>| {
            it.fold(
                (0usize, None::<u32>),
                |(bi, bv), (i, v)| if bv.is_none_or(|b| v > b) { (i, Some(v)) } else { (bi, bv) },
            )
            .0
        };
        if self.config.eos_token_id == 2 {
            first_max(&mut ids.iter().copied().enumerate())
        } else {
            // torch's argmax of (ids == eos): the first true, or 0 when none is (as transformers).
            ids.iter().position(|&i| i as i64 == self.config.eos_token_id).unwrap_or(0)
        }
    }

    /// A right-padded batch `ids` [B, L] (u32) to the projected text embeddings
    /// [B, projection_dim], pooled at `pooled[r]` of each row.
    pub fn forward(&self, ids: &[u32], b: usize, pooled: &[usize]) -> Result<Tensor> {
        let l = ids.len() / b.max(1);
        let d = self.config.hidden_size;
        let device = kiln_core::device()?;
        let ids_t = Tensor::from_slice_on(&device, ids, &[b, l])?;
        let pos: Vec<u32> = (0..b * l).map(|i| (i % l) as u32).collect();
        let pos = Tensor::from_slice_on(&device, &pos, &[b, l])?;
        let x = ops::add(&ops::embedding(&self.token, &ids_t)?, &ops::embedding(&self.position, &pos)?)?;
        let x = self.encoder.forward(x, true)?;
        // The pooled rows, gathered by index from the [B * L, D] hidden states.
        let rows: Vec<u32> = pooled.iter().enumerate().map(|(r, &p)| (r * l + p) as u32).collect();
        let rows = Tensor::from_slice_on(&device, &rows, &[b])?;
        let x = ops::embedding(&x.reshape(&[(b * l) as isize, d as isize])?, &rows)?;
        let x = ops::layer_norm(&x, Some(&self.final_ln.0), Some(&self.final_ln.1), self.encoder.eps)?;
        Ok(ops::matmul(&x, &self.projection)?)
    }
}

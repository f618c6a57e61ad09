//! The Llama decoder on the host CPU, for machines whose only adapter is a CPU one (lavapipe,
//! llvmpipe, SwiftShader): there the GPU path runs each of its ~212 dispatches a token through
//! a software Vulkan driver, and a native loop over the same quantized weights is ~30× faster
//! (numbers in BENCHMARKS.md). [`crate::llama::CausalLM`] picks it (see [`crate::backend`]).
//!
//! Same model as the GPU path, step for step: the same stacked and un-permuted weight rows
//! (QKV in one matrix, gate/up in one), RMSNorm, rotate-half RoPE, grouped-query attention
//! causal by absolute position, SwiGLU (GeGLU for Gemma), Gemma 2/3's post-norms, QK-norm,
//! soft-capping and sliding window ([`crate::gemma`]), the (tied) output head and the greedy
//! tie rule. Weights
//! stay quantized ([`quant`]), activations f32; matrix products and attention heads are spread
//! over rayon's threads (all cores).

mod kernels;
pub(crate) mod quant;

use crate::error::{ModelError, Result};
use crate::gguf::{GgmlType, GgufFile};
use crate::llama::{borrowed, stacked_groups, LlamaConfig};
use quant::QuantMatrix;

pub(crate) use kernels::argmax;

struct Layer {
    attn_norm: Vec<f32>,
    qkv: QuantMatrix,
    /// Q, K and V biases as `qkv`'s rows (Qwen2).
    qkv_bias: Option<Vec<f32>>,
    o: QuantMatrix,
    ffn_norm: Vec<f32>,
    gate_up: QuantMatrix,
    down: QuantMatrix,
    /// Gemma 2/3's post-attention and post-feed-forward RMSNorms ([`crate::gemma`]).
    post_norms: Option<(Vec<f32>, Vec<f32>)>,
    /// Gemma 3's per-head query and key RMSNorms, before RoPE.
    qk_norm: Option<(Vec<f32>, Vec<f32>)>,
}

pub(crate) struct CpuLlama {
    config: LlamaConfig,
    embed: QuantMatrix,
    /// None: tied to the embedding table.
    output: Option<QuantMatrix>,
    output_norm: Vec<f32>,
    layers: Vec<Layer>,
}

/// Keys and values seen so far, per layer [positions, n_kv_heads * head_dim] (position-major,
/// so a pass appends; RoPE already applied to the keys).
pub(crate) struct CpuCache {
    layers: Vec<(Vec<f32>, Vec<f32>)>,
}

impl CpuCache {
    /// Room reserved for `positions` (the vectors grow past it as needed).
    pub fn reserve(&mut self, positions: usize, width: usize) {
        for (k, v) in &mut self.layers {
            k.reserve(positions * width);
            v.reserve(positions * width);
        }
    }
}

pub(crate) fn vector(f: &GgufFile, name: &str, n: usize) -> Result<Vec<f32>> {
    let t = f.expect(name, &[GgmlType::F32], &[n as u64])?;
    Ok(f.data(t).chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

impl CpuLlama {
    /// The weights of `f` (whose config is `config`) into host memory, `progress(done, total)`
    /// as in [`crate::llama::CausalLM::load_with_progress`].
    pub fn load(f: &GgufFile, config: &LlamaConfig, progress: &mut dyn FnMut(usize, usize)) -> Result<CpuLlama> {
        let c = config;
        let matrix = |parts: &[crate::llama::StackPart<'_>], cols: usize| -> Result<QuantMatrix> {
            QuantMatrix::from_groups(stacked_groups(f, parts, cols)?, cols)
        };
        let total = c.n_layers + 1;
        progress(0, total);
        let embed = matrix(&[("token_embd.weight", c.vocab, None)], c.hidden)?;
        let output = if f.tensor("output.weight").is_some() {
            Some(matrix(&[("output.weight", c.vocab, None)], c.hidden)?)
        } else {
            None
        };
        let output_norm = vector(f, "output_norm.weight", c.hidden)?;
        progress(1, total);
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            layers.push(Layer {
                attn_norm: vector(f, &n("attn_norm"), c.hidden)?,
                qkv: matrix(&borrowed(&c.qkv_parts(f, i)), c.hidden)?,
                qkv_bias: crate::arch::qkv_bias(f, c.arch, i, (c.n_heads, c.n_kv_heads, c.head_dim))?,
                o: matrix(&[(&n("attn_output"), c.hidden, None)], c.q_dim())?,
                ffn_norm: vector(f, &n("ffn_norm"), c.hidden)?,
                gate_up: matrix(&borrowed(&c.gate_up_parts(i)), c.hidden)?,
                down: matrix(&[(&n("ffn_down"), c.hidden, None)], c.ffn)?,
                post_norms: match c.arch.is_gemma2_family() {
                    true => Some((
                        vector(f, &n("post_attention_norm"), c.hidden)?,
                        vector(f, &n("post_ffw_norm"), c.hidden)?,
                    )),
                    false => None,
                },
                qk_norm: match c.gemma.as_ref().is_some_and(|g| g.qk_norm) {
                    true => {
                        Some((vector(f, &n("attn_q_norm"), c.head_dim)?, vector(f, &n("attn_k_norm"), c.head_dim)?))
                    }
                    false => None,
                },
            });
            progress(i + 2, total);
        }
        Ok(CpuLlama { config: config.clone(), embed, output, output_norm, layers })
    }

    pub fn new_cache(&self) -> CpuCache {
        CpuCache { layers: (0..self.layers.len()).map(|_| (Vec::new(), Vec::new())).collect() }
    }

    /// Positions `cache` holds.
    pub fn cached(&self, cache: &CpuCache) -> usize {
        cache.layers.first().map_or(0, |(k, _)| k.len() / (self.config.n_kv_heads * self.config.head_dim))
    }

    /// The last hidden states [L, D] of `ids` after what `cache` holds (causal by position, any
    /// number of tokens after any prefix); their keys and values are appended to the cache.
    pub fn hidden(&self, ids: &[u32], cache: &mut CpuCache) -> Result<Vec<f32>> {
        let c = &self.config;
        if cache.layers.len() != self.layers.len() {
            return Err(ModelError::Unsupported("a KV cache made by another model".into()));
        }
        let (d, hd, nh, nkv) = (c.hidden, c.head_dim, c.n_heads, c.n_kv_heads);
        let (l, pos) = (ids.len(), self.cached(cache));
        // Embedding rows; ids outside the vocabulary give zeros (as ops::quant_embedding).
        let mut h = vec![0.0f32; l * d];
        for (&id, row) in ids.iter().zip(h.chunks_exact_mut(d)) {
            if (id as usize) < self.embed.rows {
                self.embed.dequantize_row(id as usize, row);
            }
        }
        if let Some(s) = c.arch.embedding_scale(d) {
            h.iter_mut().for_each(|x| *x *= s);
        }
        // RoPE tables: the global layers', and Gemma 2/3's local layers' where there are any.
        let table = |i: usize| {
            let (base, factors) = c.layer_rope(i);
            kernels::rope_table(pos, l, hd, base, factors)
        };
        let global = kernels::rope_table(pos, l, hd, c.rope_base, c.rope_factors.as_deref());
        let local = c.gemma.as_ref().and_then(|g| g.local.iter().position(|&x| x)).map(table);
        let (qw, kvw) = (nh * hd, nkv * hd);
        for (i, (layer, (kc, vc))) in self.layers.iter().zip(cache.layers.iter_mut()).enumerate() {
            let is_local = c.gemma.as_ref().is_some_and(|g| g.local[i]);
            let (cos, sin) = if is_local { local.as_ref().unwrap_or(&global) } else { &global };
            let mut qkv = layer.qkv.matmul(&kernels::rms_norm(&h, &layer.attn_norm, c.rms_eps)); // [L, qw + 2 kvw]
            let mut q = Vec::with_capacity(l * qw);
            for (t, row) in qkv.chunks_exact_mut(qw + 2 * kvw).enumerate() {
                if let Some(b) = &layer.qkv_bias {
                    row.iter_mut().zip(b).for_each(|(x, b)| *x += b);
                }
                if let Some((qn, kn)) = &layer.qk_norm {
                    let normed = kernels::rms_norm(&row[..qw], qn, c.rms_eps);
                    row[..qw].copy_from_slice(&normed);
                    let normed = kernels::rms_norm(&row[qw..qw + kvw], kn, c.rms_eps);
                    row[qw..qw + kvw].copy_from_slice(&normed);
                }
                let (cs, sn) = (&cos[t * hd / 2..(t + 1) * hd / 2], &sin[t * hd / 2..(t + 1) * hd / 2]);
                for head in row[..qw + kvw].chunks_exact_mut(hd) {
                    kernels::rope_head(head, cs, sn);
                }
                q.extend_from_slice(&row[..qw]);
                kc.extend_from_slice(&row[qw..qw + kvw]);
                vc.extend_from_slice(&row[qw + kvw..]);
            }
            let opts = c.score_options(i);
            let scores = kernels::Scores {
                scale: c.query_scale().unwrap_or(1.0 / (hd as f32).sqrt()),
                softcap: opts.softcap,
                window: opts.window,
            };
            let a = kernels::attention(&q, kc, vc, nh, nkv, hd, pos, scores);
            let post = |y: Vec<f32>, n: Option<&Vec<f32>>| match n {
                Some(n) => kernels::rms_norm(&y, n, c.rms_eps),
                None => y,
            };
            let posts = layer.post_norms.as_ref();
            for (x, y) in h.iter_mut().zip(post(layer.o.matmul(&a), posts.map(|p| &p.0))) {
                *x += y;
            }
            let gu = layer.gate_up.matmul(&kernels::rms_norm(&h, &layer.ffn_norm, c.rms_eps));
            let g = if c.arch.gelu_gate() { kernels::geglu(&gu, c.ffn) } else { kernels::swiglu(&gu, c.ffn) };
            for (x, y) in h.iter_mut().zip(post(layer.down.matmul(&g), posts.map(|p| &p.1))) {
                *x += y;
            }
        }
        Ok(h)
    }

    /// Logits [rows, vocab] of hidden states `h` [rows, D]: the final RMSNorm and the output
    /// projection (the embedding table when tied).
    pub fn logits(&self, h: &[f32]) -> Vec<f32> {
        let head = self.output.as_ref().unwrap_or(&self.embed);
        let mut logits = head.matmul(&kernels::rms_norm(h, &self.output_norm, self.config.rms_eps));
        // Gemma 2's final soft-capping, as llama.cpp computes it (a scale by 1/cap, tanh, a scale by cap).
        if let Some(cap) = self.config.gemma.as_ref().and_then(|g| g.final_softcap) {
            logits.iter_mut().for_each(|x| *x = (*x * (1.0 / cap)).tanh() * cap);
        }
        logits
    }
}

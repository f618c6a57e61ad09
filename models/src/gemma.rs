//! Gemma 2 and Gemma 3 (text): what they add to the Llama-family decoder of [`crate::llama`], as
//! llama.cpp runs them (its `llama_model_gemma2` / `llama_model_gemma3` graphs), on both
//! backends:
//! - a post-attention and a post-feed-forward RMSNorm on each branch before its residual add
//!   (`post_attention_norm`, `post_ffw_norm`; weights stored with Gemma's +1 already added);
//! - queries scaled by head_dim^-1/2, or by (hidden / heads)^-1/2 for the 27B models, which
//!   llama.cpp tells by their layer count (46 for Gemma 2, 62 for Gemma 3); Hugging Face's
//!   `query_pre_attn_scalar` is not in GGUF files and llama.cpp does not use it;
//! - attention logit soft-capping, cap * tanh(s / cap) on the scaled scores before the mask
//!   (Gemma 2: `attn_logit_softcapping`, 50 when absent; Gemma 3: none), in kiln-core's
//!   attention ([`kiln_core::ops::ScoreOptions`]);
//! - final logit soft-capping (Gemma 2: `final_logit_softcapping`, 30 when absent; Gemma 3 only
//!   where the file sets it);
//! - sliding-window attention on local layers, llama.cpp's standard SWA (a query at position p
//!   sees positions p - window + 1 ..= p): `attention.sliding_window` keys (Gemma 2: 4096 when
//!   absent; Gemma 3 without the key: no local layers), local layers by
//!   `attention.sliding_window_pattern` (a count n: layer i is local unless i % n == n - 1; or
//!   an array of one bool a layer), 2 (Gemma 2) or 6 (Gemma 3) when absent;
//! - local layers' RoPE: base `rope.freq_base_swa` (when absent: Gemma 2 the global base, Gemma
//!   3 10000) and, for Gemma 3, without the global layers' linear scaling;
//! - Gemma 3's QK-norm: an RMSNorm of each query and key head (`attn_q_norm`, `attn_k_norm`,
//!   head_dim wide) before RoPE.

use crate::arch::{self, Architecture};
use crate::error::{ModelError, Result};
use crate::gguf::{Array, GgufFile};
use kiln_core::ops::ScoreOptions;

#[derive(Debug, Clone, PartialEq)]
pub struct GemmaConfig {
    pub attn_softcap: Option<f32>,
    pub final_softcap: Option<f32>,
    /// Keys a local layer's query sees (None: no local layers).
    pub window: Option<usize>,
    /// Per layer: local (sliding window) or global.
    pub local: Vec<bool>,
    /// RoPE base and frequency factors ([`crate::arch`]'s) of the local layers.
    pub rope_base_local: f32,
    pub rope_factors_local: Option<Vec<f32>>,
    /// What queries are multiplied by (the attention's scale).
    pub query_scale: f32,
    /// Gemma 3's per-head RMSNorm of queries and keys before RoPE.
    pub qk_norm: bool,
}

impl GemmaConfig {
    /// Gemma 2/3's keys of `f`; `global_factors` are the global layers' RoPE factors.
    pub(crate) fn from_gguf(
        f: &GgufFile,
        arch: Architecture,
        (hidden, n_heads, head_dim, n_layers): (usize, usize, usize, usize),
        rope_base: f32,
        global_factors: Option<&[f32]>,
    ) -> Result<GemmaConfig> {
        let gemma2 = arch == Architecture::Gemma2;
        let name = |k: &str| format!("{}.{k}", arch.name());
        let bad = |m: String| ModelError::Corrupt { path: f.path().to_path_buf(), message: m };
        let number = |k: &str| -> Result<Option<f64>> {
            arch::key(f, arch, k)
                .map(|v| v.as_f64().ok_or_else(|| bad(format!("{}: not a number", name(k)))))
                .transpose()
        };
        let positive = |k: &str, v: f64| -> Result<f32> {
            if v.is_finite() && v > 0.0 {
                Ok(v as f32)
            } else {
                Err(bad(format!("{} = {v}: must be a positive finite number", name(k))))
            }
        };
        // Soft-capping: llama.cpp's defaults (Gemma 2 always caps; Gemma 3 caps the final logits
        // only where the file says, and a cap of 0 is none).
        let attn_softcap = match (gemma2, number("attn_logit_softcapping")?) {
            (true, v) => Some(positive("attn_logit_softcapping", v.unwrap_or(50.0))?),
            (false, _) => None,
        };
        let final_softcap = match (gemma2, number("final_logit_softcapping")?) {
            (_, Some(0.0)) | (false, None) => None,
            (_, v) => Some(positive("final_logit_softcapping", v.unwrap_or(30.0))?),
        };
        let window = match (gemma2, arch::key(f, arch, "attention.sliding_window")) {
            (true, None) => Some(4096),
            (false, None) => None,
            (_, Some(v)) => match v.as_u64() {
                Some(0) => None,
                Some(w) if w < 1 << 32 => Some(w as usize),
                _ => return Err(bad(format!("{} = {v:?}: not a key count", name("attention.sliding_window")))),
            },
        };
        let local = match arch::key(f, arch, "attention.sliding_window_pattern") {
            _ if window.is_none() => vec![false; n_layers],
            Some(v) => match (v.as_u64(), v.as_array()) {
                (Some(n), _) if n > 0 => (0..n_layers).map(|i| (i as u64) % n < n - 1).collect(),
                (_, Some(Array::Bool(b))) if b.len() == n_layers => b.clone(),
                _ => {
                    return Err(bad(format!(
                        "{} = {v:?}: neither a positive layer count nor one bool per layer ({n_layers})",
                        name("attention.sliding_window_pattern")
                    )))
                }
            },
            None => {
                let n = if gemma2 { 2 } else { 6 };
                (0..n_layers).map(|i| i % n < n - 1).collect()
            }
        };
        let rope_base_local = match number("rope.freq_base_swa")? {
            Some(v) => positive("rope.freq_base_swa", v)?,
            None if gemma2 => rope_base,
            None => 10000.0,
        };
        let rope_factors_local = if gemma2 { global_factors.map(<[f32]>::to_vec) } else { None };
        let big = n_layers == if gemma2 { 46 } else { 62 };
        let query_scale = 1.0 / (if big { hidden / n_heads } else { head_dim } as f32).sqrt();
        Ok(GemmaConfig {
            attn_softcap,
            final_softcap,
            window,
            local,
            rope_base_local,
            rope_factors_local,
            query_scale,
            qk_norm: !gemma2,
        })
    }

    /// Layer `i`'s attention score options: the soft-cap, and the window on a local layer.
    pub fn score_options(&self, i: usize) -> ScoreOptions {
        ScoreOptions { softcap: self.attn_softcap, window: self.window.filter(|_| self.local[i]) }
    }
}

/// The layer tensors Gemma 2/3 add (none for the other architectures).
pub(crate) fn layer_tensors(arch: Architecture, i: usize) -> Vec<String> {
    let names: &[&str] = match arch {
        Architecture::Gemma2 => &["post_attention_norm", "post_ffw_norm"],
        Architecture::Gemma3 => &["post_attention_norm", "post_ffw_norm", "attn_q_norm", "attn_k_norm"],
        _ => &[],
    };
    names.iter().map(|s| format!("blk.{i}.{s}.weight")).collect()
}

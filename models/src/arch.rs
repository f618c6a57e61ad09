//! The decoder architectures kiln-models runs from a GGUF file, chosen by
//! `general.architecture` as llama.cpp names them, and what differs between them: the metadata
//! key prefix, whether the converter permuted the rows of Q and K (llama.cpp's "normal" RoPE,
//! see [`crate::llama`]), QKV biases, RoPE frequency scaling, fused QKV and gate/up tensors
//! (Phi-3), the feed-forward activation and the embedding scale (Gemma), Gemma 2/3's additions
//! ([`crate::gemma`]), and the tensors a file may hold. Everything else (RMSNorm, grouped-query
//! attention, gated feed-forward, tied or untied output) they share.

use crate::error::{ModelError, Result};
use crate::gguf::{GgmlType, GgufFile, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// Llama 2/3 (and SmolLM2, TinyLlama, Mistral 7B's GGUFs, which llama.cpp writes as
    /// "llama"): Q and K rows permuted by the converter, optional QKV biases.
    Llama,
    /// Qwen2 / Qwen2.5: QKV biases, rotate-half RoPE on rows as Hugging Face has them (llama.cpp's
    /// NEOX RoPE: the converter does not permute).
    Qwen2,
    /// Phi-3 / Phi-3.5 mini (4k context): Q, K and V in one `attn_qkv` tensor, gate and up in
    /// one `ffn_up` (gate first, as llama.cpp's build_phi3 splits it), NEOX RoPE, untied output.
    /// `attention.sliding_window` is ignored, as llama.cpp ignores it for Phi-3; the 128k
    /// models' LongRoPE (`rope_factors_long/short`) is refused.
    Phi3,
    /// Gemma (1): GeGLU with tanh-GELU, embeddings scaled by sqrt(hidden), head_dim from
    /// `attention.key_length` (Gemma-7B's 256 is not hidden / heads), tied output, NEOX RoPE;
    /// the norms as the converter wrote them (with Gemma's +1 already added).
    Gemma,
    /// Gemma 2: Gemma's, plus post-attention and post-feed-forward RMSNorms, attention and final
    /// logit soft-capping, sliding-window attention on every other layer ([`crate::gemma`]).
    Gemma2,
    /// Gemma 3 (text): Gemma 2's without soft-capping (unless the file sets it), plus QK-norm and
    /// local layers with their own RoPE base, 5 local : 1 global by default ([`crate::gemma`]).
    Gemma3,
}

/// The `general.architecture` values accepted, for messages.
pub const SUPPORTED: &str = "llama, qwen2, phi3, gemma, gemma2, gemma3";

impl Architecture {
    pub fn from_gguf(f: &GgufFile) -> Result<Architecture> {
        match f.str("general.architecture")? {
            "llama" => Ok(Architecture::Llama),
            "qwen2" => Ok(Architecture::Qwen2),
            "phi3" => Ok(Architecture::Phi3),
            "gemma" => Ok(Architecture::Gemma),
            "gemma2" => Ok(Architecture::Gemma2),
            "gemma3" => Ok(Architecture::Gemma3),
            other => Err(ModelError::Unsupported(format!(
                "architecture {other:?} (general.architecture; kiln-models runs {SUPPORTED})"
            ))),
        }
    }

    /// llama.cpp's name, the prefix of the architecture's metadata keys.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Phi3 => "phi3",
            Architecture::Gemma => "gemma",
            Architecture::Gemma2 => "gemma2",
            Architecture::Gemma3 => "gemma3",
        }
    }

    /// Whether gate and up are one `ffn_up` tensor of twice the feed-forward rows, gate first.
    pub fn fused_gate_up(self) -> bool {
        self == Architecture::Phi3
    }

    /// The feed-forward gate's activation: GELU (tanh approximation, ggml's) for Gemma, SiLU
    /// for the others.
    pub fn gelu_gate(self) -> bool {
        self.is_gemma()
    }

    /// Gemma 1, 2 or 3: GeGLU, scaled embeddings, heads `attention.key_length` wide.
    pub fn is_gemma(self) -> bool {
        matches!(self, Architecture::Gemma | Architecture::Gemma2 | Architecture::Gemma3)
    }

    /// Gemma 2 or 3: [`crate::gemma`]'s post-norms, window and soft-capping.
    pub fn is_gemma2_family(self) -> bool {
        matches!(self, Architecture::Gemma2 | Architecture::Gemma3)
    }

    /// What the token embeddings are multiplied by on the way in: sqrt(hidden) for Gemma
    /// (llama.cpp's ggml_scale by sqrtf(n_embd)), else None.
    pub fn embedding_scale(self, hidden: usize) -> Option<f32> {
        self.is_gemma().then(|| (hidden as f32).sqrt())
    }

    /// Whether the converter permuted Q and K rows per head (llama.cpp's LLAMA_ROPE_TYPE_NORM).
    pub fn permuted_qk(self) -> bool {
        self == Architecture::Llama
    }
}

/// What RoPE turns pair i of a head by per position: base^(-2i/D) / factors[i] (None: all 1).
/// The factors are llama.cpp's `rope_freqs.weight` (Llama 3.1+) times the linear scaling factor
/// (`rope.scaling.factor`), which llama.cpp applies as a position scale of 1/factor: the same
/// angle.
pub(crate) fn rope_factors(f: &GgufFile, arch: Architecture, head_dim: usize) -> Result<Option<Vec<f32>>> {
    let key = |k: &str| format!("{}.{k}", arch.name());
    let bad = |m: String| ModelError::Corrupt { path: f.path().to_path_buf(), message: m };
    let kind = match f.get(&key("rope.scaling.type")) {
        None => "linear",
        Some(v) => v.as_str().ok_or_else(|| bad(format!("{}: not a string", key("rope.scaling.type"))))?,
    };
    let linear = match kind {
        "none" => 1.0,
        "linear" => {
            let factor = f
                .get(&key("rope.scaling.factor"))
                .or_else(|| f.get(&key("rope.scale_linear")))
                .map(|v| v.as_f64().ok_or_else(|| bad(format!("{}: not a number", key("rope.scaling.factor")))))
                .transpose()?
                .unwrap_or(0.0);
            // llama.cpp: a factor of 0 (or none) is no scaling.
            if factor == 0.0 {
                1.0
            } else {
                factor
            }
        }
        other => {
            return Err(ModelError::Unsupported(format!(
                "RoPE scaling {other:?} ({}; kiln-models applies none, linear and Llama 3.1's rope_freqs)",
                key("rope.scaling.type")
            )))
        }
    };
    if let Some(t) =
        f.tensors().iter().find(|t| t.name.contains("rope_factors_long") || t.name.contains("rope_factors_short"))
    {
        return Err(ModelError::Unsupported(format!(
            "LongRoPE ({}: Phi-3's 128k-context scaling); kiln-models runs the 4k-context models",
            t.name
        )));
    }
    let half = head_dim / 2;
    let mut factors = match f.tensor("rope_freqs.weight") {
        None => None,
        Some(_) => {
            let t = f.expect("rope_freqs.weight", &[GgmlType::F32], &[half as u64])?;
            Some(f.data(t).chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect::<Vec<_>>())
        }
    };
    if linear != 1.0 {
        let ff = factors.get_or_insert_with(|| vec![1.0; half]);
        ff.iter_mut().for_each(|v| *v = (*v as f64 * linear) as f32);
    }
    if let Some(ff) = &factors {
        if let Some(v) = ff.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(bad(format!(
                "RoPE frequency factor {v} (rope_freqs.weight, rope.scaling.factor) must be positive and finite"
            )));
        }
    }
    Ok(factors)
}

/// The tensor names of layer `i` this crate reads, without the ones a file may leave out.
fn layer_tensors(i: usize) -> impl Iterator<Item = String> {
    ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]
        .into_iter()
        .map(move |s| format!("blk.{i}.{s}.weight"))
}

/// Refuses a file holding a tensor this crate would not read (a part of the architecture it
/// does not run: running without it would give wrong text, not an error), naming it.
pub(crate) fn check_tensor_names(f: &GgufFile, arch: Architecture, n_layers: usize) -> Result<()> {
    let mut known: std::collections::HashSet<String> = (0..n_layers).flat_map(layer_tensors).collect();
    known.extend((0..n_layers).flat_map(|i| crate::gemma::layer_tensors(arch, i)));
    for name in ["token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"] {
        known.insert(name.into());
    }
    for i in 0..n_layers {
        for b in ["attn_q", "attn_k", "attn_v"] {
            known.insert(format!("blk.{i}.{b}.bias"));
        }
    }
    for t in f.tensors() {
        if !known.contains(&t.name) {
            return Err(ModelError::Unsupported(format!(
                "tensor {} is not part of the {} architecture as kiln-models runs it",
                t.name,
                arch.name()
            )));
        }
    }
    Ok(())
}

/// Layer `i`'s Q, K and V biases stacked as its QKV rows are ([`crate::llama::stacked_groups`]:
/// Q and K un-permuted where the converter permuted them), or None when the file has none.
/// Qwen2 needs all three; a Llama file may carry them (llama.cpp reads them if present).
pub(crate) fn qkv_bias(
    f: &GgufFile,
    arch: Architecture,
    i: usize,
    (n_heads, n_kv_heads, head_dim): (usize, usize, usize),
) -> Result<Option<Vec<f32>>> {
    let name = |s: &str| format!("blk.{i}.{s}.bias");
    if arch != Architecture::Qwen2 && f.tensor(&name("attn_q")).is_none() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity((n_heads + 2 * n_kv_heads) * head_dim);
    for (part, heads, permuted) in [
        ("attn_q", n_heads, arch.permuted_qk()),
        ("attn_k", n_kv_heads, arch.permuted_qk()),
        ("attn_v", n_kv_heads, false),
    ] {
        let t = f.expect(&name(part), &[GgmlType::F32], &[(heads * head_dim) as u64])?;
        let data = f.data(t);
        let data = if permuted { crate::llama::unpermute_rows(data, 4, heads, head_dim) } else { data.to_vec() };
        out.extend(data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
    }
    Ok(Some(out))
}

/// The key `arch.k` of `f`, if present.
pub(crate) fn key<'a>(f: &'a GgufFile, arch: Architecture, k: &str) -> Option<&'a Value> {
    f.get(&format!("{}.{k}", arch.name()))
}

//! Llama-family decoders (Llama 2/3, SmolLM2, TinyLlama, Qwen2/2.5, Phi-3, Gemma: [`crate::arch`]) from a
//! GGUF file, the weights kept quantized on the GPU (kiln-core's quant ops read the GGUF blocks
//! directly).
//!
//! RoPE: for the "llama" architecture llama.cpp's converter permutes the rows of Q and K (per head, pairs (i, i + D/2) become
//! neighbours (2i, 2i + 1)) so that its "normal" RoPE, which rotates adjacent pairs, gives what
//! Hugging Face's rotate-half gives on the original weights. kiln-core's `ops::rope` is
//! rotate-half, so the loader undoes that permutation on the rows of Q and K. A row is whole
//! quantized blocks along K, so this moves bytes and changes no value; q·k within a head is the
//! same either way, hence no core change is needed.
//!
//! Where the only adapter is a CPU one (lavapipe), the same model runs natively on the host
//! instead ([`crate::cpu`], picked by [`Backend`]): every entry point below branches on it.

use crate::arch::{self, Architecture};
use crate::backend::{self, Backend};
use crate::chat_template::Message;
use crate::cpu::{CpuCache, CpuLlama};
use crate::decode_loop::{Argmax, DecodeLoop, LoopTimes, TokenPicker, LOOKAHEAD};
use crate::error::{ModelError, Result};
use crate::gemma::GemmaConfig;
use crate::gguf::{GgmlType, GgufFile, TensorInfo};
use crate::gguf_stream;
use crate::gguf_tokenizer::{GgufTokenizer, Utf8Stream};
use crate::sample_picker::SamplePicker;
use crate::sampling::{Sampler, SamplingOptions};
use crate::stop_strings::StopStrings;
use kiln_core::ops::{self, AttentionPath, MatvecKernel, QuantFormat, QuantFusion, ScoreOptions};
use kiln_core::plan::Plan;
use kiln_core::{DType, Device, Tensor};
#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;
// std's Instant panics in wasm32-unknown-unknown; web_time's reads performance.now().
#[cfg(target_arch = "wasm32")]
use web_time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// `general.architecture` ([`crate::arch`]).
    pub arch: Architecture,
    pub n_layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub context: usize,
    pub rope_base: f32,
    /// RoPE frequency factors ([`crate::arch`]'s `rope_factors`: Llama 3.1+'s `rope_freqs`,
    /// linear scaling), head_dim / 2 of them; None: no scaling.
    pub rope_factors: Option<Vec<f32>>,
    pub rms_eps: f32,
    /// Gemma 2/3's additions ([`crate::gemma`]); None for the other architectures.
    pub gemma: Option<GemmaConfig>,
}

impl LlamaConfig {
    pub fn from_gguf(f: &GgufFile) -> Result<LlamaConfig> {
        let arch = Architecture::from_gguf(f)?;
        let a = arch.name();
        let u = |k: &str| -> Result<usize> {
            let v = f.u64(&format!("{a}.{k}"))?;
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0 && v < (1 << 24))
                .ok_or_else(|| ModelError::Corrupt { path: f.path().to_path_buf(), message: format!("{a}.{k} = {v}") })
        };
        let hidden = u("embedding_length")?;
        let n_heads = u("attention.head_count")?;
        // llama.cpp: head_count_kv defaults to head_count.
        let n_kv_heads = match arch::key(f, arch, "attention.head_count_kv") {
            Some(_) => u("attention.head_count_kv")?,
            None => n_heads,
        };
        let vocab = match arch::key(f, arch, "vocab_size") {
            Some(_) => u("vocab_size")?,
            None => f.strings("tokenizer.ggml.tokens")?.len(),
        };
        // Gemma's heads are `attention.key_length` wide (Gemma-7B: 256 against 3072 / 16); the
        // others' hidden / heads.
        let head_dim = match (arch, arch::key(f, arch, "attention.key_length")) {
            (a, Some(_)) if a.is_gemma() => u("attention.key_length")?,
            _ => hidden / n_heads,
        };
        let cfg = LlamaConfig {
            arch,
            n_layers: u("block_count")?,
            hidden,
            ffn: u("feed_forward_length")?,
            n_heads,
            n_kv_heads,
            head_dim,
            vocab,
            context: u("context_length")?,
            rope_base: arch::key(f, arch, "rope.freq_base").and_then(|v| v.as_f64()).unwrap_or(10000.0) as f32,
            rope_factors: None,
            rms_eps: f.f64(&format!("{a}.attention.layer_norm_rms_epsilon"))? as f32,
            gemma: None,
        };
        // rms_norm divides by sqrt(mean(x^2) + eps): eps <= 0 can give inf/NaN logits; a RoPE
        // base <= 0 gives NaN angles.
        for (key, v) in [("attention.layer_norm_rms_epsilon", cfg.rms_eps), ("rope.freq_base", cfg.rope_base)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ModelError::Corrupt {
                    path: f.path().to_path_buf(),
                    message: format!("{a}.{key} = {v}: must be a positive finite number"),
                });
            }
        }
        let own_width = arch.is_gemma();
        if (!own_width && !hidden.is_multiple_of(n_heads))
            || !n_heads.is_multiple_of(n_kv_heads)
            || !cfg.head_dim.is_multiple_of(2)
            || n_heads * cfg.head_dim >= 1 << 24
        {
            return Err(ModelError::Unsupported(format!(
                "hidden {hidden} with {n_heads} heads of {} and {n_kv_heads} KV heads",
                cfg.head_dim
            )));
        }
        for k in ["attention.key_length", "attention.value_length", "rope.dimension_count"] {
            if let Some(v) = arch::key(f, arch, k) {
                if v.as_u64() != Some(cfg.head_dim as u64) {
                    return Err(ModelError::Unsupported(format!(
                        "{a}.{k} = {v:?} with heads of {} (kiln-models runs keys and values as wide as the heads, \
                         RoPE over all of them)",
                        cfg.head_dim
                    )));
                }
            }
        }
        let rope_factors = arch::rope_factors(f, arch, head_dim)?;
        let gemma = if arch.is_gemma2_family() {
            let dims = (hidden, n_heads, head_dim, cfg.n_layers);
            Some(GemmaConfig::from_gguf(f, arch, dims, cfg.rope_base, rope_factors.as_deref())?)
        } else {
            None
        };
        Ok(LlamaConfig { rope_factors, gemma, ..cfg })
    }

    /// The rows of Q and K as the converter wrote them: (heads, head_dim) to un-permute, or
    /// None where it did not permute them ([`Architecture::permuted_qk`]).
    pub(crate) fn qk_heads(&self, heads: usize) -> Option<(usize, usize)> {
        self.arch.permuted_qk().then_some((heads, self.head_dim))
    }

    /// Layer `i`'s RoPE base and frequency factors (Gemma 2/3's local layers have their own).
    pub(crate) fn layer_rope(&self, i: usize) -> (f32, Option<&[f32]>) {
        match &self.gemma {
            Some(g) if g.local[i] => (g.rope_base_local, g.rope_factors_local.as_deref()),
            _ => (self.rope_base, self.rope_factors.as_deref()),
        }
    }

    /// Layer `i`'s attention score options (Gemma 2/3's soft-cap and window; else none).
    pub(crate) fn score_options(&self, i: usize) -> ScoreOptions {
        self.gemma.as_ref().map_or_else(ScoreOptions::default, |g| g.score_options(i))
    }

    /// The attention's query scale (None: 1/sqrt(head_dim)).
    pub(crate) fn query_scale(&self) -> Option<f32> {
        self.gemma.as_ref().map(|g| g.query_scale)
    }

    /// Width of the attention's queries and output: heads × head_dim (the hidden size, except
    /// for Gemma-style heads).
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Layer `i`'s QKV stack: (name, rows, heads to un-permute) of Q, K and V, or the one fused
    /// `attn_qkv` tensor a Phi-3 file holds (Q, K and V rows in that order) where it has no
    /// separate `attn_q` (llama.cpp takes either).
    pub(crate) fn qkv_parts(&self, f: &GgufFile, i: usize) -> Vec<OwnedStackPart> {
        let kv = self.n_kv_heads * self.head_dim;
        if self.arch == Architecture::Phi3 && f.tensor(&format!("blk.{i}.attn_q.weight")).is_none() {
            return vec![(format!("blk.{i}.attn_qkv.weight"), self.q_dim() + 2 * kv, None)];
        }
        vec![
            (format!("blk.{i}.attn_q.weight"), self.q_dim(), self.qk_heads(self.n_heads)),
            (format!("blk.{i}.attn_k.weight"), kv, self.qk_heads(self.n_kv_heads)),
            (format!("blk.{i}.attn_v.weight"), kv, None),
        ]
    }

    /// Layer `i`'s gate/up stack (gate rows first): `ffn_gate` and `ffn_up`, or Phi-3's one
    /// `ffn_up` holding both.
    pub(crate) fn gate_up_parts(&self, i: usize) -> Vec<OwnedStackPart> {
        if self.arch.fused_gate_up() {
            return vec![(format!("blk.{i}.ffn_up.weight"), 2 * self.ffn, None)];
        }
        vec![(format!("blk.{i}.ffn_gate.weight"), self.ffn, None), (format!("blk.{i}.ffn_up.weight"), self.ffn, None)]
    }
}

/// A quantized [rows, cols] matrix on the GPU.
struct QMatrix {
    w: Tensor,
    format: QuantFormat,
    /// Rows of `w`.
    rows: usize,
    /// Rows stacked after `w`'s in other block formats (a stack whose matrices differ in
    /// format, e.g. a Q4_K_M's Q6_K attn_v after its Q4_K attn_q and attn_k), each one matrix;
    /// usually empty.
    rest: Vec<QMatrix>,
}

impl QMatrix {
    /// Rows of the whole stack.
    fn total_rows(&self) -> usize {
        self.rows + self.rest.iter().map(|m| m.rows).sum::<usize>()
    }

    /// x·Wᵀ with `fusion` folded in; the result has half of the stack's rows under SwiGLU.
    fn matmul(&self, x: &Tensor, fusion: QuantFusion) -> Result<Tensor> {
        self.matmul_on(x, fusion, MatvecKernel::Auto)
    }

    /// The product kernel `products` picks for `rows` rows of x by this stack.
    #[cfg(not(target_arch = "wasm32"))] // batch.rs is native only
    fn batch_kernel(&self, products: crate::batch::BatchProducts, rows: usize) -> MatvecKernel {
        // A mixed stack runs a product per part, judged by the whole stack: with K split on the
        // cooperative product (H200, B = 16) a Q4_K_M's Q4_K + Q6_K QKV stack runs faster there
        // than on the matrix-vector kernel (its parts judged alone, the 0.9 MB Q6_K V went to
        // the matrix-vector kernel: 2,998 tokens/s against 3,477 all cooperative).
        let bytes = self.rest.iter().map(|m| m.w.storage_nbytes()).sum::<usize>() + self.w.storage_nbytes();
        let coop = ops::quant_product_uses_coop(self.w.device(), self.format, rows, self.rows);
        products.kernel(rows, bytes, coop)
    }

    /// [`matmul`](Self::matmul) on the product kernel `kernel` picks (batched decode's choice).
    fn matmul_on(&self, x: &Tensor, fusion: QuantFusion, kernel: MatvecKernel) -> Result<Tensor> {
        if self.rest.is_empty() {
            let n = if fusion.swiglu { self.rows / 2 } else { self.rows };
            return Ok(ops::quant_matmul_fused_kernel(x, &self.w, self.format, n, fusion, kernel)?);
        }
        // A mixed stack: each format's rows on their own (the norm folded into each product,
        // as the decode kernel does: one dispatch fewer than a separate norm), the results side
        // by side, then SwiGLU and the residual (the ops the fused kernel stands for).
        let norm_only = QuantFusion { rms_norm: fusion.rms_norm, ..Default::default() };
        let mut parts = vec![ops::quant_matmul_fused_kernel(x, &self.w, self.format, self.rows, norm_only, kernel)?];
        for m in &self.rest {
            parts.push(ops::quant_matmul_fused_kernel(x, &m.w, m.format, m.rows, norm_only, kernel)?);
        }
        let axis = x.ndim() as isize - 1;
        let mut y = ops::concat(&parts.iter().collect::<Vec<_>>(), axis)?;
        if fusion.swiglu {
            let n = (self.total_rows() / 2) as isize;
            let gate = ops::slice(&y, axis, 0, n, 1)?;
            let up = ops::slice(&y, axis, n, 2 * n, 1)?;
            y = ops::mul(&ops::silu(&gate)?, &up)?;
        }
        match fusion.residual {
            Some(r) => Ok(ops::add(&y, r)?),
            None => Ok(y),
        }
    }
}

/// One decoder layer. Q, K and V are one matrix (their rows stacked: one matvec per token, its
/// norm folded in), as are the feed-forward gate and up projections (SwiGLU folded in).
struct Layer {
    attn_norm: Tensor,
    qkv: QMatrix,
    /// Q, K and V biases stacked as `qkv`'s rows (Qwen2), added after the product.
    qkv_bias: Option<Tensor>,
    o: QMatrix,
    ffn_norm: Tensor,
    gate_up: QMatrix,
    down: QMatrix,
    /// Gemma 2/3's post-attention and post-feed-forward RMSNorms ([`crate::gemma`]).
    post_norms: Option<(Tensor, Tensor)>,
    /// Gemma 3's per-head query and key RMSNorms, before RoPE: one weight row per head of the
    /// QKV product [heads + 2 kv heads, head_dim] (ones on V's heads, which keep their values).
    qk_norm: Option<Tensor>,
}

impl Layer {
    /// The QKV product of `x` [L, D] with `fusion` (its norm) folded in, plus the biases.
    fn qkv_projection(&self, x: &Tensor, fusion: QuantFusion, kernel: MatvecKernel) -> Result<Tensor> {
        let y = self.qkv.matmul_on(x, fusion, kernel)?;
        match &self.qkv_bias {
            Some(b) => Ok(ops::add(&y, b)?),
            None => Ok(y),
        }
    }
}

/// Keys and values of the positions seen so far: per layer two [n_kv_heads, capacity, head_dim]
/// tensors written in place (`ops::quant_qkv_rope_to_cache`), rows past `len` unused. The capacity
/// doubles when a pass would overflow it (one copy per doubling), up to the model's context.
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    /// The host path's cache (and `layers` empty) on the CPU backend.
    host: Option<CpuCache>,
    len: usize,
    capacity: usize,
    /// This sequence's recorded decode token ([`DecodePlan`]), made at its first one-token step.
    plan: Option<DecodePlan>,
    /// Whether one-token steps go through a plan (`KILN_DECODE_PLAN`, default on).
    planned: bool,
    /// Plans captured and replays recorded in this cache so far.
    plan_counts: (usize, usize),
}

/// A decode token of one sequence, captured through the ops layer once and replayed after
/// (kiln_core::plan: the same pipelines, bind groups and parameter blocks, only the RoPE row and
/// the keys attended to moving on): a token's recording skips the ops' checks, keys, cache
/// probes and allocations. Kept in the cache, as it writes that cache's rows and owns the
/// token's intermediates (two sequences never share them). Captured again where it does not
/// hold: another model, the cache grown (new K and V), the split-KV geometry changing with the
/// context (every 64 positions for SmolLM2), a cache whose length went back past the capture.
struct DecodePlan {
    plan: Plan,
    /// `GpuModel::id` of the model captured.
    model: u64,
    /// The cache's length when captured: a replay at length L is `L - pos` positions on.
    pos: usize,
    /// Layer 0's keys when captured (grown caches have new ones).
    keys: Tensor,
}

/// `KILN_DECODE_PLAN`: 0 records every decode token through the ops layer (the A/B baseline).
fn decode_plan_default() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("KILN_DECODE_PLAN").map_or(true, |v| v.trim() != "0"))
}

impl KvCache {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether one-token steps replay a recorded decode token ([`DecodePlan`]); off, every
    /// token goes through the ops layer (the reference the plan is tested against).
    #[doc(hidden)]
    pub fn set_decode_plan(&mut self, on: bool) {
        self.planned = on;
        if !on {
            self.plan = None;
        }
    }

    /// Dispatches a replay of this cache's decode plan records (None: no plan now).
    #[doc(hidden)]
    pub fn decode_plan_dispatches(&self) -> Option<usize> {
        self.plan.as_ref().map(|p| p.plan.dispatches())
    }

    /// Decode plans captured and replayed in this cache so far.
    #[doc(hidden)]
    pub fn decode_plan_counts(&self) -> (usize, usize) {
        self.plan_counts
    }
}

pub struct CausalLM {
    pub config: LlamaConfig,
    tokenizer: GgufTokenizer,
    engine: Engine,
}

/// The weights where the model runs.
enum Engine {
    Gpu(GpuModel),
    Cpu(CpuLlama),
}

/// The weights on kiln-core's device.
struct GpuModel {
    /// This load's identity (a decode plan replays only for the model it was captured on).
    id: u64,
    device: Arc<Device>,
    embed: QMatrix,
    /// None: tied to the embedding table (as SmolLM2).
    output: Option<QMatrix>,
    output_norm: Tensor,
    layers: Vec<Layer>,
    /// The config's RoPE frequency factors on the GPU (global layers', then Gemma 2/3's local
    /// layers').
    rope_factors: Option<Tensor>,
    rope_factors_local: Option<Tensor>,
    /// GeGLU's gate and up column indices of the gate/up product (Gemma): gathered, not sliced,
    /// since a slice of one row is a buffer copy, which a decode plan cannot record.
    geglu_halves: Option<(Tensor, Tensor)>,
    /// Gemma 3's QK-norm: 1 on the QKV product's query and key heads, 0 on V's [heads, 1].
    qk_heads: Option<Tensor>,
    /// A multi-token pass waits for each layer (a CPU adapter: see `hidden_from`).
    wait_each_layer: bool,
}

pub(crate) fn quant_format(t: &TensorInfo) -> Result<QuantFormat> {
    match t.ty {
        GgmlType::Q4_0 => Ok(QuantFormat::Q4_0),
        GgmlType::Q4_1 => Ok(QuantFormat::Q4_1),
        GgmlType::Q8_0 => Ok(QuantFormat::Q8_0),
        GgmlType::Q5_0 => Ok(QuantFormat::Q5_0),
        GgmlType::Q5_1 => Ok(QuantFormat::Q5_1),
        GgmlType::Q2_K => Ok(QuantFormat::Q2_K),
        GgmlType::Q3_K => Ok(QuantFormat::Q3_K),
        GgmlType::Q4_K => Ok(QuantFormat::Q4_K),
        GgmlType::Q5_K => Ok(QuantFormat::Q5_K),
        GgmlType::Q6_K => Ok(QuantFormat::Q6_K),
        other => Err(ModelError::Unsupported(format!(
            "weight {} in {} (kiln-models runs Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K matrices)",
            t.name,
            other.name()
        ))),
    }
}

/// Undoes the converter's per-head row permutation of Q or K (see the module doc): row
/// h*D + i*(D/2) + j of the original is row h*D + 2j + i of the file.
pub(crate) fn unpermute_rows(bytes: &[u8], row_bytes: usize, n_heads: usize, head_dim: usize) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len()];
    let half = head_dim / 2;
    for h in 0..n_heads {
        for i in 0..2 {
            for j in 0..half {
                let dst = h * head_dim + i * half + j;
                let src = h * head_dim + 2 * j + i;
                out[dst * row_bytes..(dst + 1) * row_bytes]
                    .copy_from_slice(&bytes[src * row_bytes..(src + 1) * row_bytes]);
            }
        }
    }
    out
}

/// [`StackPart`] with its name owned.
pub(crate) type OwnedStackPart = (String, usize, Option<(usize, usize)>);

/// One matrix of a stack: its tensor name, its rows, and (heads, head_dim) for Q/K rows to
/// un-permute.
pub(crate) type StackPart<'a> = (&'a str, usize, Option<(usize, usize)>);

/// `parts` borrowed, for [`stacked_groups`].
pub(crate) fn borrowed(parts: &[OwnedStackPart]) -> Vec<StackPart<'_>> {
    parts.iter().map(|(name, r, h)| (name.as_str(), *r, *h)).collect()
}

/// The GGUF types a weight matrix may have (those [`quant_format`] maps).
pub(crate) const MATRIX_TYPES: [GgmlType; 10] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// One run of a stack's rows in one block format: (bytes, format, rows).
pub(crate) type StackGroup = (Vec<u8>, QuantFormat, usize);

/// The block bytes of matrices of `cols` columns (ggml dims [cols, rows]) stacked row-wise, in
/// the order given: `(name, rows, heads)`, `heads` un-permuting Q/K rows. Consecutive matrices
/// of one block format are one group (whole rows are whole blocks, so stacking moves bytes
/// only); a format change starts the next group (a Q4_K_M file keeps attn_q and attn_k in Q4_K
/// and attn_v, in some layers, in Q6_K). Both backends load through it.
pub(crate) fn stacked_groups(f: &GgufFile, parts: &[StackPart<'_>], cols: usize) -> Result<Vec<StackGroup>> {
    let mut groups: Vec<StackGroup> = Vec::new();
    for &(name, r, heads) in parts {
        let t = f.expect(name, &MATRIX_TYPES, &[cols as u64, r as u64])?;
        let fmt = quant_format(t)?;
        if groups.last().is_none_or(|g| g.1 != fmt) {
            groups.push((Vec::new(), fmt, 0));
        }
        let g = groups.last_mut().expect("pushed above");
        if !f.has_data(t) {
            // A streamed file's matrix went to the GPU in a stack of the stream's plan
            // (gguf_stream.rs) that is not the one asked for here: the plan is out of step.
            return Err(ModelError::Unsupported(format!("{name} was streamed to the GPU in another stack")));
        }
        let data = f.data(t);
        match heads {
            None => g.0.extend_from_slice(data),
            Some((n_heads, head_dim)) => {
                g.0.extend(unpermute_rows(data, fmt.row_bytes(cols)?, n_heads, head_dim));
            }
        }
        g.2 += r;
    }
    if groups.is_empty() {
        return Err(ModelError::Unsupported("an empty stack of matrices".into()));
    }
    Ok(groups)
}

struct Loader<'a> {
    f: &'a GgufFile,
    device: &'a Arc<Device>,
    /// The stacks a streamed file already uploaded as it arrived ([`crate::gguf_stream`]), by
    /// [`gguf_stream::stack_key`]; empty for a whole file.
    uploaded: std::cell::RefCell<gguf_stream::UploadedStacks>,
}

impl Loader<'_> {
    fn vector(&self, name: &str, n: usize) -> Result<Tensor> {
        let t = self.f.expect(name, &[GgmlType::F32], &[n as u64])?;
        Ok(Tensor::from_bytes_on(self.device, self.f.data(t), &[n], DType::F32)?)
    }

    /// [`stacked_groups`] uploaded: the first group, the others (if the formats change) as
    /// its `rest`.
    fn stacked(&self, parts: &[StackPart<'_>], cols: usize) -> Result<QMatrix> {
        let mut mats = Vec::new();
        if let Some(groups) = self.uploaded.borrow_mut().remove(&gguf_stream::stack_key(parts, cols)) {
            mats.extend(groups.into_iter().map(|(w, format, rows)| QMatrix { w, format, rows, rest: Vec::new() }));
        } else {
            for (bytes, format, rows) in stacked_groups(self.f, parts, cols)? {
                let w = ops::quant_from_bytes(self.device, &bytes, format, rows, cols)?;
                mats.push(QMatrix { w, format, rows, rest: Vec::new() });
            }
        }
        let mut first = mats.remove(0);
        first.rest = mats;
        Ok(first)
    }
}

/// Time spent and tokens made by one generation.
#[derive(Debug, Clone, Default)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    pub prefill: Duration,
    pub generated_tokens: usize,
    /// Decode steps (every generated token after the first, whose logits come from prefill).
    pub decode: Duration,
    /// Host time recording decode tokens' commands. Greedy's GPU-resident loop records ahead
    /// (up to its lookahead, from the prompt's step on), so this and `decode_submitting` can
    /// cover tokens recorded past the stop and time inside `prefill`.
    pub decode_recording: Duration,
    /// Host time submitting decode tokens (on lavapipe a submit runs the work: its GPU time).
    pub decode_submitting: Duration,
    /// Of `decode`, the time blocked until token ids (or, when sampling on the host, logits)
    /// came back.
    pub decode_waiting: Duration,
}

impl GenerationStats {
    /// Prompt tokens per second of prefill; 0 when prefill did not run (max_tokens 0: before,
    /// the prompt's tokens over a zero duration read as ~1e9 tokens/s).
    pub fn prefill_tokens_per_s(&self) -> f64 {
        if self.prefill.is_zero() {
            return 0.0;
        }
        self.prompt_tokens as f64 / self.prefill.as_secs_f64()
    }

    /// Decoded tokens per second; 0 when no decode step ran.
    pub fn decode_tokens_per_s(&self) -> f64 {
        if self.decode.is_zero() {
            return 0.0;
        }
        self.generated_tokens.saturating_sub(1) as f64 / self.decode.as_secs_f64()
    }
}

/// What [`CausalLM::generate`] does.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub sampling: SamplingOptions,
    /// Generation ends before any of these strings would be produced (it is not part of the
    /// text).
    pub stop: Vec<String>,
    /// Stop at the end-of-sequence token (and at `<|im_end|>`-style control tokens).
    pub stop_at_eos: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions { max_tokens: 128, sampling: SamplingOptions::default(), stop: Vec::new(), stop_at_eos: true }
    }
}

/// Greedy's pick on the GPU: the index of the largest logit, the lowest among equals, a NaN
/// logit winning (numpy's argmax), as an i32 tensor of shape [1].
pub(crate) fn argmax_id(logits: &Tensor) -> Result<Tensor> {
    Ok(ops::argmax(logits, None, false)?.reshape(&[1])?)
}

impl CausalLM {
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(path: impl AsRef<Path>) -> Result<CausalLM> {
        Self::load_with_progress(path, |_, _| {})
    }

    /// [`load`](Self::load), calling `progress(done, total)` as the layers upload. The backend
    /// is `KILN_MODELS_BACKEND`'s ([`Backend::from_env`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_with_progress(path: impl AsRef<Path>, progress: impl FnMut(usize, usize)) -> Result<CausalLM> {
        Self::load_on(path, Backend::from_env()?, progress)
    }

    /// [`load_with_progress`](Self::load_with_progress) on the given backend (`Auto`: the host
    /// CPU when kiln-core's adapter is a CPU one or there is none, else the GPU).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_on(path: impl AsRef<Path>, backend: Backend, progress: impl FnMut(usize, usize)) -> Result<CausalLM> {
        let f = kiln_core::startup::time("GGUF file map + header parse", || GgufFile::open(path.as_ref()))?;
        Self::from_gguf(f, backend, progress)
    }

    /// [`load_on`](Self::load_on) from a GGUF file already open (or bytes: the browser's
    /// [`GgufFile::from_bytes`]). In wasm32 `Auto` is the GPU: the host path would run on the
    /// page's one thread, and WebGPU is what a page is for.
    pub fn from_gguf(f: GgufFile, backend: Backend, progress: impl FnMut(usize, usize)) -> Result<CausalLM> {
        Self::from_parts(f, Default::default(), backend, progress)
    }

    /// A model from a GGUF file that streamed in ([`crate::GgufStream`]: a page's download),
    /// its matrices already on the GPU. GPU only: the host backend reads every tensor's bytes,
    /// which the stream did not keep.
    pub fn from_streamed(s: crate::StreamedGguf, progress: impl FnMut(usize, usize)) -> Result<CausalLM> {
        let (f, uploaded) = s.into_parts();
        Self::from_parts(f, uploaded, Backend::Gpu, progress)
    }

    fn from_parts(
        f: GgufFile,
        uploaded: gguf_stream::UploadedStacks,
        backend: Backend,
        progress: impl FnMut(usize, usize),
    ) -> Result<CausalLM> {
        #[cfg(target_arch = "wasm32")]
        let backend = if backend == Backend::Auto { Backend::Gpu } else { backend };
        let config = kiln_core::startup::time("model config (GGUF metadata)", || LlamaConfig::from_gguf(&f))?;
        // The vocabulary parses on a thread of its own while the device opens and the weights
        // load here (`overlap`): neither needs the other.
        let (tokenizer, engine) = crate::overlap::join(
            || kiln_core::startup::time("tokenizer load (GGUF vocabulary)", || GgufTokenizer::from_gguf(&f)),
            || Self::load_engine(&f, &config, uploaded, backend, progress),
        );
        // The tokenizer's errors first, as when it loaded before the weights.
        let tokenizer = tokenizer?;
        if tokenizer.vocab_size() != config.vocab {
            return Err(ModelError::Corrupt {
                path: f.path().to_path_buf(),
                message: format!("{} tokens for a vocabulary of {}", tokenizer.vocab_size(), config.vocab),
            });
        }
        Ok(CausalLM { config, tokenizer, engine: engine? })
    }

    /// The weights where `backend` says (the host, or the device it opens).
    fn load_engine(
        f: &GgufFile,
        config: &LlamaConfig,
        uploaded: gguf_stream::UploadedStacks,
        backend: Backend,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Engine> {
        let choice = kiln_core::startup::span("backend choice (adapter, device)");
        let device = match backend {
            Backend::Cpu => None,
            Backend::Gpu => Some(kiln_core::device()?),
            // The adapter kiln-core would pick, read without creating a device on it.
            // Inside `with_device` (a replica's thread), that device's adapter.
            Backend::Auto => match kiln_core::scoped_device()
                .map(|d| d.info().clone())
                .or_else(|| kiln_core::adapters().into_iter().find(|a| a.chosen))
            {
                Some(a) if !backend::is_cpu_adapter(&a.device_type) => Some(kiln_core::device()?),
                _ => None,
            },
        };
        drop(choice);
        let _weights = kiln_core::startup::span("weights load (host or GPU)");
        let Some(device) = device else {
            let cpu = CpuLlama::load(f, config, &mut progress)?;
            arch::check_tensor_names(f, config.arch, config.n_layers)?;
            return Ok(Engine::Cpu(cpu));
        };
        // This model's pipelines, built ahead on other threads while the weights upload where
        // an earlier process recorded them (kiln-core's persistent cache).
        #[cfg(not(target_arch = "wasm32"))]
        let warmup = device.warm_pipelines(&format!("causal-lm {}", f.path().display()));
        let ld = Loader { f, device: &device, uploaded: uploaded.into() };
        let c = config;
        let total = c.n_layers + 1;
        // The real total from the start (a bar made before the file is read knows none).
        progress(0, total);
        let embed = ld.stacked(&[("token_embd.weight", c.vocab, None)], c.hidden)?;
        let output = if f.tensor("output.weight").is_some() {
            Some(ld.stacked(&[("output.weight", c.vocab, None)], c.hidden)?)
        } else {
            None
        };
        let output_norm = ld.vector("output_norm.weight", c.hidden)?;
        progress(1, total);
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            let qkv_bias = arch::qkv_bias(f, c.arch, i, (c.n_heads, c.n_kv_heads, c.head_dim))?
                .map(|b| Tensor::from_slice_on(&device, &b, &[b.len()]))
                .transpose()?;
            layers.push(Layer {
                attn_norm: ld.vector(&n("attn_norm"), c.hidden)?,
                qkv: ld.stacked(&borrowed(&c.qkv_parts(f, i)), c.hidden)?,
                qkv_bias,
                o: ld.stacked(&[(&n("attn_output"), c.hidden, None)], c.q_dim())?,
                ffn_norm: ld.vector(&n("ffn_norm"), c.hidden)?,
                gate_up: ld.stacked(&borrowed(&c.gate_up_parts(i)), c.hidden)?,
                down: ld.stacked(&[(&n("ffn_down"), c.hidden, None)], c.ffn)?,
                post_norms: match c.arch.is_gemma2_family() {
                    true => Some((
                        ld.vector(&n("post_attention_norm"), c.hidden)?,
                        ld.vector(&n("post_ffw_norm"), c.hidden)?,
                    )),
                    false => None,
                },
                qk_norm: match c.gemma.as_ref().is_some_and(|g| g.qk_norm) {
                    true => {
                        let q = crate::cpu::vector(f, &n("attn_q_norm"), c.head_dim)?;
                        let k = crate::cpu::vector(f, &n("attn_k_norm"), c.head_dim)?;
                        let mut w = q.repeat(c.n_heads);
                        w.extend(k.repeat(c.n_kv_heads));
                        w.extend(vec![1.0; c.n_kv_heads * c.head_dim]);
                        Some(Tensor::from_slice_on(&device, &w, &[c.n_heads + 2 * c.n_kv_heads, c.head_dim])?)
                    }
                    false => None,
                },
            });
            progress(i + 2, total);
        }
        // Never in a page: a blocking wait is not possible there (the caller's read is awaited).
        let wait_each_layer = !cfg!(target_arch = "wasm32") && device.info().device_type.eq_ignore_ascii_case("cpu");
        // After loading: a tensor the architecture needs and the file lacks is named as missing
        // first; then anything left over is named as unknown.
        arch::check_tensor_names(f, c.arch, c.n_layers)?;
        if let Some(key) = ld.uploaded.borrow().keys().next() {
            // The stream's plan and this loader are out of step (gguf_stream.rs): loud, not
            // GPU memory held for nothing.
            return Err(ModelError::Unsupported(format!("the streamed stack {key} was not used by the loader")));
        }
        let upload = |ff: Option<&Vec<f32>>| ff.map(|ff| Tensor::from_slice_on(&device, ff, &[ff.len()])).transpose();
        let rope_factors = upload(c.rope_factors.as_ref())?;
        let rope_factors_local = upload(c.gemma.as_ref().and_then(|g| g.rope_factors_local.as_ref()))?;
        let geglu_halves = match c.arch.gelu_gate() {
            true => {
                let n = c.ffn as i32;
                let half = |from: i32| Tensor::from_slice_on(&device, &(from..from + n).collect::<Vec<_>>(), &[c.ffn]);
                Some((half(0)?, half(n)?))
            }
            false => None,
        };
        let qk_heads = match c.gemma.as_ref().is_some_and(|g| g.qk_norm) {
            true => {
                let heads = c.n_heads + 2 * c.n_kv_heads;
                let sel: Vec<f32> = (0..heads).map(|h| if h < c.n_heads + c.n_kv_heads { 1.0 } else { 0.0 }).collect();
                Some(Tensor::from_slice_on(&device, &sel, &[heads, 1])?)
            }
            false => None,
        };
        static LOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let gpu = GpuModel {
            id,
            device,
            embed,
            output,
            output_norm,
            layers,
            rope_factors,
            rope_factors_local,
            geglu_halves,
            qk_heads,
            wait_each_layer,
        };
        #[cfg(not(target_arch = "wasm32"))]
        kiln_core::startup::time("pipelines built ahead: waited for", || warmup.wait());
        Ok(Engine::Gpu(gpu))
    }

    /// Where this model runs: `Backend::Gpu` or `Backend::Cpu`.
    pub fn backend(&self) -> Backend {
        match self.engine {
            Engine::Gpu(_) => Backend::Gpu,
            Engine::Cpu(_) => Backend::Cpu,
        }
    }

    /// The GPU weights; the CPU backend answers every entry point before reaching here.
    fn gpu(&self) -> &GpuModel {
        match &self.engine {
            Engine::Gpu(g) => g,
            Engine::Cpu(_) => unreachable!("a GPU step on the CPU backend"),
        }
    }

    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    /// An empty cache with room for 256 positions (it grows as needed).
    pub fn new_cache(&self) -> Result<KvCache> {
        self.cache_with_capacity(256)
    }

    /// An empty cache with room for `positions` (clamped to the context; it grows as needed).
    pub fn cache_with_capacity(&self, positions: usize) -> Result<KvCache> {
        self.cache_on(positions, false)
    }

    /// [`cache_with_capacity`](Self::cache_with_capacity) with every row zero (`zero`), for
    /// batched decode: its attention reads every row up to the batch's longest and masks the
    /// rest with -inf, which a NaN or inf left in a recycled buffer would turn into NaN.
    pub(crate) fn cache_on(&self, positions: usize, zero: bool) -> Result<KvCache> {
        let c = &self.config;
        let capacity = positions.clamp(1, c.context);
        if let Engine::Cpu(cpu) = &self.engine {
            let mut host = cpu.new_cache();
            host.reserve(capacity, c.n_kv_heads * c.head_dim);
            return Ok(KvCache {
                layers: Vec::new(),
                host: Some(host),
                len: 0,
                capacity,
                plan: None,
                planned: false,
                plan_counts: (0, 0),
            });
        }
        let g = self.gpu();
        let shape = [c.n_kv_heads, capacity, c.head_dim];
        let layers = (0..g.layers.len())
            .map(|_| {
                let new = || match zero {
                    true => ops::full_on(&g.device, &shape, DType::F32, 0.0),
                    false => Tensor::empty_on(&g.device, &shape, DType::F32),
                };
                Ok((new()?, new()?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache {
            layers,
            host: None,
            len: 0,
            capacity,
            plan: None,
            planned: decode_plan_default(),
            plan_counts: (0, 0),
        })
    }

    /// Makes room for `needed` positions in `cache`: double its capacity (at least) and copy the
    /// filled rows over.
    fn grow(&self, cache: &mut KvCache, needed: usize) -> Result<()> {
        if needed <= cache.capacity {
            return Ok(());
        }
        let c = &self.config;
        let capacity = needed.max(cache.capacity * 2).min(c.context);
        let extra = [c.n_kv_heads, capacity - cache.capacity, c.head_dim];
        for (k, v) in cache.layers.iter_mut() {
            let pad = ops::full_on(&self.gpu().device, &extra, DType::F32, 0.0)?;
            *k = ops::concat(&[k, &pad], 1)?;
            *v = ops::concat(&[v, &pad], 1)?;
        }
        cache.capacity = capacity;
        Ok(())
    }

    /// The prompt for a single user message through the model's chat template (the GGUF's
    /// `tokenizer.chat_template`; ChatML when it has none and its vocabulary has ChatML's tokens,
    /// else an Unsupported error: [`crate::chat_template`]), the
    /// assistant's turn opened.
    pub fn chat_prompt(&self, user: &str) -> Result<String> {
        self.chat_prompt_messages(&[Message::new("user", user)], true)
    }

    /// A conversation through the model's chat template; `add_generation_prompt` opens the
    /// assistant's turn.
    pub fn chat_prompt_messages(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        self.tokenizer.chat_template()?.apply(messages, add_generation_prompt)
    }

    /// Runs `ids` through the decoder after what `cache` holds (all of them in one pass,
    /// causally masked), appends their keys and values to the cache and returns the logits of
    /// the last position (f32, vocabulary long). The GPU backend takes several tokens only
    /// into an empty cache; the CPU backend masks by position and takes them after any prefix.
    pub fn forward(&self, ids: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        if let Engine::Cpu(cpu) = &self.engine {
            return self.cpu_last_logits(cpu, ids, cache);
        }
        Ok(self.step_logits(ids, cache)?.to_vec::<f32>()?)
    }

    /// The CPU backend's [`forward`](Self::forward).
    fn cpu_last_logits(&self, cpu: &CpuLlama, ids: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        let d = self.config.hidden;
        let h = self.cpu_hidden(cpu, ids, cache)?;
        Ok(cpu.logits(&h[h.len() - d..]))
    }

    /// The CPU backend's hidden states [L, D] of `ids` after what `cache` holds, with the GPU
    /// path's checks (an empty pass, the context, a cache of another backend).
    fn cpu_hidden(&self, cpu: &CpuLlama, ids: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        let c = &self.config;
        if ids.is_empty() {
            return Err(ModelError::Tokenizer("no tokens to run".into()));
        }
        if cache.len + ids.len() > c.context {
            return Err(ModelError::Unsupported(format!(
                "{} tokens exceed the model's context of {}",
                cache.len + ids.len(),
                c.context
            )));
        }
        let host =
            cache.host.as_mut().ok_or_else(|| ModelError::Unsupported("a GPU KV cache on the CPU backend".into()))?;
        let h = cpu.hidden(ids, host)?;
        cache.len += ids.len();
        cache.capacity = cache.capacity.max(cache.len);
        Ok(h)
    }

    /// [`forward`](Self::forward), calling `mark(step)` after each step has been recorded, for
    /// profilers (`kiln bench`'s llm section times the GPU work between two marks): through the
    /// ops layer, step by step, never a recorded decode plan (whose token is one step).
    pub fn forward_marked(
        &self,
        ids: &[u32],
        cache: &mut KvCache,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Vec<f32>> {
        if let Engine::Cpu(cpu) = &self.engine {
            let logits = self.cpu_last_logits(cpu, ids, cache)?;
            mark("host forward (cpu backend)")?;
            return Ok(logits);
        }
        Ok(self.last_logits(ids, cache, mark)?.to_vec::<f32>()?)
    }

    /// [`forward`](Self::forward) reduced to the index of the largest logit on the GPU (the
    /// lowest among equals): greedy decoding reads back 4 bytes per token, not the vocabulary's
    /// logits. Unlike [`crate::sampling::argmax`] a NaN logit wins (numpy's argmax).
    pub fn forward_greedy(&self, ids: &[u32], cache: &mut KvCache) -> Result<u32> {
        if let Engine::Cpu(cpu) = &self.engine {
            return Ok(crate::cpu::argmax(&self.cpu_last_logits(cpu, ids, cache)?));
        }
        read_id(&self.greedy_id(ids, cache)?)
    }

    /// The greedy token after `ids`, recorded and left on the GPU (an i32 tensor of shape [1]).
    fn greedy_id(&self, ids: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        let logits = self.step_logits(ids, cache)?;
        argmax_id(&logits)
    }

    /// The last position's logits [1, vocab] after `ids`, on the GPU: a one-token step through
    /// the cache's decode plan ([`token_logits`](Self::token_logits)), a longer one through the
    /// ops layer. The plan's logits are rewritten by its next replay: read them (or record what
    /// reads them) before the next step.
    fn step_logits(&self, ids: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        if ids.len() == 1 && cache.planned {
            let id = Tensor::from_slice_on(self.device(), ids, &[1])?;
            return self.token_logits(&id, cache);
        }
        self.last_logits(ids, cache, &mut |_| Ok(()))
    }

    /// Records one token through the cache's decode plan, capturing it first where there is none
    /// or it does not hold ([`DecodePlan`]). The checks of [`hidden_from`](Self::hidden_from)
    /// that depend on the step come first (the context, the cache's model, its growth).
    fn planned_logits(&self, id: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let gpu = self.gpu();
        if cache.len + 1 > self.config.context {
            return Err(ModelError::Unsupported(format!(
                "{} tokens exceed the model's context of {}",
                cache.len + 1,
                self.config.context
            )));
        }
        if cache.layers.len() != gpu.layers.len() || cache.host.is_some() {
            return Err(ModelError::Unsupported("a KV cache made by another model".into()));
        }
        self.grow(cache, cache.len + 1)?;
        if let Some(p) = &cache.plan {
            let same = p.model == gpu.id && cache.layers.first().is_some_and(|kv| kv.0.shares_buffer(&p.keys));
            if same && cache.len >= p.pos {
                if let Some(logits) = p.plan.replay(id, cache.len - p.pos)? {
                    cache.len += 1;
                    cache.plan_counts.1 += 1;
                    return Ok(logits);
                }
            }
        }
        cache.plan = None;
        let pos = cache.len;
        let (logits, plan) = Plan::capture(id, |id| {
            let h = self.hidden_from(id, cache, &mut |_| Ok(()))?;
            self.head_logits(h, &mut |_| Ok(()))
        })?;
        if let (Ok(plan), Some((keys, _))) = (plan, cache.layers.first()) {
            cache.plan = Some(DecodePlan { plan, model: gpu.id, pos, keys: keys.clone() });
            cache.plan_counts.0 += 1;
        }
        Ok(logits)
    }

    /// Token ids a caller passes in: each must be below the vocabulary (the embedding op reads
    /// a row of zeros for one past it, and a score would index past the logits).
    fn check_ids(&self, ids: &[u32]) -> Result<()> {
        match ids.iter().position(|&t| t as usize >= self.config.vocab) {
            Some(i) => Err(kiln_core::Error::InvalidArgument(format!(
                "token id {} at position {i} is past the vocabulary of {}",
                ids[i], self.config.vocab
            ))
            .into()),
            None => Ok(()),
        }
    }

    /// Log-probability (natural log) of each token of `ids` after the first, given the tokens
    /// before it: `ids.len() - 1` values from one pass ([`logits_all`](Self::logits_all)),
    /// log-softmax in f64. Their sum is the text's log-likelihood given its first token
    /// (ranking continuations; [`perplexity`](Self::perplexity)).
    pub fn score(&self, ids: &[u32]) -> Result<Vec<f64>> {
        self.check_ids(ids)?;
        if ids.len() < 2 {
            return Ok(Vec::new());
        }
        let v = self.config.vocab;
        let logits = self.logits_all(&ids[..ids.len() - 1])?;
        Ok(logits
            .chunks_exact(v)
            .zip(&ids[1..])
            .map(|(row, &next)| {
                // A NaN logit makes every score NaN (no silent pick); -inf rows stay -inf.
                let top = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
                let sum: f64 = row.iter().map(|&x| (x as f64 - top).exp()).sum();
                row[next as usize] as f64 - top - sum.ln()
            })
            .collect())
    }

    /// exp(-mean log-probability) of the tokens of `ids` after the first ([`score`](Self::score)):
    /// the model's perplexity on the text. Needs at least two tokens.
    pub fn perplexity(&self, ids: &[u32]) -> Result<f64> {
        if ids.len() < 2 {
            return Err(kiln_core::Error::InvalidArgument(format!(
                "perplexity of {} token(s): needs at least two",
                ids.len()
            ))
            .into());
        }
        let s = self.score(ids)?;
        Ok((-s.iter().sum::<f64>() / s.len() as f64).exp())
    }

    /// Logits of every position of `ids` from an empty cache ([len, vocab] row-major): what
    /// greedy decoding would see at each step if it had produced `ids`, in one pass.
    pub fn logits_all(&self, ids: &[u32]) -> Result<Vec<f32>> {
        self.check_ids(ids)?;
        let c = &self.config;
        let mut cache = self.cache_with_capacity(ids.len())?;
        if let Engine::Cpu(cpu) = &self.engine {
            return Ok(cpu.logits(&self.cpu_hidden(cpu, ids, &mut cache)?));
        }
        let h = self.hidden(ids, &mut cache, &mut |_| Ok(()))?;
        let l = ids.len();
        // A few rows at a time: the projection over the whole vocabulary is the model's largest
        // matmul, and on a slow device (lavapipe, long prompts) one wait for all of it could
        // outlast KILN_TIMEOUT_MS.
        let mut out = Vec::with_capacity(l * c.vocab);
        for start in (0..l).step_by(8) {
            let rows = ops::slice(&h, 0, start as isize, (start + 8).min(l) as isize, 1)?;
            out.extend(self.capped(self.head().matmul(&rows, self.final_norm())?)?.to_vec::<f32>()?);
        }
        Ok(out)
    }

    /// The output projection (the embedding table when tied).
    fn head(&self) -> &QMatrix {
        let g = self.gpu();
        g.output.as_ref().unwrap_or(&g.embed)
    }

    fn final_norm(&self) -> QuantFusion<'_> {
        QuantFusion { rms_norm: Some((&self.gpu().output_norm, self.config.rms_eps)), ..Default::default() }
    }

    /// The last position's logits [1, vocab], on the GPU.
    fn last_logits(
        &self,
        ids: &[u32],
        cache: &mut KvCache,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        let h = self.hidden(ids, cache, mark)?;
        self.head_logits(h, mark)
    }

    /// The logits [1, vocab] after the last row of the hidden states `h` [L, D], on the GPU.
    fn head_logits(&self, h: Tensor, mark: &mut dyn FnMut(&'static str) -> Result<()>) -> Result<Tensor> {
        let l = h.shape()[0];
        let last = if l == 1 { h } else { ops::slice(&h, 0, l as isize - 1, l as isize, 1)? };
        let logits = self.capped(self.head().matmul(&last, self.final_norm())?)?;
        mark("rms_norm + output matvec (vocabulary)")?;
        Ok(logits)
    }

    /// The decoder's last hidden states [L, D] for `ids` after what `cache` holds; their keys
    /// and values are written into the cache. Per layer and token: the QKV matvec (its RMSNorm
    /// folded in, RoPE and the cache write in its epilogue), attention over the cache (split
    /// over its length, the splits merged by the last workgroup of each row), the output matvec
    /// (residual folded in), the gate/up matvec (RMSNorm and SwiGLU folded in), the down matvec
    /// (residual folded in) — 5 dispatches (7 with `KILN_DECODE_FUSE=0`).
    fn hidden(
        &self,
        ids: &[u32],
        cache: &mut KvCache,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        if ids.is_empty() {
            return Err(ModelError::Tokenizer("no tokens to run".into()));
        }
        let ids_t = Tensor::from_slice_on(self.device(), ids, &[ids.len()])?;
        self.hidden_from(&ids_t, cache, mark)
    }

    /// [`hidden`](Self::hidden) for ids already on the GPU (a 1-D i32 or u32 tensor): the
    /// decode loop feeds each step the token the last one picked, never reading it first.
    fn hidden_from(
        &self,
        ids_t: &Tensor,
        cache: &mut KvCache,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        let c = &self.config;
        let l = ids_t.numel();
        if l == 0 {
            return Err(ModelError::Tokenizer("no tokens to run".into()));
        }
        if ids_t.ndim() != 1 {
            return Err(ModelError::Unsupported(format!("token ids of shape {:?} (one row of ids)", ids_t.shape())));
        }
        if cache.len + l > c.context {
            return Err(ModelError::Unsupported(format!(
                "{} tokens exceed the model's context of {}",
                cache.len + l,
                c.context
            )));
        }
        // Causal masking in ops::attention is top-left aligned: right for a pass over all
        // positions (empty cache) and for one query (it sees every key); a multi-token pass
        // after a filled cache would need a bottom-right mask.
        if !cache.is_empty() && l > 1 {
            return Err(ModelError::Unsupported("several tokens after a filled cache".into()));
        }
        let gpu = self.gpu();
        if cache.layers.len() != gpu.layers.len() || cache.host.is_some() {
            return Err(ModelError::Unsupported("a KV cache made by another model".into()));
        }
        self.grow(cache, cache.len + l)?;
        let (hd, nh, nkv) = (c.head_dim, c.n_heads, c.n_kv_heads);
        let (group, cap, pos) = (nh / nkv, cache.capacity, cache.len);
        let mut h = self.embedding(ids_t)?; // [L, D]
        mark("embedding")?;
        let dims = |d: &[usize]| d.iter().map(|&x| x as isize).collect::<Vec<_>>();
        for (i, (layer, (kc, vc))) in gpu.layers.iter().zip(cache.layers.iter()).enumerate() {
            let norm = |w| QuantFusion { rms_norm: Some((w, c.rms_eps)), ..Default::default() };
            // The QKV matvec with RoPE and the cache write in its epilogue (one dispatch at
            // decode; prefill runs the matmul and `rope_qkv_to_cache`).
            let (qkv, norm_w) = (&layer.qkv, Some((&layer.attn_norm, c.rms_eps)));
            let (base, factors) = self.layer_rope(i);
            let q = if layer.qkv_bias.is_none() && layer.qk_norm.is_none() {
                // One dispatch per format of the stack (a Q4_K_M's Q4_K Q and K, Q6_K V).
                let parts: Vec<ops::QuantRows> = std::iter::once(qkv)
                    .chain(&qkv.rest)
                    .map(|m| ops::QuantRows { w: &m.w, format: m.format, rows: m.rows })
                    .collect();
                ops::quant_qkv_stack_rope_to_cache(&h, &parts, norm_w, kc, vc, nh, pos, base, factors)?
            } else {
                // Biases or QK-norm: the product (plus biases, normed), then RoPE and the write.
                let y = layer.qkv_projection(&h, norm(&layer.attn_norm), MatvecKernel::Auto)?;
                let y = self.qk_normed(layer, y)?;
                ops::rope_qkv_to_cache_scaled(&y, kc, vc, nh, pos, base, factors)?
            }; // [nh, L, hd]
            mark("rms_norm + qkv matvec + rope + kv cache write")?;
            // Grouped-query attention: query head g*group + j reads KV head g (llama.cpp's
            // and Hugging Face's order), by broadcasting K and V over the group axis.
            let qg = q.reshape(&dims(&[nkv, group, l, hd]))?;
            let kg = kc.reshape(&dims(&[nkv, 1, cap, hd]))?;
            let vg = vc.reshape(&dims(&[nkv, 1, cap, hd]))?;
            let (scale, opts) = (c.query_scale(), c.score_options(i));
            let a = ops::attention_scored(&qg, &kg, &vg, None, Some(pos + l), l > 1, scale, opts, AttentionPath::Auto)?; // [nkv, group, L, hd]
            let a = if l == 1 {
                a.reshape(&dims(&[1, c.q_dim()]))?
            } else {
                ops::transpose(&a.reshape(&dims(&[nh, l, hd]))?, 0, 1)?.reshape(&dims(&[l, c.q_dim()]))?
            };
            mark("attention")?;
            h = self.branch(&layer.o, &a, &h, layer.post_norms.as_ref().map(|p| &p.0), MatvecKernel::Auto)?;
            mark("o matvec + residual")?;
            let g = self.gated(layer, &h, MatvecKernel::Auto)?;
            mark("rms_norm + gate/up matvec + swiglu")?;
            h = self.branch(&layer.down, &g, &h, layer.post_norms.as_ref().map(|p| &p.1), MatvecKernel::Auto)?;
            mark("down matvec + residual")?;
            if l > 1 {
                if gpu.wait_each_layer {
                    // On a CPU adapter (lavapipe: only tests take the GPU path there) a
                    // multi-token pass waits for each layer, so that no single wait spans a
                    // long prompt's whole pass and outlasts KILN_TIMEOUT_MS.
                    gpu.device.synchronize()?;
                } else {
                    // A GPU starts on each layer while the next is recorded, and the pass's
                    // one wait is the caller's read: each layer's round trip cost the first
                    // token ~0.2 ms (30 of them in SmolLM2's 18.8 ms on the H200), and a GPU
                    // prefills even an 8k-token prompt far inside the 60 s default timeout.
                    gpu.device.flush()?;
                }
            }
        }
        cache.len += l;
        Ok(h)
    }

    /// Layer `i`'s RoPE base and factors on the GPU ([`LlamaConfig::layer_rope`]).
    fn layer_rope(&self, i: usize) -> (f32, Option<&Tensor>) {
        let gpu = self.gpu();
        match &self.config.gemma {
            Some(g) if g.local[i] => (g.rope_base_local, gpu.rope_factors_local.as_ref()),
            _ => (self.config.rope_base, gpu.rope_factors.as_ref()),
        }
    }

    /// `y` [rows, (nh + 2 nkv) hd] (Q, K, V side by side) with Gemma 3's per-head RMSNorm of
    /// its query and key heads, where the layer has one.
    /// Every head normed, times its weight row, then V's heads taken back as they were: no
    /// slices or concatenations (buffer copies), so a decode plan records it.
    fn qk_normed(&self, layer: &Layer, y: Tensor) -> Result<Tensor> {
        let (Some(w), Some(sel)) = (&layer.qk_norm, &self.gpu().qk_heads) else { return Ok(y) };
        let c = &self.config;
        let (rows, width) = (y.shape()[0] as isize, y.shape()[1] as isize);
        let heads = y.reshape(&[rows, width / c.head_dim as isize, c.head_dim as isize])?;
        let normed = ops::mul(&ops::rms_norm(&heads, None, c.rms_eps)?, w)?;
        Ok(ops::where_(sel, &normed, &heads)?.reshape(&[rows, width])?)
    }

    /// `h` plus `w`'s product with `x` (the residual folded into the product), or, with Gemma
    /// 2/3's post-norm `post`, plus the product's RMSNorm.
    fn branch(
        &self,
        w: &QMatrix,
        x: &Tensor,
        h: &Tensor,
        post: Option<&Tensor>,
        kernel: MatvecKernel,
    ) -> Result<Tensor> {
        match post {
            None => w.matmul_on(x, QuantFusion { residual: Some(h), ..Default::default() }, kernel),
            Some(n) => {
                let y = w.matmul_on(x, QuantFusion::default(), kernel)?;
                Ok(ops::add(h, &ops::rms_norm(&y, Some(n), self.config.rms_eps)?)?)
            }
        }
    }

    /// `logits` soft-capped as Gemma 2 caps them (cap * tanh(logits / cap)); else as they are.
    fn capped(&self, logits: Tensor) -> Result<Tensor> {
        match self.config.gemma.as_ref().and_then(|g| g.final_softcap) {
            None => Ok(logits),
            Some(cap) => {
                let t = ops::tanh(&ops::mul_scalar(&logits, 1.0 / cap as f64)?)?;
                Ok(ops::mul_scalar(&t, cap as f64)?)
            }
        }
    }

    /// The embedding rows of `ids` [L, D] (times sqrt(D) for Gemma: [`Architecture::embedding_scale`]).
    fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        let (c, gpu) = (&self.config, self.gpu());
        let h = ops::quant_embedding(&gpu.embed.w, gpu.embed.format, c.hidden, ids)?;
        match c.arch.embedding_scale(c.hidden) {
            Some(s) => Ok(ops::mul_scalar(&h, s as f64)?),
            None => Ok(h),
        }
    }

    /// The gated feed-forward's inner activations of `h` [L, D]: the gate/up product with the
    /// layer's RMSNorm folded in, then act(gate) * up — SiLU folded into the product (SwiGLU),
    /// or Gemma's tanh-GELU (GeGLU) after it.
    fn gated(&self, layer: &Layer, h: &Tensor, kernel: MatvecKernel) -> Result<Tensor> {
        let norm = QuantFusion { rms_norm: Some((&layer.ffn_norm, self.config.rms_eps)), ..Default::default() };
        if !self.config.arch.gelu_gate() {
            return layer.gate_up.matmul_on(h, QuantFusion { swiglu: true, ..norm }, kernel);
        }
        let y = layer.gate_up.matmul_on(h, norm, kernel)?;
        let axis = y.ndim() as isize - 1;
        let (gate, up) = self.gpu().geglu_halves.as_ref().expect("GeGLU's halves are made at load");
        let (gate, up) = (ops::index_select(&y, axis, gate)?, ops::index_select(&y, axis, up)?);
        Ok(ops::mul(&ops::gelu_tanh(&gate)?, &up)?)
    }

    /// Batched decode's caches: per layer the B sequences' caches (each prefilled alone, all of
    /// one capacity) stacked into [B, n_kv_heads, capacity, head_dim] keys and values.
    #[cfg(not(target_arch = "wasm32"))] // batch.rs is native only
    pub(crate) fn stack_caches(&self, caches: &[KvCache]) -> Result<Vec<(Tensor, Tensor)>> {
        let c = &self.config;
        let cap = caches.first().map_or(0, |k| k.capacity);
        if caches.iter().any(|k| k.capacity != cap || k.host.is_some() || k.layers.len() != c.n_layers) {
            return Err(ModelError::Unsupported("batched caches of different capacities or models".into()));
        }
        let one = [1, c.n_kv_heads as isize, cap as isize, c.head_dim as isize];
        (0..c.n_layers)
            .map(|i| {
                let stack = |kv: fn(&(Tensor, Tensor)) -> &Tensor| -> Result<Tensor> {
                    let parts =
                        caches.iter().map(|k| kv(&k.layers[i]).reshape(&one)).collect::<kiln_core::Result<Vec<_>>>()?;
                    Ok(ops::concat(&parts.iter().collect::<Vec<_>>(), 0)?)
                };
                Ok((stack(|kv| &kv.0)?, stack(|kv| &kv.1)?))
            })
            .collect()
    }

    /// One batched decode step: token `ids[b]` (a [B] i32/u32 tensor: uploaded, or the last
    /// step's picks left on the GPU) of sequence b at position `positions[b]` (its cache's
    /// length before it), all B rows through each weight product together (W read once
    /// a step, not B times), each row's keys and values written into its own cache
    /// (`ops::rope_qkv_rows_to_cache`) and its attention over its own positions only (one
    /// dispatch for the batch, every row masked past its length). Returns the logits [B, vocab]
    /// on the GPU. Per layer: QKV matvec (norm folded in), RoPE + cache write, attention, and
    /// the three matvecs of [`hidden`](Self::hidden). `products` picks the weight products'
    /// kernel (see [`crate::batch::BatchProducts`]).
    #[cfg(not(target_arch = "wasm32"))] // batch.rs is native only
    pub(crate) fn batch_step(
        &self,
        ids: &Tensor,
        positions: &[usize],
        caches: &[(Tensor, Tensor)],
        products: crate::batch::BatchProducts,
    ) -> Result<Tensor> {
        let c = &self.config;
        let gpu = self.gpu();
        let b = ids.numel();
        if b == 0 || ids.ndim() != 1 || positions.len() != b || caches.len() != gpu.layers.len() {
            return Err(ModelError::Unsupported(format!(
                "a batched step of {b} ids, {} positions and {} layers of caches",
                positions.len(),
                caches.len()
            )));
        }
        let (hd, nh, nkv) = (c.head_dim, c.n_heads, c.n_kv_heads);
        let group = nh / nkv;
        let cap = caches[0].0.shape()[2];
        // Keys 0 ..= positions[b] of row b: the longest row's span, the rest masked to -inf.
        let span = positions.iter().max().map_or(0, |&p| p + 1).min(cap);
        // Gemma 2/3's local layers: also the keys before each row's window (positions p - w + 1 ..= p).
        let masked = |window: Option<usize>| -> Result<Tensor> {
            let mut mask = vec![0f32; b * span];
            for (row, &p) in mask.chunks_mut(span.max(1)).zip(positions) {
                row.iter_mut().skip(p + 1).for_each(|m| *m = f32::NEG_INFINITY);
                let first = window.map_or(0, |w| (p + 1).saturating_sub(w));
                row.iter_mut().take(first).for_each(|m| *m = f32::NEG_INFINITY);
            }
            Ok(Tensor::from_slice_on(&gpu.device, &mask, &[b, 1, 1, 1, span])?)
        };
        let dev = &gpu.device;
        let mask = masked(None)?;
        let local_mask = c.gemma.as_ref().and_then(|g| g.window).map(|w| masked(Some(w))).transpose()?;
        let mut h = self.embedding(ids)?; // [B, D]
        let dims = |d: &[usize]| d.iter().map(|&x| x as isize).collect::<Vec<_>>();
        for (i, (layer, (kc, vc))) in gpu.layers.iter().zip(caches).enumerate() {
            let norm = |w| QuantFusion { rms_norm: Some((w, c.rms_eps)), ..Default::default() };
            let k = |m: &QMatrix| m.batch_kernel(products, b);
            let qkv = layer.qkv_projection(&h, norm(&layer.attn_norm), k(&layer.qkv))?; // [B, (nh + 2 nkv) hd]
            let qkv = self.qk_normed(layer, qkv)?;
            let (base, ff) = self.layer_rope(i);
            let q = ops::rope_qkv_rows_to_cache_scaled(&qkv, kc, vc, nh, positions, base, ff)?; // [B, nh, hd]
            let qg = q.reshape(&dims(&[b, nkv, group, 1, hd]))?;
            let kg = kc.reshape(&dims(&[b, nkv, 1, cap, hd]))?;
            let vg = vc.reshape(&dims(&[b, nkv, 1, cap, hd]))?;
            // The window as a mask here: each row's keys end at its own position, not at `span`.
            let opts = ScoreOptions { window: None, ..c.score_options(i) };
            let m = if c.score_options(i).window.is_some() { local_mask.as_ref() } else { Some(&mask) };
            let a =
                ops::attention_scored(&qg, &kg, &vg, m, Some(span), false, c.query_scale(), opts, AttentionPath::Auto)?;
            let a = a.reshape(&dims(&[b, c.q_dim()]))?;
            let post = layer.post_norms.as_ref();
            h = self.branch(&layer.o, &a, &h, post.map(|p| &p.0), k(&layer.o))?;
            let g = self.gated(layer, &h, k(&layer.gate_up))?;
            h = self.branch(&layer.down, &g, &h, post.map(|p| &p.1), k(&layer.down))?;
            if gpu.wait_each_layer {
                // A CPU adapter (lavapipe) waits for each layer, as a long prefill does: one
                // SmolLM2 step of 16 rows there is ~1 minute, past KILN_TIMEOUT_MS's default.
                dev.synchronize()?;
            }
        }
        let head = self.head();
        self.capped(head.matmul_on(&h, self.final_norm(), head.batch_kernel(products, b))?)
    }

    /// The prompt's last logits [1, vocab], left on the GPU (the decode loop's first step).
    pub(crate) fn prompt_logits(&self, ids: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        self.step_logits(ids, cache)
    }

    /// The logits [1, vocab] after one token whose id is on the GPU (a [1] i32/u32 tensor),
    /// through the cache's decode plan when it is on (see [`step_logits`](Self::step_logits)).
    pub(crate) fn token_logits(&self, id: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        if cache.planned && id.shape() == [1] {
            return self.planned_logits(id, cache);
        }
        let h = self.hidden_from(id, cache, &mut |_| Ok(()))?;
        self.head_logits(h, &mut |_| Ok(()))
    }

    /// One decode token's logits [1, vocab] recorded and left on the GPU, as the serial loop
    /// records it (the recording-cost harness times this, then reads them).
    #[doc(hidden)]
    pub fn record_token(&self, id: u32, cache: &mut KvCache) -> Result<Tensor> {
        if self.backend() == Backend::Cpu {
            return Err(ModelError::Unsupported("recording a token on the CPU backend".into()));
        }
        self.step_logits(&[id], cache)
    }

    /// The GPU path's device (a GPU step on the CPU backend is a bug: see [`CausalLM::gpu`]).
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.gpu().device
    }

    /// Logits after `ids` from an empty cache.
    pub fn logits(&self, ids: &[u32]) -> Result<Vec<f32>> {
        self.check_ids(ids)?;
        self.forward(ids, &mut self.cache_with_capacity(ids.len())?)
    }

    /// Text pieces continuing `prompt` (tokenized as is: apply [`chat_prompt`](Self::chat_prompt)
    /// first for chat), produced lazily: the prompt runs at the first `next()`.
    pub fn generate(&self, prompt: &str, opts: GenerateOptions) -> Result<Generation<'_>> {
        let ids = self.tokenizer.encode(prompt)?;
        Ok(self.generate_from_ids(ids, opts))
    }

    pub fn generate_from_ids(&self, prompt: Vec<u32>, opts: GenerateOptions) -> Generation<'_> {
        Generation::new(ModelRef::Borrowed(self), prompt, opts)
    }

    /// [`generate`](Self::generate) holding the model by `Arc`, for a generation that outlives
    /// the borrow (a Python iterator, another thread).
    pub fn generate_shared(self: &Arc<Self>, prompt: &str, opts: GenerateOptions) -> Result<Generation<'static>> {
        let ids = self.tokenizer.encode(prompt)?;
        Ok(Generation::new(ModelRef::Shared(Arc::clone(self)), ids, opts))
    }
}

/// Whether `t` ends a generation under `opts` (EOS or an `<|im_end|>`-style control token,
/// when `stop_at_eos`).
pub(crate) fn is_stop_token(tokenizer: &GgufTokenizer, opts: &GenerateOptions, t: u32) -> bool {
    opts.stop_at_eos && (Some(t) == tokenizer.eos || tokenizer.is_control(t))
}

/// A sequence's tokens turned into the text pieces a caller sees: UTF-8 held back until a
/// character is whole, text held back while it could begin a stop string, the end flushing what
/// was held. [`Generation`] and [`crate::batch`] stream through it.
pub(crate) struct TextStream {
    utf8: Utf8Stream,
    stops: StopStrings,
    /// A stop string was met or the end was pushed: push nothing more.
    pub(crate) done: bool,
}

impl TextStream {
    pub(crate) fn new(stop: &[String]) -> TextStream {
        TextStream { utf8: Utf8Stream::default(), stops: StopStrings::new(stop), done: false }
    }

    /// The text `t` releases (possibly empty); None is the end (max_tokens or a stop token:
    /// the caller leaves stop tokens out), releasing what was held back.
    pub(crate) fn push(&mut self, tokenizer: &GgufTokenizer, t: Option<u32>) -> String {
        match t {
            Some(t) => {
                let piece = self.utf8.push(tokenizer.piece(t));
                let out = self.stops.push(&piece);
                self.done = self.stops.stopped();
                out
            }
            None => {
                self.done = true;
                let tail = self.utf8.finish();
                let mut out = self.stops.push(&tail);
                if !self.stops.stopped() {
                    out += &self.stops.finish();
                }
                out
            }
        }
    }
}

/// What the serial loop reads back for a token.
enum Serial {
    Id(Tensor),
    Logits(Tensor),
}

/// A token id tensor read back (waits for the GPU).
fn read_id(id: &Tensor) -> Result<u32> {
    let i = id.to_f64_vec()?;
    Ok(i.first().copied().unwrap_or(0.0) as u32)
}

enum ModelRef<'a> {
    Borrowed(&'a CausalLM),
    Shared(Arc<CausalLM>),
}

impl std::ops::Deref for ModelRef<'_> {
    type Target = CausalLM;

    fn deref(&self) -> &CausalLM {
        match self {
            ModelRef::Borrowed(m) => m,
            ModelRef::Shared(m) => m,
        }
    }
}

impl<'a> Generation<'a> {
    fn new(model: ModelRef<'a>, prompt: Vec<u32>, opts: GenerateOptions) -> Generation<'a> {
        let sampler = Sampler::new(opts.sampling.clone());
        let text = TextStream::new(&opts.stop);
        Generation {
            cache: None,
            model,
            stats: GenerationStats { prompt_tokens: prompt.len(), ..Default::default() },
            history: prompt,
            generated: Vec::new(),
            sampler,
            opts,
            text,
            done: false,
            lookahead: LOOKAHEAD,
            decode_plan: decode_plan_default(),
            decode: None,
        }
    }

    /// Tokens the GPU-resident loop (greedy or sampled) records ahead of the last id read back (default
    /// [`LOOKAHEAD`]); 0 runs the serial loop (record a token, read its id, record the next),
    /// kept as the reference the pipelined loop is tested against. Set before the first token.
    #[doc(hidden)]
    pub fn with_lookahead(mut self, tokens: usize) -> Self {
        self.lookahead = tokens;
        self
    }

    /// Whether decode tokens replay a recorded plan (default `KILN_DECODE_PLAN`'s, on); off,
    /// each goes through the ops layer: the reference the plan is tested against. Set before
    /// the first token.
    #[doc(hidden)]
    pub fn with_decode_plan(mut self, on: bool) -> Self {
        self.decode_plan = on;
        self
    }
}

/// An iterator of text pieces; see [`CausalLM::generate`]. A piece is never empty; an error ends
/// the iteration.
pub struct Generation<'a> {
    model: ModelRef<'a>,
    /// Made at the first step, sized for the prompt and `max_tokens`.
    cache: Option<KvCache>,
    history: Vec<u32>,
    generated: Vec<u32>,
    sampler: Sampler,
    opts: GenerateOptions,
    text: TextStream,
    stats: GenerationStats,
    done: bool,
    /// Tokens recorded ahead by the GPU-resident loop (0: serial).
    lookahead: usize,
    /// Whether the cache's decode plan is on ([`KvCache::set_decode_plan`]).
    decode_plan: bool,
    /// The GPU-resident loop, made at the first step when it runs.
    decode: Option<DecodeLoop>,
}

impl Generation<'_> {
    /// Tokens generated so far (the stop token included when generation ended on one).
    pub fn tokens(&self) -> &[u32] {
        &self.generated
    }

    pub fn stats(&self) -> &GenerationStats {
        &self.stats
    }

    /// Runs generation to the end and returns the whole text.
    pub fn text(&mut self) -> Result<String> {
        let mut s = String::new();
        for piece in self.by_ref() {
            s.push_str(&piece?);
        }
        Ok(s)
    }

    fn is_stop_token(&self, t: u32) -> bool {
        is_stop_token(&self.model.tokenizer, &self.opts, t)
    }

    /// Checks before a step: `None` when max_tokens are out, else (prefill, start time), the
    /// cache made at the first step.
    fn begin_step(&mut self) -> Result<Option<(bool, Instant)>> {
        if self.generated.len() >= self.opts.max_tokens {
            return Ok(None);
        }
        let t0 = Instant::now();
        let prefill = self.cache.is_none();
        if prefill && self.history.is_empty() {
            return Err(ModelError::Tokenizer("empty prompt".into()));
        }
        if prefill {
            let capacity = self.history.len().saturating_add(self.opts.max_tokens);
            let mut cache = self.model.cache_with_capacity(capacity)?;
            if self.model.backend() == Backend::Gpu {
                cache.set_decode_plan(self.decode_plan);
            }
            self.cache = Some(cache);
        }
        Ok(Some((prefill, t0)))
    }

    /// Books token `t` after a step.
    fn end_step(&mut self, t: u32, prefill: bool, t0: Instant) {
        if prefill {
            self.stats.prefill = t0.elapsed();
        } else {
            self.stats.decode += t0.elapsed();
        }
        self.history.push(t);
        self.generated.push(t);
        self.stats.generated_tokens += 1;
    }

    /// The ids a serial step runs: the prompt at the first step, else the last token.
    fn step_ids(&self, prefill: bool) -> &[u32] {
        if prefill {
            &self.history[..]
        } else {
            &self.history[self.history.len() - 1..]
        }
    }

    /// The serial GPU step up to its readback: the token's id (greedy) or logits, recorded and
    /// submitted.
    fn record_serial(&mut self, prefill: bool, t0: Instant) -> Result<Serial> {
        let greedy = self.sampler.is_plain_greedy();
        let ids = self.step_ids(prefill).to_vec();
        let cache = self.cache.as_mut().expect("begin_step made the cache");
        let model = &self.model;
        let t = if greedy {
            Serial::Id(model.greedy_id(&ids, cache)?)
        } else {
            Serial::Logits(model.step_logits(&ids, cache)?)
        };
        let recorded = t0.elapsed();
        model.device().flush()?;
        if !prefill {
            self.stats.decode_recording += recorded;
            self.stats.decode_submitting += t0.elapsed() - recorded;
        }
        Ok(t)
    }

    /// The next token, running the model as needed.
    fn step(&mut self) -> Result<Option<u32>> {
        let Some((prefill, t0)) = self.begin_step()? else { return Ok(None) };
        let t = if self.model.backend() == Backend::Cpu {
            // The host path: nothing to overlap (no GPU), the host sampler as it is.
            let greedy = self.sampler.is_plain_greedy();
            let ids = self.step_ids(prefill).to_vec();
            let cache = self.cache.as_mut().expect("begin_step made the cache");
            let t = if greedy {
                self.model.forward_greedy(&ids, cache)?
            } else {
                let logits = self.model.forward(&ids, cache)?;
                self.sampler.sample(&logits, &self.history)
            };
            if !prefill {
                self.stats.decode_recording += t0.elapsed();
            }
            t
        } else if self.lookahead > 0 {
            self.step_pipelined(prefill)?
        } else {
            let submitted = self.record_serial(prefill, t0)?;
            let waiting_from = t0.elapsed();
            let t = match submitted {
                Serial::Id(id) => read_id(&id)?,
                Serial::Logits(l) => {
                    let logits = l.to_vec::<f32>()?;
                    self.sampler.sample(&logits, &self.history)
                }
            };
            if !prefill {
                self.stats.decode_waiting += t0.elapsed() - waiting_from;
            }
            t
        };
        self.end_step(t, prefill, t0);
        Ok(Some(t))
    }

    /// [`step`](Self::step) with the GPU's answer awaited, not waited for (the browser's way:
    /// the page's thread runs other tasks meanwhile). The same GPU work as `step`, so the same
    /// tokens: the pipelined loop ([`DecodeLoop::next_async`]) or, with a lookahead of 0, the
    /// serial one. The host path runs as in `step` (nothing to await).
    pub async fn step_async(&mut self) -> Result<Option<u32>> {
        if self.model.backend() == Backend::Cpu {
            return self.step();
        }
        let Some((prefill, t0)) = self.begin_step()? else { return Ok(None) };
        let t = if self.lookahead > 0 {
            self.step_pipelined_async(prefill).await?
        } else {
            let submitted = self.record_serial(prefill, t0)?;
            let waiting_from = t0.elapsed();
            let t = match submitted {
                Serial::Id(id) => read_id_async(&id).await?,
                Serial::Logits(l) => {
                    let logits = l.to_vec_async::<f32>().await?;
                    self.sampler.sample(&logits, &self.history)
                }
            };
            if !prefill {
                self.stats.decode_waiting += t0.elapsed() - waiting_from;
            }
            t
        };
        self.end_step(t, prefill, t0);
        Ok(Some(t))
    }

    /// The GPU-resident loop, made at the first step: greedy's [`Argmax`] or, sampling,
    /// [`SamplePicker`] (the host sampler's tokens, picked on the GPU).
    fn decode_loop(&mut self) -> &mut DecodeLoop {
        let lookahead = self.lookahead;
        let greedy = self.sampler.is_plain_greedy();
        let (sampler, prompt) = (&self.sampler, &self.history[..self.stats.prompt_tokens]);
        let max_len = prompt.len().saturating_add(self.opts.max_tokens);
        self.decode.get_or_insert_with(|| {
            let picker: Box<dyn TokenPicker> =
                if greedy { Box::new(Argmax) } else { Box::new(SamplePicker::new(sampler.clone(), prompt, max_len)) };
            DecodeLoop::new(picker, lookahead)
        })
    }

    /// Books the loop's host times since `before` into the stats.
    fn book_loop_times(&mut self, before: LoopTimes, prefill: bool) {
        let now = self.decode.as_ref().map_or(before, |dl| dl.times);
        self.stats.decode_recording += now.recording - before.recording;
        self.stats.decode_submitting += now.submitting - before.submitting;
        if !prefill {
            self.stats.decode_waiting += now.waiting - before.waiting;
        }
    }

    /// The GPU-resident loop (`decode_loop`): ids stay on the GPU, several tokens in flight;
    /// sampling there too (`sample_picker`).
    #[cfg(not(target_arch = "wasm32"))]
    fn step_pipelined(&mut self, prefill: bool) -> Result<u32> {
        let before = self.decode_loop().times;
        let dl = self.decode.as_mut().expect("made above");
        let cache = self.cache.as_mut().expect("begin_step made the cache");
        let t = dl.next(&self.model, cache, &self.history[..self.stats.prompt_tokens], self.opts.max_tokens);
        self.book_loop_times(before, prefill);
        t
    }

    #[cfg(target_arch = "wasm32")]
    fn step_pipelined(&mut self, _prefill: bool) -> Result<u32> {
        Err(ModelError::Unsupported(
            "a blocking step in the page (its GPU answers arrive only through the event loop): use next_async".into(),
        ))
    }

    /// [`step_pipelined`](Self::step_pipelined) with the readbacks awaited.
    #[cfg(target_arch = "wasm32")]
    async fn step_pipelined_async(&mut self, prefill: bool) -> Result<u32> {
        let before = self.decode_loop().times;
        let dl = self.decode.as_mut().expect("made above");
        let cache = self.cache.as_mut().expect("begin_step made the cache");
        let t =
            dl.next_async(&self.model, cache, &self.history[..self.stats.prompt_tokens], self.opts.max_tokens).await;
        self.book_loop_times(before, prefill);
        t
    }

    /// Natively the awaited step is the blocking one (`to_bytes_async` natively waits too).
    #[cfg(not(target_arch = "wasm32"))]
    async fn step_pipelined_async(&mut self, prefill: bool) -> Result<u32> {
        self.step_pipelined(prefill)
    }

    /// What a step's outcome gives the caller: `None` to step again (no text yet), else a piece
    /// or the error that ends the iteration.
    fn after_step(&mut self, step: Result<Option<u32>>) -> Option<Result<String>> {
        let t = match step {
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
            Ok(t) => t,
        };
        let t = t.filter(|&t| !self.is_stop_token(t));
        let out = self.text.push(&self.model.tokenizer, t);
        self.done = self.text.done;
        (!out.is_empty()).then_some(Ok(out))
    }

    /// The next text piece, awaited ([`Iterator::next`] with [`step_async`](Self::step_async)).
    pub async fn next_async(&mut self) -> Option<Result<String>> {
        while !self.done {
            let step = self.step_async().await;
            if let Some(out) = self.after_step(step) {
                return Some(out);
            }
        }
        None
    }

    /// Whether generation has ended (max_tokens, a stop token or string, or an error).
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// A token id tensor read back, awaited.
async fn read_id_async(id: &Tensor) -> Result<u32> {
    let bytes = id.to_bytes_async().await?;
    Ok(kiln_core::dtype::bytes_to_f64(id.dtype(), &bytes).first().copied().unwrap_or(0.0) as u32)
}

impl Iterator for Generation<'_> {
    type Item = Result<String>;

    fn next(&mut self) -> Option<Result<String>> {
        while !self.done {
            let step = self.step();
            if let Some(out) = self.after_step(step) {
                return Some(out);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_the_converters_permutation() {
        // The converter (convert_hf_to_gguf.py's permute): reshape(n_head, 2, D/2, ...),
        // swap axes 1 and 2: file row h*D + 2j + i holds original row h*D + i*D/2 + j.
        let (n_heads, hd, row_bytes) = (3, 8, 2);
        let original: Vec<u8> = (0..(n_heads * hd * row_bytes) as u8).collect();
        let mut file = vec![0u8; original.len()];
        for h in 0..n_heads {
            for i in 0..2 {
                for j in 0..hd / 2 {
                    let src = h * hd + i * hd / 2 + j;
                    let dst = h * hd + 2 * j + i;
                    file[dst * row_bytes..(dst + 1) * row_bytes]
                        .copy_from_slice(&original[src * row_bytes..(src + 1) * row_bytes]);
                }
            }
        }
        assert_ne!(file, original);
        assert_eq!(unpermute_rows(&file, row_bytes, n_heads, hd), original);
    }
}

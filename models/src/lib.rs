//! kiln-models: real models on kiln-core's public op API.
//!
//! [`SentenceEmbedder`] runs a sentence-transformers model of the BERT family (BERT, RoBERTa,
//! XLM-RoBERTa, MPNet encoders: all-MiniLM-L6-v2, bge, e5, gte, all-mpnet-base-v2, ...; CLS,
//! mean, max, ... pooling; optional L2 normalisation) from its directory:
//!
//! ```no_run
//! let model = kiln_models::SentenceEmbedder::load("build/models/all-MiniLM-L6-v2")?;
//! let e = model.encode(&["Hello world", "GPUs everywhere"])?;
//! assert_eq!((e.rows, e.dim), (2, 384));
//! # Ok::<(), kiln_models::ModelError>(())
//! ```
//!
//! [`ClipModel`] embeds images and texts into one space (transformers' CLIPModel folders; the
//! images preprocessed on the GPU as CLIPImageProcessor does); [`ImageEmbedder`] is its vision
//! tower alone.
//!
//! [`CausalLM`] runs a Llama-family decoder (llama, qwen2, phi3 and gemma as GGUF's
//! `general.architecture` names them: SmolLM2, Llama 3.x, Qwen2.5, Phi-3-mini, Gemma, ...) from a GGUF file, its weights kept quantized on
//! the GPU, streaming text:
//!
//! ```no_run
//! let model = kiln_models::CausalLM::load("build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let prompt = model.chat_prompt("What is the tallest mountain in the world?")?;
//! for piece in model.generate(&prompt, kiln_models::GenerateOptions::default())? {
//!     print!("{}", piece?);
//! }
//! # Ok::<(), kiln_models::ModelError>(())
//! ```

pub mod arch;
pub mod backend;
/// Batched generation records steps ahead of its readbacks (`PendingRead`), as the pipelined
/// loop does: native only for now (a page generates one sequence at a time).
#[cfg(not(target_arch = "wasm32"))]
pub mod batch;
mod bert;
pub mod chat_template;
mod clip;
pub mod config;
mod cpu;
/// The pipelined loop reads back without waiting (`PendingRead`); the page runs it too, its
/// waits awaited ([`Generation::next_async`]).
pub mod decode_loop;
mod error;
pub mod files;
pub mod gemma;
pub mod gguf;
pub mod gguf_stream;
pub mod gguf_tokenizer;
pub mod llama;
mod overlap;
mod pooling;
pub mod replicas;
pub mod sample_picker;
pub mod sampling;
mod sentencepiece;
pub mod stop_strings;
mod weights;

pub use arch::Architecture;
pub use backend::Backend;
#[cfg(not(target_arch = "wasm32"))]
pub use batch::{BatchGeneration, BatchOutput, BatchProducts, BatchStats};
pub use bert::{mpnet_relative_bucket, Bert};
pub use chat_template::{ChatTemplate, Message};
pub use clip::{ClipModel, Image, ImageEmbedder};
pub use error::{ModelError, Result};
pub use files::{FileBytes, ModelFiles};
pub use gguf_stream::{GgufStream, StreamedGguf};
pub use llama::{CausalLM, GenerateOptions, Generation, GenerationStats};
pub use replicas::Replicas;
pub use sampling::SamplingOptions;
pub use weights::{SafetensorsStream, UploadedWeights};

use config::{
    read_json, BertConfig, Family, ModuleEntry, PoolingConfig, PoolingMode, SentenceBertConfig, TokenizerConfig,
};
use kiln_core::{ops, DType, Tensor};
use std::path::Path;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// The tokenizer's vocabulary is not empty and every id in it (added tokens included) is a row
/// of the word embedding table (issue 28: ids past vocab_size embedded as zeros, exit code 0).
fn check_vocab(tokenizer: &Tokenizer, tok_path: &Path, config_path: &Path, vocab_size: usize) -> Result<()> {
    let vocab = tokenizer.get_vocab(true);
    if vocab.is_empty() {
        return Err(error::corrupt(tok_path, "the vocabulary (model.vocab) is empty"));
    }
    if let Some((token, &id)) = vocab.iter().max_by_key(|(_, &id)| id).filter(|(_, &id)| id as usize >= vocab_size) {
        return Err(error::corrupt(
            tok_path,
            format!(
                "token {token:?} has id {id}, past the {vocab_size} rows of the embedding table (vocab_size in {})",
                config_path.display()
            ),
        ));
    }
    Ok(())
}

/// A row-major [rows, dim] f32 matrix: one embedding per input text, in input order.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    pub data: Vec<f32>,
    pub rows: usize,
    pub dim: usize,
}

impl Embeddings {
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
}

/// How [`SentenceEmbedder::encode_with`] runs.
#[derive(Debug, Clone, Copy)]
pub struct EncodeOptions {
    /// Texts per forward pass (sorted by length first, as sentence-transformers does, so that a
    /// batch pads little). At least 1.
    pub batch_size: usize,
    /// L2-normalise each embedding; `None` follows the model (a `Normalize` module in
    /// modules.json).
    pub normalize: Option<bool>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions { batch_size: 32, normalize: None }
    }
}

/// The dtype a model computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    #[default]
    F32,
    /// Weights cast to f16 once at load and f16 activations; matmuls, norms and softmax
    /// accumulate in f32 inside the kernels, pooling and normalisation run in f32. Needs an
    /// adapter with SHADER_F16.
    F16,
}

impl Precision {
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::F16 => DType::F16,
        }
    }
}

/// How [`SentenceEmbedder::load_with`] loads a model.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    pub precision: Precision,
}

pub struct SentenceEmbedder {
    bert: Bert,
    tokenizer: Tokenizer,
    /// tokenizer.json, for the messages of ids past the vocabulary.
    tok_path: std::path::PathBuf,
    max_seq_length: usize,
    lower_case: bool,
    normalize: bool,
    /// 1_Pooling/config.json's modes, concatenated in this order.
    pooling: Vec<PoolingMode>,
}

/// What modules.json says: the Pooling module's folder and whether a Normalize module follows.
/// A module kiln does not run (Dense, LayerNorm, ...) is refused by name: skipping it would give
/// other vectors than the model's.
fn read_modules(files: &ModelFiles) -> Result<(String, bool)> {
    if !files.exists("modules.json") {
        // Folders from before modules.json: Transformer + 1_Pooling.
        return Ok(("1_Pooling".into(), false));
    }
    let modules: Vec<ModuleEntry> = read_json(files, "modules.json")?;
    let (mut pooling, mut normalize) = (None, false);
    for (i, m) in modules.iter().enumerate() {
        let name = m.kind.rsplit('.').next().unwrap_or_default();
        match (i, name) {
            (0, "Transformer") => {}
            (_, "Pooling") if pooling.is_none() => pooling = Some(m.path.clone()),
            (_, "Normalize") if pooling.is_some() => normalize = true,
            _ => {
                return Err(ModelError::Unsupported(format!(
                    "{}: module {i} {:?}; kiln runs Transformer, Pooling and Normalize (in that order)",
                    files.path("modules.json").display(),
                    m.kind
                )))
            }
        }
    }
    let pooling = pooling.ok_or_else(|| {
        ModelError::Unsupported(format!(
            "{}: no Pooling module (token embeddings only)",
            files.path("modules.json").display()
        ))
    })?;
    Ok((pooling, normalize))
}

impl SentenceEmbedder {
    /// Loads a sentence-transformers model directory: config.json, model.safetensors,
    /// tokenizer.json, sentence_bert_config.json, 1_Pooling/config.json, and modules.json (for
    /// the Normalize module; without it, no normalisation).
    pub fn load(dir: impl AsRef<Path>) -> Result<SentenceEmbedder> {
        Self::load_with(dir, LoadOptions::default(), |_, _| {})
    }

    /// [`load`](Self::load), calling `progress(done, total)` as the encoder layers upload.
    pub fn load_with_progress(dir: impl AsRef<Path>, progress: impl FnMut(usize, usize)) -> Result<SentenceEmbedder> {
        Self::load_with(dir, LoadOptions::default(), progress)
    }

    /// [`load_with_progress`](Self::load_with_progress) with a choice of precision. F16 on an
    /// adapter without SHADER_F16 is an `Unsupported` error before anything is uploaded.
    pub fn load_with(
        dir: impl AsRef<Path>,
        options: LoadOptions,
        progress: impl FnMut(usize, usize),
    ) -> Result<SentenceEmbedder> {
        let dir = dir.as_ref();
        Self::check_precision(options)?;
        if !dir.is_dir() {
            return Err(ModelError::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "model directory not found"),
            });
        }
        Self::from_files(ModelFiles::Dir(dir.to_path_buf()), options, progress)
    }

    fn check_precision(options: LoadOptions) -> Result<()> {
        if options.precision == Precision::F16 && !kiln_core::device()?.has_f16() {
            return Err(ModelError::Unsupported(
                "f16 precision needs an adapter with SHADER_F16; this one has none (use f32)".into(),
            ));
        }
        Ok(())
    }

    /// [`load_with`](Self::load_with) from the folder's files wherever they are: a directory,
    /// or bytes in memory (the browser fetches them; names as in the folder, such as
    /// "1_Pooling/config.json"). model.safetensors is moved out of `files`, not copied.
    pub fn from_files(
        files: ModelFiles,
        options: LoadOptions,
        progress: impl FnMut(usize, usize),
    ) -> Result<SentenceEmbedder> {
        Self::from_parts(files, None, options, progress)
    }

    /// [`from_files`](Self::from_files) with model.safetensors' tensors already on the GPU, put
    /// there by a [`SafetensorsStream`] as the file arrived (a page's download); `files` holds
    /// the rest of the folder.
    pub fn from_files_uploaded(
        files: ModelFiles,
        weights: UploadedWeights,
        options: LoadOptions,
        progress: impl FnMut(usize, usize),
    ) -> Result<SentenceEmbedder> {
        Self::from_parts(files, Some(weights), options, progress)
    }

    fn from_parts(
        mut files: ModelFiles,
        weights: Option<UploadedWeights>,
        options: LoadOptions,
        progress: impl FnMut(usize, usize),
    ) -> Result<SentenceEmbedder> {
        Self::check_precision(options)?;
        let configs = kiln_core::startup::span("model config files (JSON)");
        let config_path = files.path("config.json");
        let config: BertConfig = read_json(&files, "config.json")?;
        config.validate(&config_path)?;
        config.check()?;
        let sbert: SentenceBertConfig = read_json(&files, "sentence_bert_config.json")?;
        let (pooling_dir, normalize) = read_modules(&files)?;
        let pooling_file = format!("{pooling_dir}/config.json");
        let pooling: PoolingConfig = read_json(&files, &pooling_file)?;
        let pooling = pooling.modes(&files.path(&pooling_file), config.hidden_size)?;
        // sentence_bert_config.json's max_seq_length; sentence-transformers 6.x keeps it as the
        // tokenizer's model_max_length instead. Never past the position table.
        let from_tokenizer = || -> Result<Option<usize>> {
            if !files.exists("tokenizer_config.json") {
                return Ok(None);
            }
            let t: TokenizerConfig = read_json(&files, "tokenizer_config.json")?;
            Ok(t.model_max_length.filter(|m| (0.0..1e9).contains(m)).map(|m| m as usize))
        };
        let wanted = match sbert.max_seq_length {
            Some(m) => Some(m),
            None => from_tokenizer()?,
        };
        let max_seq_length = wanted.unwrap_or(usize::MAX).min(config.max_tokens());
        if max_seq_length < 2 {
            return Err(ModelError::Unsupported(format!(
                "max_seq_length {max_seq_length}: no room for [CLS] and [SEP]"
            )));
        }

        drop(configs);
        // The tokenizer parses on a thread of its own while the device opens and the weights
        // upload here (`overlap`): neither needs the other.
        let tok_path = files.path("tokenizer.json");
        let tok_bytes = files.read("tokenizer.json")?;
        let vocab_size = config.vocab_size;
        let ck_path = files.path("model.safetensors");
        let prefix = config.family()?.weight_prefix();
        let dtype = options.precision.dtype();
        let (tokenizer, bert) = overlap::join(
            || {
                let _load = kiln_core::startup::span("tokenizer load (tokenizer.json)");
                let mut tokenizer = Tokenizer::from_bytes(&tok_bytes)
                    .map_err(|e| error::corrupt(&tok_path, format!("not a tokenizer: {e}")))?;
                // sentence-transformers pads to the longest text of a batch and truncates at
                // max_seq_length whatever tokenizer.json says; padding is done here.
                tokenizer
                    .with_truncation(Some(TruncationParams {
                        max_length: max_seq_length,
                        strategy: TruncationStrategy::LongestFirst,
                        stride: 0,
                        direction: TruncationDirection::Right,
                    }))
                    .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
                tokenizer.with_padding(None);
                check_vocab(&tokenizer, &tok_path, &config_path, vocab_size)?;
                Ok::<_, ModelError>(tokenizer)
            },
            || {
                let ck = match weights {
                    Some(w) => weights::Checkpoint::uploaded(&ck_path, w, prefix),
                    None => {
                        let map = kiln_core::startup::time("weights file map (model.safetensors)", || {
                            files.take("model.safetensors", "a .safetensors file")
                        })?;
                        weights::Checkpoint::new(&ck_path, map, prefix)?
                    }
                };
                // This model's pipelines, built ahead on other threads while the weights upload
                // where an earlier process recorded them (kiln-core's persistent cache); waited
                // for at the end of the load. (After the file's checks: their errors come first.)
                #[cfg(not(target_arch = "wasm32"))]
                let warmup =
                    kiln_core::device()?.warm_pipelines(&format!("sentence-embedder {} {dtype:?}", ck_path.display()));
                let bert = kiln_core::startup::time("weights to the GPU (Bert::load)", || {
                    Bert::load(config, &ck, dtype, progress)
                });
                #[cfg(not(target_arch = "wasm32"))]
                kiln_core::startup::time("pipelines built ahead: waited for", || warmup.wait());
                bert
            },
        );
        // The tokenizer's error first, as when it loaded before the weights.
        let tokenizer = tokenizer?;
        let bert = bert?;
        Ok(SentenceEmbedder {
            bert,
            tokenizer,
            tok_path,
            max_seq_length,
            lower_case: sbert.do_lower_case,
            normalize,
            pooling,
        })
    }

    pub fn precision(&self) -> Precision {
        if self.bert.dtype == DType::F16 {
            Precision::F16
        } else {
            Precision::F32
        }
    }

    /// Embedding width: the encoder's hidden size times the pooling modes (384 for MiniLM-L6).
    pub fn dim(&self) -> usize {
        self.bert.config.hidden_size * self.pooling.len()
    }

    /// The pooling modes, in the order their vectors are concatenated.
    pub fn pooling_modes(&self) -> &[PoolingMode] {
        &self.pooling
    }

    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Whether `encode` normalises by default (the model has a Normalize module).
    pub fn normalizes(&self) -> bool {
        self.normalize
    }

    /// Token ids (with the model's special tokens, [CLS] ... [SEP] or <s> ... </s>, truncated at
    /// max_seq_length) and type ids per text. Texts are not stripped: sentence-transformers 6
    /// keeps surrounding whitespace (2.x-5.x stripped it), which byte-level BPE tokenizes.
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<(Vec<u32>, Vec<u32>)>> {
        // In parallel over the texts (rayon, as sentence-transformers' fast tokenizer does), and
        // without char offsets: on the H100 a 256 x 128 batch spent 48 ms on the GPU and 100 ms
        // on the host, tokenizing one text after another (`kiln bench --filter embed`).
        let lowered: Vec<String>;
        let inputs: Vec<&str> = if self.lower_case {
            lowered = texts.iter().map(|t| t.to_lowercase()).collect();
            lowered.iter().map(String::as_str).collect()
        } else {
            texts.to_vec()
        };
        let encodings =
            self.tokenizer.encode_batch_fast(inputs, true).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let out: Vec<(Vec<u32>, Vec<u32>)> =
            encodings.into_iter().map(|e| (e.get_ids().to_vec(), e.get_type_ids().to_vec())).collect();
        // The embedding op reads an id past its table as a row of zeros: a silent wrong result.
        // The vocabulary was checked at load, but the post-processor's special tokens ([CLS],
        // [SEP]) carry ids of their own in tokenizer.json.
        let c = &self.bert.config;
        for (ids, types) in &out {
            if let Some(&id) = ids.iter().find(|&&i| i as usize >= c.vocab_size) {
                return Err(error::corrupt(
                    &self.tok_path,
                    format!("gives token id {id}, past config.json's vocab_size {}", c.vocab_size),
                ));
            }
            // MPNet has no token type embeddings (its tokenizer's type ids are not read).
            let typed = self.bert.family != Family::Mpnet;
            if let Some(&t) = types.iter().find(|&&t| typed && t as usize >= c.type_vocab_size) {
                return Err(error::corrupt(
                    &self.tok_path,
                    format!("gives token type id {t}, past config.json's type_vocab_size {}", c.type_vocab_size),
                ));
            }
        }
        Ok(out)
    }

    /// Embeddings of `texts` with the default options (batch 32, the model's normalisation).
    pub fn encode(&self, texts: &[&str]) -> Result<Embeddings> {
        self.encode_with(texts, EncodeOptions::default())
    }

    pub fn encode_with(&self, texts: &[&str], opts: EncodeOptions) -> Result<Embeddings> {
        self.encode_progress(texts, opts, |_, _| {})
    }

    /// [`encode_with`](Self::encode_with), calling `progress(done, total)` after each batch.
    pub fn encode_progress(
        &self,
        texts: &[&str],
        opts: EncodeOptions,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Embeddings> {
        let plan = self.plan(texts, opts)?;
        let mut data = vec![0f32; texts.len() * self.dim()];
        for (k, chunk) in plan.chunks().enumerate() {
            let out = self.record_batch(&plan.batch(chunk), plan.normalize, &mut |_| Ok(()))?.to_vec::<f32>()?;
            plan.scatter(chunk, &out, &mut data);
            progress(plan.done_after(k), texts.len());
        }
        Ok(Embeddings { data, rows: texts.len(), dim: self.dim() })
    }

    /// [`encode_progress`](Self::encode_progress) with each batch's readback awaited (the
    /// browser's way: a page cannot block on the GPU). The same GPU work, so the same bits.
    pub async fn encode_async(
        &self,
        texts: &[&str],
        opts: EncodeOptions,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Embeddings> {
        let plan = self.plan(texts, opts)?;
        let mut data = vec![0f32; texts.len() * self.dim()];
        for (k, chunk) in plan.chunks().enumerate() {
            let pooled = self.record_batch(&plan.batch(chunk), plan.normalize, &mut |_| Ok(()))?;
            let out = pooled.to_vec_async::<f32>().await?;
            plan.scatter(chunk, &out, &mut data);
            progress(plan.done_after(k), texts.len());
        }
        Ok(Embeddings { data, rows: texts.len(), dim: self.dim() })
    }

    fn plan(&self, texts: &[&str], opts: EncodeOptions) -> Result<EncodePlan> {
        let tokens = self.tokenize(texts)?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].0.len()));
        Ok(EncodePlan {
            tokens,
            order,
            batch_size: opts.batch_size.max(1),
            dim: self.dim(),
            normalize: opts.normalize.unwrap_or(self.normalize),
        })
    }

    /// One batch of `texts` (no sorting, no splitting) with `mark(step)` called after each step
    /// of the forward pass has been recorded, for profilers (see [`Bert::forward_marked`]).
    pub fn encode_batch_marked(
        &self,
        texts: &[&str],
        normalize: bool,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Vec<f32>> {
        let tokens = self.tokenize(texts)?;
        let batch: Vec<&(Vec<u32>, Vec<u32>)> = tokens.iter().collect();
        Ok(self.record_batch(&batch, normalize, mark)?.to_vec::<f32>()?)
    }

    /// One padded forward pass, pooling over real tokens, optional L2 normalisation, recorded:
    /// the [B, dim] f32 result on the GPU (the caller reads it back, blocking or not).
    fn record_batch(
        &self,
        batch: &[&(Vec<u32>, Vec<u32>)],
        normalize: bool,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        let b = batch.len();
        let l = batch.iter().map(|t| t.0.len()).max().unwrap_or(0);
        let mut ids = vec![0u32; b * l];
        let mut types = vec![0u32; b * l];
        let mut lens = vec![0usize; b];
        for (r, (i, t)) in batch.iter().map(|x| (&x.0, &x.1)).enumerate() {
            ids[r * l..r * l + i.len()].copy_from_slice(i);
            types[r * l..r * l + t.len()].copy_from_slice(t);
            lens[r] = i.len();
        }
        let hidden = self.bert.forward_marked(&ids, &types, &lens, mark)?; // [B, L, D]
        let hidden = if hidden.dtype() == DType::F32 { hidden } else { ops::cast(&hidden, DType::F32)? };
        let mut pooled = pooling::pool(&hidden, &lens, &self.pooling)?;
        if normalize {
            pooled = pooling::l2_normalize(&pooled)?;
        }
        mark("pooling + normalize")?;
        Ok(pooled)
    }
}

/// How `encode` splits texts into batches: sorted by token count, longest first (as
/// sentence-transformers does, so that a batch pads little), results put back in input order.
struct EncodePlan {
    tokens: Vec<(Vec<u32>, Vec<u32>)>,
    order: Vec<usize>,
    batch_size: usize,
    dim: usize,
    normalize: bool,
}

impl EncodePlan {
    fn chunks(&self) -> std::slice::Chunks<'_, usize> {
        self.order.chunks(self.batch_size)
    }

    fn batch(&self, chunk: &[usize]) -> Vec<&(Vec<u32>, Vec<u32>)> {
        chunk.iter().map(|&i| &self.tokens[i]).collect()
    }

    /// The rows of one batch's result into their places in `data`.
    fn scatter(&self, chunk: &[usize], out: &[f32], data: &mut [f32]) {
        let d = self.dim;
        for (j, &i) in chunk.iter().enumerate() {
            data[i * d..(i + 1) * d].copy_from_slice(&out[j * d..(j + 1) * d]);
        }
    }

    /// Texts done after batch `k`.
    fn done_after(&self, k: usize) -> usize {
        ((k + 1) * self.batch_size).min(self.order.len())
    }
}

//! The JSON files of a sentence-transformers model directory, read with serde.

use crate::error::{corrupt, io_err, ModelError, Result};
use crate::files::ModelFiles;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::Path;

/// The BERT-family architectures the encoder runs: one layer structure (post-norm attention and
/// feed-forward blocks, erf GELU), differing in weight names, position ids and extras.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `BertModel`: positions 0, 1, 2, ...; token type embeddings.
    Bert,
    /// `RobertaModel` and `XLMRobertaModel` (same modules and weights): positions count the
    /// non-padding tokens from `pad_token_id + 1` (fairseq's rule); token type embeddings (one
    /// type).
    Roberta,
    /// `MPNetModel`: positions as RoBERTa's with padding_idx fixed at 1, no token types, and a
    /// relative position bias (T5-style buckets) added to every layer's attention scores.
    Mpnet,
}

impl Family {
    /// The family of a config.json's `model_type` (or, without one, of its `architectures`).
    fn of(model_type: Option<&str>, architectures: &[String]) -> Option<Family> {
        let by_type = |t: &str| match t {
            "bert" => Some(Family::Bert),
            "roberta" | "xlm-roberta" => Some(Family::Roberta),
            "mpnet" => Some(Family::Mpnet),
            _ => None,
        };
        match model_type {
            Some(t) => by_type(t),
            None => architectures.iter().find_map(|a| {
                [("Bert", "bert"), ("XLMRoberta", "xlm-roberta"), ("Roberta", "roberta"), ("MPNet", "mpnet")]
                    .iter()
                    .find(|(p, _)| a.starts_with(p))
                    .and_then(|(_, t)| by_type(t))
            }),
        }
    }

    /// The prefix of the encoder's weights in a checkpoint saved from a task model
    /// (`BertForMaskedLM` saves `bert.embeddings...`); bare names are tried after it.
    pub fn weight_prefix(self) -> &'static str {
        match self {
            Family::Bert => "bert.",
            Family::Roberta => "roberta.",
            Family::Mpnet => "mpnet.",
        }
    }
}

/// `config.json` of a Hugging Face BERT-family encoder (the fields the encoder uses).
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    #[serde(default)]
    pub architectures: Vec<String>,
    #[serde(default)]
    pub model_type: Option<String>,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// RoBERTa's padding_idx (position ids start after it); 1 when absent, as in its config.
    #[serde(default)]
    pub pad_token_id: Option<usize>,
    /// Rows of MPNet's relative attention bias table (32).
    #[serde(default)]
    pub relative_attention_num_buckets: Option<usize>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

impl BertConfig {
    /// Refuses values no BERT has (`path` is the config.json they came from, for the message):
    /// a zero size, or a layer_norm_eps that makes layer_norm divide by sqrt(var + eps) <= 0
    /// (issue 28: eps = -1 loaded and embedded every text as NaN, with exit code 0).
    pub fn validate(&self, path: &Path) -> Result<()> {
        for (field, v) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("type_vocab_size", self.type_vocab_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("num_attention_heads", self.num_attention_heads),
        ] {
            if v == 0 {
                return Err(corrupt(path, format!("{field} is 0; it must be at least 1")));
            }
        }
        let eps = self.layer_norm_eps;
        if !(eps.is_finite() && eps > 0.0 && (eps as f32) > 0.0) {
            return Err(corrupt(path, format!("layer_norm_eps {eps} must be a positive finite f32 (BERT uses 1e-12)")));
        }
        if let Some(pad) = self.position_offset() {
            // Position ids run from pad + 1 to pad + L: at least one usable row past the pad.
            if pad + 2 > self.max_position_embeddings {
                return Err(corrupt(
                    path,
                    format!(
                        "max_position_embeddings {} leaves no position after padding_idx {pad}",
                        self.max_position_embeddings
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The architecture family, or an Unsupported error naming the model_type.
    pub fn family(&self) -> Result<Family> {
        Family::of(self.model_type.as_deref(), &self.architectures).ok_or_else(|| {
            ModelError::Unsupported(format!(
                "config.json: model_type {:?}, architectures {:?}; supported encoders: bert, roberta, xlm-roberta, mpnet",
                self.model_type, self.architectures
            ))
        })
    }

    /// Where position ids start for the families that count them from padding_idx + 1
    /// (`Some(padding_idx)`); None for BERT's 0, 1, 2, ...
    pub fn position_offset(&self) -> Option<usize> {
        match self.family().ok()? {
            Family::Bert => None,
            Family::Roberta => Some(self.pad_token_id.unwrap_or(1)),
            // transformers' MPNetEmbeddings fixes padding_idx at 1, whatever pad_token_id says.
            Family::Mpnet => Some(1),
        }
    }

    /// The longest input (special tokens included) the position table can hold.
    pub fn max_tokens(&self) -> usize {
        match self.position_offset() {
            None => self.max_position_embeddings,
            Some(pad) => self.max_position_embeddings.saturating_sub(pad + 1),
        }
    }

    /// Refuses what the encoder does not implement, naming it ([`validate`](Self::validate)
    /// first, against a config.json of unknown place).
    pub fn check(&self) -> Result<()> {
        self.validate(Path::new("config.json"))?;
        let family = self.family()?;
        if self.hidden_act != "gelu" {
            return Err(ModelError::Unsupported(format!(
                "config.json: hidden_act {:?}; only \"gelu\" (erf) is supported",
                self.hidden_act
            )));
        }
        if let Some(p) = &self.position_embedding_type {
            if p != "absolute" {
                return Err(ModelError::Unsupported(format!(
                    "config.json: position_embedding_type {p:?}; only \"absolute\""
                )));
            }
        }
        if self.num_attention_heads == 0 || !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(ModelError::Unsupported(format!(
                "config.json: hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            )));
        }
        if family == Family::Mpnet && self.relative_attention_num_buckets.unwrap_or(32) < crate::bert::MPNET_BUCKETS {
            return Err(ModelError::Unsupported(format!(
                "config.json: relative_attention_num_buckets {:?}; MPNet indexes {} buckets",
                self.relative_attention_num_buckets,
                crate::bert::MPNET_BUCKETS
            )));
        }
        Ok(())
    }
}

/// `1_Pooling/config.json`, in either of sentence-transformers' layouts: the `pooling_mode_*`
/// booleans of the Hub's folders (2.x-5.x) or 6.x's `pooling_mode` (a name or a list).
#[derive(Debug, Clone, Deserialize)]
pub struct PoolingConfig {
    #[serde(default, alias = "embedding_dimension")]
    pub word_embedding_dimension: Option<usize>,
    #[serde(default)]
    pub pooling_mode: Option<serde_json::Value>,
    #[serde(default)]
    pub pooling_mode_cls_token: bool,
    #[serde(default)]
    pub pooling_mode_max_tokens: bool,
    #[serde(default)]
    pub pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pub pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pub pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pub pooling_mode_lasttoken: bool,
    /// Only `true` (prompts are pooled like any text; kiln takes no prompts).
    #[serde(default)]
    pub include_prompt: Option<bool>,
}

impl PoolingConfig {
    /// The modes, in the order sentence-transformers concatenates them (legacy booleans: cls,
    /// max, mean, mean_sqrt_len, weightedmean, lasttoken; none set means mean, as it reads them).
    /// `path` names the file for messages.
    pub fn modes(&self, path: &Path, hidden: usize) -> Result<Vec<PoolingMode>> {
        if let Some(d) = self.word_embedding_dimension {
            if d != hidden {
                return Err(ModelError::Unsupported(format!(
                    "{}: word_embedding_dimension {d} differs from hidden_size {hidden}",
                    path.display()
                )));
            }
        }
        let modes: Vec<PoolingMode> = match &self.pooling_mode {
            Some(v) => {
                let names: Vec<&serde_json::Value> = match v {
                    serde_json::Value::Array(a) => a.iter().collect(),
                    one => vec![one],
                };
                let mut out = vec![];
                for n in names {
                    let name = n.as_str().ok_or_else(|| corrupt(path, format!("pooling_mode {n}: not a name")))?;
                    out.push(PoolingMode::parse(name).ok_or_else(|| {
                        ModelError::Unsupported(format!(
                            "{}: pooling_mode {name:?}; supported: cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken",
                            path.display()
                        ))
                    })?);
                }
                out
            }
            None => {
                let flags = [
                    (self.pooling_mode_cls_token, PoolingMode::Cls),
                    (self.pooling_mode_max_tokens, PoolingMode::Max),
                    (self.pooling_mode_mean_tokens, PoolingMode::Mean),
                    (self.pooling_mode_mean_sqrt_len_tokens, PoolingMode::MeanSqrtLen),
                    (self.pooling_mode_weightedmean_tokens, PoolingMode::WeightedMean),
                    (self.pooling_mode_lasttoken, PoolingMode::LastToken),
                ];
                let on: Vec<PoolingMode> = flags.iter().filter(|f| f.0).map(|f| f.1).collect();
                if on.is_empty() {
                    vec![PoolingMode::Mean]
                } else {
                    on
                }
            }
        };
        if modes.is_empty() {
            return Err(corrupt(path, "pooling_mode is an empty list"));
        }
        if self.include_prompt == Some(false) {
            return Err(ModelError::Unsupported(format!(
                "{}: include_prompt false (pooling without the prompt's tokens); kiln takes no prompts",
                path.display()
            )));
        }
        Ok(modes)
    }
}

/// One way of turning token embeddings into a sentence embedding (sentence-transformers'
/// Pooling module; several are concatenated in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingMode {
    /// The first token's embedding ([CLS] / <s>).
    Cls,
    /// The element-wise maximum over real tokens.
    Max,
    /// The mean over real tokens.
    Mean,
    /// The sum over real tokens divided by sqrt(token count).
    MeanSqrtLen,
    /// Tokens weighted by their position (1, 2, ...), normalised by the weights' sum.
    WeightedMean,
    /// The last real token's embedding.
    LastToken,
}

impl PoolingMode {
    fn parse(name: &str) -> Option<PoolingMode> {
        Some(match name {
            "cls" => PoolingMode::Cls,
            "max" => PoolingMode::Max,
            "mean" => PoolingMode::Mean,
            "mean_sqrt_len_tokens" => PoolingMode::MeanSqrtLen,
            "weightedmean" => PoolingMode::WeightedMean,
            "lasttoken" => PoolingMode::LastToken,
            _ => return None,
        })
    }
}

/// `sentence_bert_config.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct SentenceBertConfig {
    /// Absent in sentence-transformers 6.x folders, which keep it as tokenizer_config.json's
    /// `model_max_length`.
    #[serde(default)]
    pub max_seq_length: Option<usize>,
    #[serde(default)]
    pub do_lower_case: bool,
}

/// `tokenizer_config.json` (the field read: where 6.x keeps max_seq_length).
#[derive(Debug, Clone, Deserialize)]
pub struct TokenizerConfig {
    #[serde(default)]
    pub model_max_length: Option<f64>,
}

/// One entry of `modules.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ModuleEntry {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub path: String,
}

/// The JSON file `name` of `files`.
pub fn read_json<T: DeserializeOwned>(files: &ModelFiles, name: &str) -> Result<T> {
    let path = files.path(name);
    let bytes = files.read(name)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| io_err(&path)(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    serde_json::from_str(text).map_err(|e| corrupt(&path, format!("not the expected JSON: {e}")))
}

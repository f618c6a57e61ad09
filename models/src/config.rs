//! The JSON files of a sentence-transformers model directory, read with serde.

use crate::error::{corrupt, io_err, ModelError, Result};
use crate::files::ModelFiles;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::Path;

/// `config.json` of a Hugging Face BERT (the fields the encoder uses).
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
        Ok(())
    }

    /// Refuses what the encoder does not implement, naming it ([`validate`](Self::validate)
    /// first, against a config.json of unknown place).
    pub fn check(&self) -> Result<()> {
        self.validate(Path::new("config.json"))?;
        let is_bert = self.model_type.as_deref() == Some("bert")
            || (self.model_type.is_none() && self.architectures.iter().any(|a| a.starts_with("Bert")));
        if !is_bert {
            return Err(ModelError::Unsupported(format!(
                "config.json: model_type {:?}, architectures {:?}; only BERT encoders (model_type \"bert\") are supported",
                self.model_type, self.architectures
            )));
        }
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
        Ok(())
    }
}

/// `1_Pooling/config.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct PoolingConfig {
    pub word_embedding_dimension: usize,
    #[serde(default)]
    pub pooling_mode_cls_token: bool,
    #[serde(default)]
    pub pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pub pooling_mode_max_tokens: bool,
    #[serde(default)]
    pub pooling_mode_mean_sqrt_len_tokens: bool,
}

impl PoolingConfig {
    pub fn check(&self, hidden: usize) -> Result<()> {
        if self.word_embedding_dimension != hidden {
            return Err(ModelError::Unsupported(format!(
                "1_Pooling/config.json: word_embedding_dimension {} differs from hidden_size {hidden}",
                self.word_embedding_dimension
            )));
        }
        if !self.pooling_mode_mean_tokens
            || self.pooling_mode_cls_token
            || self.pooling_mode_max_tokens
            || self.pooling_mode_mean_sqrt_len_tokens
        {
            return Err(ModelError::Unsupported(format!(
                "1_Pooling/config.json: {self:?}; only mean pooling is supported"
            )));
        }
        Ok(())
    }
}

/// `sentence_bert_config.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct SentenceBertConfig {
    pub max_seq_length: usize,
    #[serde(default)]
    pub do_lower_case: bool,
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

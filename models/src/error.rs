//! The models crate's error: what went wrong with the model's files, or a kiln-core error from
//! the GPU work (kept whole, with its stable code).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file the model needs is missing or unreadable.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// A file is there but is not what it should be (bad JSON, a truncated safetensors file, ...).
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// The model is not one this crate runs (architecture, activation, pooling mode, ...).
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// A weight the architecture needs is not in the checkpoint.
    #[error("missing weight {0}")]
    MissingWeight(String),
    /// A weight has the wrong shape or dtype for the configuration.
    #[error("weight {name}: expected {expected}, found {found}")]
    WeightShape { name: String, expected: String, found: String },
    /// The tokenizer failed on an input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A kiln-core error (device, memory, op).
    #[error(transparent)]
    Kiln(#[from] kiln_core::Error),
    /// The error of one device's part of data parallel work ([`crate::Replicas`]): which
    /// device, and how many other devices' parts failed too (their errors are not kept).
    #[error("device {device} ({name}): {source}{}", others(*others_failed))]
    OnDevice { device: usize, name: String, others_failed: usize, source: Box<ModelError> },
}

fn others(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => " (and 1 other device failed)".into(),
        n => format!(" (and {n} other devices failed)"),
    }
}

impl ModelError {
    /// The error itself, out of any [`OnDevice`](Self::OnDevice) wrapping (what failed, for a
    /// caller that maps errors by kind).
    pub fn root(&self) -> &ModelError {
        match self {
            ModelError::OnDevice { source, .. } => source.root(),
            e => e,
        }
    }
}

pub type Result<T> = std::result::Result<T, ModelError>;

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io { path: path.to_path_buf(), source }
}

pub(crate) fn corrupt(path: &std::path::Path, message: impl std::fmt::Display) -> ModelError {
    ModelError::Corrupt { path: path.to_path_buf(), message: message.to_string() }
}

#[cfg(not(target_arch = "wasm32"))]
/// Opens `path` as a regular file for mapping. A directory (or a device, a FIFO) is refused by
/// name: mmap of a directory fails with ENODEV, which read "No such device (os error 19)".
pub(crate) fn open_file(path: &std::path::Path, expected: &str) -> Result<std::fs::File> {
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    let meta = file.metadata().map_err(io_err(path))?;
    if !meta.is_file() {
        let what = if meta.is_dir() { "a directory" } else { "not a regular file" };
        return Err(ModelError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{what}; expected {expected}")),
        });
    }
    Ok(file)
}

//! safetensors checkpoints, memory-mapped (or handed over as bytes, in the browser) and uploaded
//! tensor by tensor straight from those bytes into GPU buffers (no second copy of the file); or
//! streamed (a page's download): [`SafetensorsStream`] uploads each tensor as its bytes arrive,
//! holding at most one tensor's bytes, and the checkpoint then hands out those GPU tensors.

use crate::error::{corrupt, ModelError, Result};
use crate::files::FileBytes;
use kiln_core::{DType, Tensor};
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where a checkpoint's tensors are: the file's bytes with its table (parsed once: a model asks
/// for a hundred tensors), or already on the GPU.
enum Source {
    Bytes { map: FileBytes, table: Metadata, data_start: usize },
    Uploaded(UploadedWeights),
}

pub struct Checkpoint {
    path: PathBuf,
    source: Source,
    /// Prepended to every name: the family's prefix ("bert.", "roberta.", "mpnet.") where the
    /// checkpoint was saved from a task model (`BertForMaskedLM`), else empty.
    prefix: String,
}

impl Checkpoint {
    /// `map` holds the file `path` (the path is for messages); `prefix` is used where some
    /// weight's name starts with it.
    pub fn new(path: &Path, map: FileBytes, prefix: &str) -> Result<Checkpoint> {
        // The safetensors crate's own check of the whole file: the header's JSON, every tensor's
        // offsets within the data and back to back, the data ending where the file does.
        let (header_len, table) =
            kiln_core::startup::time("safetensors header parse", || SafeTensors::read_metadata(&map))
                .map_err(|e| corrupt(path, format!("not a valid safetensors file: {e}")))?;
        let prefix = if table.offset_keys().iter().any(|n| n.starts_with(prefix)) { prefix } else { "" };
        let data_start = 8 + header_len;
        Ok(Checkpoint {
            path: path.to_path_buf(),
            source: Source::Bytes { map, table, data_start },
            prefix: prefix.into(),
        })
    }

    /// The checkpoint of the file `path` whose tensors [`SafetensorsStream`] uploaded.
    pub fn uploaded(path: &Path, weights: UploadedWeights, prefix: &str) -> Checkpoint {
        let prefix = if weights.tensors.keys().any(|n| n.starts_with(prefix)) { prefix } else { "" };
        Checkpoint { path: path.to_path_buf(), source: Source::Uploaded(weights), prefix: prefix.into() }
    }

    /// The f32 weight `name` uploaded to the GPU, checked against `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let full = format!("{}{name}", self.prefix);
        let missing = || ModelError::MissingWeight(format!("{full} (in {})", self.path.display()));
        let check = |dtype: Dtype, found: &[usize]| {
            if dtype != Dtype::F32 || found != shape {
                return Err(ModelError::WeightShape {
                    name: full.clone(),
                    expected: format!("F32 {shape:?}"),
                    found: format!("{dtype:?} {found:?}"),
                });
            }
            Ok(())
        };
        match &self.source {
            Source::Bytes { map, table, data_start } => {
                let info = table.info(&full).ok_or_else(missing)?;
                check(info.dtype, &info.shape)?;
                // In the file: read_metadata checked every tensor's offsets against its length.
                let (a, b) = info.data_offsets;
                Ok(Tensor::from_bytes(&map[data_start + a..data_start + b], shape, DType::F32)?)
            }
            Source::Uploaded(w) => {
                let u = w.tensors.get(&full).ok_or_else(missing)?;
                check(u.dtype, &u.shape)?;
                Ok(u.tensor.clone().expect("an f32 tensor is uploaded as it arrives"))
            }
        }
    }
}

/// A checkpoint's tensors on the GPU, uploaded by [`SafetensorsStream`]: the f32 ones (what
/// [`Checkpoint::get`] serves); the others are named with their dtype and shape only, so that
/// asking for one gives the error the file's bytes would.
pub struct UploadedWeights {
    tensors: HashMap<String, Uploaded>,
}

struct Uploaded {
    dtype: Dtype,
    shape: Vec<usize>,
    tensor: Option<Tensor>,
}

/// The safetensors header may be at most this long (the safetensors crate's own bound).
const MAX_HEADER: u64 = 100_000_000;

/// A safetensors file read as it arrives (`push` each chunk, then `finish`): the header first
/// (8 bytes of length, then its JSON, held to [`MAX_HEADER`] and checked as the crate checks a
/// whole file: tensors back to back, each as long as its dtype and shape say), then each
/// tensor's bytes gathered and uploaded the moment the last of them arrives, and dropped. The
/// most it holds is the header and the largest tensor's bytes, not the file.
pub struct SafetensorsStream {
    path: PathBuf,
    header: Vec<u8>,
    /// The tensors by offset, once the header is complete.
    table: Option<Vec<(String, TensorInfo)>>,
    /// The tensor being gathered, and its bytes so far.
    next: usize,
    staging: Vec<u8>,
    done: HashMap<String, Uploaded>,
}

impl SafetensorsStream {
    /// A stream for the file `path` names (for messages).
    pub fn new(path: &Path) -> SafetensorsStream {
        SafetensorsStream {
            path: path.to_path_buf(),
            header: Vec::new(),
            table: None,
            next: 0,
            staging: Vec::new(),
            done: HashMap::new(),
        }
    }

    /// The next bytes of the file.
    pub fn push(&mut self, mut chunk: &[u8]) -> Result<()> {
        if self.table.is_none() {
            chunk = self.push_header(chunk)?;
            if self.table.is_none() {
                return Ok(());
            }
        }
        let n_tensors = self.table.as_ref().map_or(0, Vec::len);
        while self.next < n_tensors {
            let (name, info) = &self.table.as_ref().expect("table parsed")[self.next];
            let size = info.data_offsets.1 - info.data_offsets.0;
            if self.staging.is_empty() && size > 0 {
                if chunk.is_empty() {
                    return Ok(());
                }
                self.staging.try_reserve_exact(size).map_err(|_| {
                    kiln_core::Error::OutOfMemory(format!("tensor {name} ({size} bytes) does not fit in memory"))
                })?;
            }
            let take = (size - self.staging.len()).min(chunk.len());
            self.staging.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.staging.len() < size {
                return Ok(());
            }
            let tensor = if info.dtype == Dtype::F32 {
                Some(Tensor::from_bytes(&self.staging, &info.shape, DType::F32)?)
            } else {
                None
            };
            let up = Uploaded { dtype: info.dtype, shape: info.shape.clone(), tensor };
            self.done.insert(name.clone(), up);
            // The buffer goes back: the next tensor reserves its own size.
            self.staging = Vec::new();
            self.next += 1;
        }
        if !chunk.is_empty() {
            return Err(corrupt(&self.path, "not a valid safetensors file: bytes past the last tensor"));
        }
        Ok(())
    }

    /// Gathers the header from the front of `chunk` and parses it when complete; returns the
    /// rest of the chunk.
    fn push_header<'a>(&mut self, chunk: &'a [u8]) -> Result<&'a [u8]> {
        // Moves bytes of `rest` into the header until it is `total` long; whether it is.
        fn fill(header: &mut Vec<u8>, rest: &mut &[u8], total: usize) -> bool {
            let take = total.saturating_sub(header.len()).min(rest.len());
            header.extend_from_slice(&rest[..take]);
            *rest = &rest[take..];
            header.len() >= total
        }
        let mut rest = chunk;
        if !fill(&mut self.header, &mut rest, 8) {
            return Ok(rest);
        }
        let n = u64::from_le_bytes(self.header[..8].try_into().expect("8 bytes"));
        if n > MAX_HEADER {
            return Err(corrupt(&self.path, format!("not a valid safetensors file: a header of {n} bytes")));
        }
        if !fill(&mut self.header, &mut rest, 8 + n as usize) {
            return Ok(rest);
        }
        let meta: Metadata = serde_json::from_slice(&self.header[8..])
            .map_err(|e| corrupt(&self.path, format!("not a valid safetensors file: header: {e}")))?;
        let mut table = Vec::new();
        let mut end = 0usize;
        for name in meta.offset_keys() {
            let info = meta.info(&name).expect("a key of the table").clone();
            let (s, e) = info.data_offsets;
            let bits = info.shape.iter().try_fold(info.dtype.bitsize(), |a, &d| a.checked_mul(d));
            if s != end || e < s || bits.is_none_or(|b| b % 8 != 0 || b / 8 != e - s) {
                return Err(corrupt(
                    &self.path,
                    format!("not a valid safetensors file: tensor {name}: offsets {s}..{e}"),
                ));
            }
            end = e;
            table.push((name, info));
        }
        self.header = Vec::new();
        self.table = Some(table);
        Ok(rest)
    }

    /// The uploaded tensors, once the whole file went through `push`; a file that ended early is
    /// an error naming where.
    pub fn finish(self) -> Result<UploadedWeights> {
        let Some(table) = &self.table else {
            return Err(corrupt(&self.path, "not a valid safetensors file: it ends inside its header"));
        };
        if let Some((name, _)) = table.get(self.next) {
            return Err(corrupt(&self.path, format!("not a valid safetensors file: it ends inside tensor {name}")));
        }
        Ok(UploadedWeights { tensors: self.done })
    }
}

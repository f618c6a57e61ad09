//! safetensors checkpoints, memory-mapped (or handed over as bytes, in the browser) and uploaded
//! tensor by tensor straight from those bytes into GPU buffers (no second copy of the file).

use crate::error::{corrupt, ModelError, Result};
use crate::files::FileBytes;
use kiln_core::{DType, Tensor};
use safetensors::{Dtype, SafeTensors};
use std::path::{Path, PathBuf};

pub struct Checkpoint {
    path: PathBuf,
    map: FileBytes,
    /// Prepended to every name: the family's prefix ("bert.", "roberta.", "mpnet.") where the
    /// checkpoint was saved from a task model (`BertForMaskedLM`), else empty.
    prefix: String,
}

impl Checkpoint {
    /// `map` holds the file `path` (the path is for messages); `prefix` is used where some
    /// weight's name starts with it.
    pub fn new(path: &Path, map: FileBytes, prefix: &str) -> Result<Checkpoint> {
        let ck = Checkpoint { path: path.to_path_buf(), map, prefix: String::new() };
        let st = ck.tensors()?;
        let prefix = if st.names().iter().any(|n| n.starts_with(prefix)) { prefix } else { "" };
        Ok(Checkpoint { prefix: prefix.into(), ..ck })
    }

    fn tensors(&self) -> Result<SafeTensors<'_>> {
        SafeTensors::deserialize(&self.map)
            .map_err(|e| corrupt(&self.path, format!("not a valid safetensors file: {e}")))
    }

    /// The f32 weight `name` uploaded to the GPU, checked against `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let st = self.tensors()?;
        let full = format!("{}{name}", self.prefix);
        let view =
            st.tensor(&full).map_err(|_| ModelError::MissingWeight(format!("{full} (in {})", self.path.display())))?;
        if view.dtype() != Dtype::F32 || view.shape() != shape {
            return Err(ModelError::WeightShape {
                name: full,
                expected: format!("F32 {shape:?}"),
                found: format!("{:?} {:?}", view.dtype(), view.shape()),
            });
        }
        Ok(Tensor::from_bytes(view.data(), shape, DType::F32)?)
    }
}

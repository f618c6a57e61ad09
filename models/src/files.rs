//! Where a model's bytes come from: files on disk (memory-mapped natively) or bytes a caller
//! already holds (a page that fetched them: wasm32 has no file system). The loaders read through
//! these two types only, so a model loads the same way from either.

use crate::error::{ModelError, Result};
use std::collections::BTreeMap;
use std::ops::Deref;
#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;
use std::path::PathBuf;

/// The bytes of one file: mapped (native), or owned.
pub enum FileBytes {
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            FileBytes::Mapped(m) => m,
            FileBytes::Owned(v) => v,
        }
    }
}

impl FileBytes {
    /// `path` memory-mapped (`expected` names what it should be, for the message when it is a
    /// directory or a device).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn map(path: &Path, expected: &str) -> Result<FileBytes> {
        let file = crate::error::open_file(path, expected)?;
        // SAFETY: the map is read-only; a file truncated or rewritten by another process while
        // it is mapped is outside what we can guard against (as for every mmap reader).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(crate::error::io_err(path))?;
        Ok(FileBytes::Mapped(map))
    }
}

fn not_found(path: PathBuf) -> ModelError {
    ModelError::Io { path, source: std::io::Error::new(std::io::ErrorKind::NotFound, "not found") }
}

/// The files of a model folder (a sentence-transformers directory), named by their path inside
/// it with `/` separators ("config.json", "1_Pooling/config.json").
pub enum ModelFiles {
    /// A directory on disk.
    Dir(PathBuf),
    /// Files already in memory; a missing name is a missing file. Messages name a file by its
    /// name inside the folder.
    Memory(BTreeMap<String, Vec<u8>>),
}

impl ModelFiles {
    /// The path messages give for `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        match self {
            ModelFiles::Dir(d) => name.split('/').fold(d.clone(), |p, part| p.join(part)),
            ModelFiles::Memory(_) => PathBuf::from(name),
        }
    }

    pub fn exists(&self, name: &str) -> bool {
        match self {
            ModelFiles::Dir(_) => self.path(name).exists(),
            ModelFiles::Memory(m) => m.contains_key(name),
        }
    }

    /// The whole file `name`.
    pub fn read(&self, name: &str) -> Result<Vec<u8>> {
        match self {
            ModelFiles::Dir(_) => {
                let path = self.path(name);
                std::fs::read(&path).map_err(crate::error::io_err(&path))
            }
            ModelFiles::Memory(m) => m.get(name).cloned().ok_or_else(|| not_found(self.path(name))),
        }
    }

    /// The file `name` for a loader that keeps it (a checkpoint): mapped from disk, or moved
    /// out of memory without a copy.
    pub fn take(&mut self, name: &str, expected: &str) -> Result<FileBytes> {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            ModelFiles::Dir(_) => FileBytes::map(&self.path(name), expected),
            #[cfg(target_arch = "wasm32")]
            ModelFiles::Dir(_) => {
                let _ = expected;
                Ok(FileBytes::Owned(self.read(name)?))
            }
            ModelFiles::Memory(m) => m.remove(name).map(FileBytes::Owned).ok_or_else(|| not_found(PathBuf::from(name))),
        }
    }
}

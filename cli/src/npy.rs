//! .npy files in and out as Kiln tensors, through kiln-serve's codec (serve/src/npy.rs: the one
//! .npy parser of the CLI and the service).

use anyhow::{anyhow, Context, Result};
use kiln_core::Tensor;
use kiln_serve::npy;

pub fn read(path: &str) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let a = npy::decode(&bytes).map_err(|e| anyhow!("{path}: {e}"))?;
    if a.from_f64 {
        eprintln!("kiln: {path}: float64 converted to float32 (WGSL has no portable f64)");
    }
    Ok(Tensor::from_bytes(&a.bytes, &a.shape, a.dtype)?)
}

pub fn write(path: &str, t: &Tensor) -> Result<()> {
    let bytes = npy::encode(t.dtype(), t.shape(), &t.to_bytes()?).map_err(|e| anyhow!("{path}: {e}"))?;
    std::fs::write(path, bytes).with_context(|| format!("writing {path}"))
}

/// Writes plain host data (embeddings) without a tensor in between.
pub(crate) fn write_vec<T: npyz::AutoSerialize + Copy>(path: &str, shape: &[u64], data: &[T]) -> Result<()> {
    use npyz::WriterBuilder;
    let file = std::fs::File::create(path).with_context(|| format!("creating {path}"))?;
    let opts = npyz::WriteOptions::<T>::new().default_dtype().shape(shape);
    let mut w = opts.writer(std::io::BufWriter::new(file)).begin_nd()?;
    w.extend(data.iter().copied())?;
    w.finish()?;
    Ok(())
}

//! .npy files in and out (npyz), as Kiln tensors.

use anyhow::{bail, Context, Result};
use kiln_core::{f16, DType, Tensor};
use std::io::BufWriter;

pub fn read(path: &str) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let npy = npyz::NpyFile::new(&bytes[..]).with_context(|| format!("{path} is not a .npy file"))?;
    if npy.order() != npyz::Order::C {
        bail!("{path}: Fortran-order arrays are not supported; save it in C order");
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = npy.dtype().descr();
    let t = match descr.trim_matches('\'') {
        "<f4" => Tensor::from_slice(&npy.into_vec::<f32>()?, &shape)?,
        "<f2" => Tensor::from_slice(&npy.into_vec::<f16>()?, &shape)?,
        "<i4" => Tensor::from_slice(&npy.into_vec::<i32>()?, &shape)?,
        "<u4" => Tensor::from_slice(&npy.into_vec::<u32>()?, &shape)?,
        "|b1" => Tensor::from_bools(&npy.into_vec::<bool>()?, &shape)?,
        "<f8" => {
            let v: Vec<f32> = npy.into_vec::<f64>()?.into_iter().map(|x| x as f32).collect();
            eprintln!("kiln: {path}: float64 converted to float32 (WGSL has no portable f64)");
            Tensor::from_slice(&v, &shape)?
        }
        other => bail!("{path}: dtype {other} is not supported (float32, float16, int32, uint32, bool)"),
    };
    Ok(t)
}

pub(crate) fn write_vec<T: npyz::AutoSerialize + Copy>(path: &str, shape: &[u64], data: &[T]) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {path}"))?;
    use npyz::WriterBuilder;
    let mut w = npyz::WriteOptions::<T>::new().default_dtype().shape(shape).writer(BufWriter::new(file)).begin_nd()?;
    w.extend(data.iter().copied())?;
    w.finish()?;
    Ok(())
}

pub fn write(path: &str, t: &Tensor) -> Result<()> {
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    match t.dtype() {
        DType::F32 => write_vec(path, &shape, &t.to_vec::<f32>()?),
        DType::F16 => write_vec(path, &shape, &t.to_vec::<f16>()?),
        DType::I32 => write_vec(path, &shape, &t.to_vec::<i32>()?),
        DType::U32 => write_vec(path, &shape, &t.to_vec::<u32>()?),
        DType::Bool => write_vec(path, &shape, &t.to_bools()?),
    }
}

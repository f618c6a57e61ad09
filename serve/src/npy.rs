//! .npy bytes to and from Kiln's (dtype, shape, bytes), through npyz: the one .npy codec of the
//! CLI (`kiln run`, cli/src/npy.rs reads files through it) and the service (uploads, downloads).
//! Pure functions on bytes, so the fuzz target calls them as they are.

use kiln_core::{f16, DType};

/// A decoded array: Kiln's dtype, the shape and the little-endian bytes Kiln stores.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
    /// The file held float64, converted to float32 (WGSL has no portable f64).
    pub from_f64: bool,
}

/// Decodes a .npy file. The declared shape is checked against the bytes actually present
/// before anything is allocated for it, so a header declaring a huge array costs nothing.
pub fn decode(bytes: &[u8]) -> Result<Array, String> {
    // npyz multiplies the declared dimensions unchecked (a panic in debug builds): contained here.
    let mut data: &[u8] = bytes;
    let header = match std::panic::catch_unwind(move || npyz::NpyHeader::from_reader(&mut data).map(|h| (h, data))) {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => return Err(format!("not a .npy file: {e}")),
        Err(_) => return Err("not a .npy file: its header does not describe an array".into()),
    };
    // What the reader left is the data section.
    let (header, data) = header;
    let present = data.len();
    let npy = npyz::NpyFile::with_header(header, data);
    if npy.order() != npyz::Order::C {
        return Err("Fortran-order arrays are not supported; save it in C order".into());
    }
    let descr = npy.dtype().descr();
    let (dtype, item, from_f64) = match descr.trim_matches('\'') {
        "<f4" => (DType::F32, 4, false),
        "<f2" => (DType::F16, 2, false),
        "<i4" => (DType::I32, 4, false),
        "<u4" => (DType::U32, 4, false),
        "|b1" => (DType::Bool, 1, false),
        "<f8" => (DType::F32, 8, true),
        other => return Err(format!("dtype {other} is not supported (float32, float16, int32, uint32, bool)")),
    };
    let shape = npy.shape().iter().map(|&d| usize::try_from(d).ok()).collect::<Option<Vec<usize>>>();
    let declared = shape.as_ref().and_then(|s| s.iter().try_fold(item, |acc: usize, &d| acc.checked_mul(d)));
    let (Some(shape), Some(declared)) = (shape, declared) else {
        return Err("the declared shape is too large".into());
    };
    if declared != present {
        return Err(format!("the header declares {declared} bytes of data, the file has {present}"));
    }
    let bytes = match dtype {
        DType::F32 if from_f64 => {
            let v: Vec<f32> = npy.into_vec::<f64>().map_err(|e| e.to_string())?.into_iter().map(|x| x as f32).collect();
            bytemuck_bytes(&v)
        }
        DType::F32 => bytemuck_bytes(&npy.into_vec::<f32>().map_err(|e| e.to_string())?),
        DType::F16 => npy.into_vec::<f16>().map_err(|e| e.to_string())?.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::I32 => npy.into_vec::<i32>().map_err(|e| e.to_string())?.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::U32 => npy.into_vec::<u32>().map_err(|e| e.to_string())?.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::Bool => npy.into_vec::<bool>().map_err(|e| e.to_string())?.into_iter().map(u8::from).collect(),
    };
    Ok(Array { dtype, shape, bytes, from_f64 })
}

fn bytemuck_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Encodes Kiln's bytes of `dtype` and `shape` as a .npy file.
pub fn encode(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Vec<u8>, String> {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let le4 = |c: &[u8]| [c[0], c[1], c[2], c[3]];
    match dtype {
        DType::F32 => write(&shape, bytes.chunks_exact(4).map(|c| f32::from_le_bytes(le4(c)))),
        DType::F16 => write(&shape, bytes.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]))),
        DType::I32 => write(&shape, bytes.chunks_exact(4).map(|c| i32::from_le_bytes(le4(c)))),
        DType::U32 => write(&shape, bytes.chunks_exact(4).map(|c| u32::from_le_bytes(le4(c)))),
        DType::Bool => write(&shape, bytes.iter().map(|&b| b != 0)),
    }
}

fn write<T: npyz::AutoSerialize>(shape: &[u64], data: impl Iterator<Item = T>) -> Result<Vec<u8>, String> {
    use npyz::WriterBuilder;
    let mut out = Vec::new();
    {
        let mut w = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(shape)
            .writer(&mut out)
            .begin_nd()
            .map_err(|e| e.to_string())?;
        w.extend(data).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

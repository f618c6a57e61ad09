//! GGUF files (llama.cpp's model format): header, metadata, tensor table and the tensor data,
//! memory-mapped so that a tensor goes from the map straight into a GPU buffer.
//!
//! Layout (v2 and v3, little-endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata
//! count, the metadata key/values, the tensor table (name, dims, type, offset), then the data
//! section at the next multiple of `general.alignment` (default 32), each tensor's offset
//! relative to it. The parser trusts no count in the file: every length is checked against the
//! bytes that are left before anything is allocated for it, so a hostile file gets an error, not
//! a huge allocation or a panic.

use crate::error::{ModelError, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"GGUF";
/// general.alignment when the file does not say.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's GGML_MAX_DIMS.
const MAX_DIMS: u32 = 4;
/// Arrays of arrays are allowed by the format; a bound keeps recursion off the stack limit.
const MAX_ARRAY_DEPTH: usize = 8;

/// What is wrong with a GGUF file (before the path is attached).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GgufError {
    #[error("not a GGUF file (magic {0:02x?}, expected \"GGUF\")")]
    BadMagic([u8; 4]),
    #[error("GGUF version {0} is not supported (only 2 and 3)")]
    Version(u32),
    #[error("big-endian GGUF files are not supported")]
    BigEndian,
    #[error("truncated: {what} at byte {offset} needs {needed} bytes, the file has {available} left")]
    Truncated { what: String, offset: u64, needed: u64, available: u64 },
    #[error("tensor {name}: ggml type {id} is not supported")]
    TensorType { name: String, id: u32 },
    #[error("{0}")]
    Invalid(String),
}

impl GgufError {
    pub(crate) fn into_model_error(self, path: &Path) -> ModelError {
        match self {
            GgufError::Version(_) | GgufError::BigEndian | GgufError::TensorType { .. } => {
                ModelError::Unsupported(format!("{}: {self}", path.display()))
            }
            _ => ModelError::Corrupt { path: path.to_path_buf(), message: self.to_string() },
        }
    }
}

type GResult<T> = std::result::Result<T, GgufError>;

/// ggml tensor types this reader knows the block layout of (so it can check sizes). Others are
/// an error when met in the tensor table.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    I8,
    I16,
    I32,
    I64,
    F64,
    BF16,
}

impl GgmlType {
    pub fn from_id(id: u32) -> Option<GgmlType> {
        use GgmlType::*;
        Some(match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2_K,
            11 => Q3_K,
            12 => Q4_K,
            13 => Q5_K,
            14 => Q6_K,
            15 => Q8_K,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            30 => BF16,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2_K => 10,
            Q3_K => 11,
            Q4_K => 12,
            Q5_K => 13,
            Q6_K => 14,
            Q8_K => 15,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            BF16 => 30,
        }
    }

    /// ggml's name (as the gguf Python package prints it).
    pub fn name(self) -> &'static str {
        use GgmlType::*;
        match self {
            F32 => "F32",
            F16 => "F16",
            Q4_0 => "Q4_0",
            Q4_1 => "Q4_1",
            Q5_0 => "Q5_0",
            Q5_1 => "Q5_1",
            Q8_0 => "Q8_0",
            Q8_1 => "Q8_1",
            Q2_K => "Q2_K",
            Q3_K => "Q3_K",
            Q4_K => "Q4_K",
            Q5_K => "Q5_K",
            Q6_K => "Q6_K",
            Q8_K => "Q8_K",
            I8 => "I8",
            I16 => "I16",
            I32 => "I32",
            I64 => "I64",
            F64 => "F64",
            BF16 => "BF16",
        }
    }

    /// (elements per block, bytes per block), from ggml's type traits.
    pub fn block(self) -> (u64, u64) {
        use GgmlType::*;
        match self {
            F32 | I32 => (1, 4),
            F16 | BF16 | I16 => (1, 2),
            I8 => (1, 1),
            I64 | F64 => (1, 8),
            Q4_0 => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 36),
            Q2_K => (256, 84),
            Q3_K => (256, 110),
            Q4_K => (256, 144),
            Q5_K => (256, 176),
            Q6_K => (256, 210),
            Q8_K => (256, 292),
        }
    }
}

/// A metadata value. Arrays are typed vectors so that a long array costs about what it costs in
/// the file, not a `Value` per element.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Array {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Value {
    /// Any unsigned or non-negative signed integer, as u64 (GGUF writers differ in the width
    /// they pick for counts).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The gguf package's name of the value type (for messages).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "UINT8",
            Value::I8(_) => "INT8",
            Value::U16(_) => "UINT16",
            Value::I16(_) => "INT16",
            Value::U32(_) => "UINT32",
            Value::I32(_) => "INT32",
            Value::F32(_) => "FLOAT32",
            Value::Bool(_) => "BOOL",
            Value::String(_) => "STRING",
            Value::Array(_) => "ARRAY",
            Value::U64(_) => "UINT64",
            Value::I64(_) => "INT64",
            Value::F64(_) => "FLOAT64",
        }
    }
}

/// One entry of the tensor table. `dims` are in ggml order: dims[0] is the contiguous one (a
/// [rows, cols] row-major matrix is dims [cols, rows]).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// From the start of the data section.
    pub offset: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// Everything before the tensor data, parsed.
#[derive(Debug, Clone)]
pub struct Header {
    pub version: u32,
    /// In file order.
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute file offset of the data section.
    pub data_offset: u64,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// `buf` is the start of a file still arriving ([`Header::parse_prefix`]): a count the
    /// bytes so far cannot back is "truncated" (more may come), not "invalid".
    prefix: bool,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// `n` bytes are needed at the current position and fewer are left.
    fn short(&self, n: u64, what: &dyn Fn() -> String) -> GgufError {
        GgufError::Truncated { what: what(), offset: self.pos as u64, needed: n, available: self.left() as u64 }
    }

    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> GResult<&'a [u8]> {
        if n > self.left() as u64 {
            return Err(self.short(n, what));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self, what: &dyn Fn() -> String) -> GResult<[u8; N]> {
        Ok(self.take(N as u64, what)?.try_into().expect("take returned N bytes"))
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> GResult<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> GResult<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    /// A count of items each at least `min_size` bytes: checked against what is left, so that
    /// no allocation is sized by a number the file has not backed with bytes.
    fn count(&mut self, min_size: u64, what: &dyn Fn() -> String) -> GResult<usize> {
        let at = self.pos as u64;
        let n = self.u64(what)?;
        if n.saturating_mul(min_size) > self.left() as u64 {
            if self.prefix {
                return Err(self.short(n.saturating_mul(min_size), what));
            }
            return Err(GgufError::Invalid(format!(
                "{} at byte {at}: count {n} cannot fit in the {} bytes left",
                what(),
                self.left()
            )));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> GResult<String> {
        let at = self.pos;
        let n = self.count(1, what)?;
        let bytes = self.take(n as u64, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| GgufError::Invalid(format!("{} at byte {at}: not valid UTF-8", what())))
    }
}

/// Smallest encoded size of a value of metadata type `ty` (for checking array counts).
fn min_value_size(ty: u32) -> u64 {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => 1,
    }
}

fn read_value(r: &mut Reader, ty: u32, depth: usize, what: &dyn Fn() -> String) -> GResult<Value> {
    Ok(match ty {
        0 => Value::U8(r.arr::<1>(what)?[0]),
        1 => Value::I8(r.arr::<1>(what)?[0] as i8),
        2 => Value::U16(u16::from_le_bytes(r.arr(what)?)),
        3 => Value::I16(i16::from_le_bytes(r.arr(what)?)),
        4 => Value::U32(r.u32(what)?),
        5 => Value::I32(i32::from_le_bytes(r.arr(what)?)),
        6 => Value::F32(f32::from_le_bytes(r.arr(what)?)),
        7 => {
            let at = r.pos;
            match r.arr::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(GgufError::Invalid(format!("{} at byte {at}: bool byte {b}", what()))),
            }
        }
        8 => Value::String(r.string(what)?),
        9 => Value::Array(read_array(r, depth + 1, what)?),
        10 => Value::U64(r.u64(what)?),
        11 => Value::I64(i64::from_le_bytes(r.arr(what)?)),
        12 => Value::F64(f64::from_le_bytes(r.arr(what)?)),
        t => return Err(GgufError::Invalid(format!("{}: unknown metadata value type {t}", what()))),
    })
}

fn read_array(r: &mut Reader, depth: usize, what: &dyn Fn() -> String) -> GResult<Array> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::Invalid(format!("{}: arrays nested deeper than {MAX_ARRAY_DEPTH}", what())));
    }
    let ty = r.u32(what)?;
    if ty > 12 {
        return Err(GgufError::Invalid(format!("{}: unknown array element type {ty}", what())));
    }
    let n = r.count(min_value_size(ty), what)?;
    macro_rules! prim {
        ($variant:ident, $t:ty) => {{
            let bytes = r.take((n * std::mem::size_of::<$t>()) as u64, what)?;
            Array::$variant(
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            )
        }};
    }
    Ok(match ty {
        0 => Array::U8(r.take(n as u64, what)?.to_vec()),
        1 => Array::I8(r.take(n as u64, what)?.iter().map(|&b| b as i8).collect()),
        2 => prim!(U16, u16),
        3 => prim!(I16, i16),
        4 => prim!(U32, u32),
        5 => prim!(I32, i32),
        6 => prim!(F32, f32),
        7 => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                match read_value(r, 7, depth, what)? {
                    Value::Bool(b) => v.push(b),
                    _ => unreachable!("type 7 reads a bool"),
                }
            }
            Array::Bool(v)
        }
        8 => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(r.string(what)?);
            }
            Array::String(v)
        }
        9 => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(read_array(r, depth + 1, what)?);
            }
            Array::Array(v)
        }
        10 => prim!(U64, u64),
        11 => prim!(I64, i64),
        12 => prim!(F64, f64),
        _ => unreachable!("checked above"),
    })
}

/// No two tensors share a byte of the data section: sorted by offset, each (padded to the
/// alignment, as writers lay them out) ends at or before the next begins. With every range also
/// inside the file (checked before), the tensors' bytes add up to at most the data section, so
/// what a loader uploads (kiln-models keeps GGUF weights in their file format on the GPU, with no
/// expansion) is bounded by the file's size. Without this, a 1.7 MiB file whose 1000 layers all
/// point at layer 0's bytes loaded to 2 GB of device memory (issue 28). Empty tensors take no
/// bytes and may sit anywhere.
fn check_disjoint(tensors: &[TensorInfo], alignment: u64) -> GResult<()> {
    let mut order: Vec<&TensorInfo> = tensors.iter().filter(|t| t.n_bytes > 0).collect();
    order.sort_by_key(|t| t.offset);
    for w in order.windows(2) {
        let (a, b) = (w[0], w[1]);
        // In range: offset + n_bytes <= data_len was checked, so neither sum overflows.
        let end = (a.offset + a.n_bytes).div_ceil(alignment) * alignment;
        if end > b.offset {
            return Err(GgufError::Invalid(format!(
                "tensors {} (bytes {}..{}) and {} (from byte {}) overlap in the data section",
                a.name,
                a.offset,
                a.offset + a.n_bytes,
                b.name,
                b.offset
            )));
        }
    }
    Ok(())
}

impl Header {
    /// Parses the header from the start of `buf` (the whole file: offsets and sizes are checked
    /// against its length).
    pub fn parse(buf: &[u8]) -> GResult<Header> {
        Self::parse_with(buf, false)
    }

    /// The header from the first bytes of a file still arriving (a page's download): as
    /// [`parse`](Self::parse), but with the tensor data not yet checked against the file's
    /// length (the stream checks it as the bytes come), and a count the bytes so far cannot
    /// back a [`GgufError::Truncated`] saying how many more are needed (`offset + needed`), not
    /// an error of the file. Every other error is the one `parse` gives.
    pub fn parse_prefix(buf: &[u8]) -> GResult<Header> {
        Self::parse_with(buf, true)
    }

    fn parse_with(buf: &[u8], prefix: bool) -> GResult<Header> {
        let mut r = Reader { buf, pos: 0, prefix };
        let magic: [u8; 4] = r.arr(&|| "magic".into())?;
        if &magic != MAGIC {
            return Err(GgufError::BadMagic(magic));
        }
        let version = r.u32(&|| "version".into())?;
        if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
            return Err(GgufError::BigEndian);
        }
        if version != 2 && version != 3 {
            return Err(GgufError::Version(version));
        }
        // Minimum encoded sizes: a tensor entry is name length (8) + n_dims (4) + type (4) +
        // offset (8); a key/value is key length (8) + type (4) + at least one byte.
        let n_tensors = r.u64(&|| "tensor count".into())?;
        let n_kv = r.count(13, &|| "metadata count".into())?;
        if n_tensors.saturating_mul(24) > r.left() as u64 {
            if prefix {
                return Err(r.short(n_tensors.saturating_mul(24), &|| "tensor table".into()));
            }
            return Err(GgufError::Invalid(format!(
                "tensor count {n_tensors} cannot fit in the {} bytes left",
                r.left()
            )));
        }
        let mut metadata: Vec<(String, Value)> = Vec::with_capacity(n_kv);
        let mut seen = std::collections::HashSet::new();
        for i in 0..n_kv {
            let key = r.string(&|| format!("metadata key {i}"))?;
            let what = || format!("metadata {key}");
            let ty = r.u32(&what)?;
            let value = read_value(&mut r, ty, 0, &what)?;
            if !seen.insert(key.clone()) {
                return Err(GgufError::Invalid(format!("metadata key {key} appears twice")));
            }
            metadata.push((key, value));
        }
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, v)) => match v {
                Value::U32(a) if a.is_power_of_two() => u64::from(*a),
                _ => {
                    return Err(GgufError::Invalid(format!(
                        "general.alignment must be a power-of-two UINT32, found {v:?}"
                    )))
                }
            },
        };

        let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors as usize);
        let mut seen = std::collections::HashSet::new();
        for i in 0..n_tensors {
            let name = r.string(&|| format!("tensor {i} name"))?;
            let what = || format!("tensor {name}");
            let n_dims = r.u32(&what)?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(GgufError::Invalid(format!("tensor {name}: {n_dims} dimensions (1 to {MAX_DIMS})")));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(r.u64(&what)?);
            }
            let id = r.u32(&what)?;
            let offset = r.u64(&what)?;
            let ty = GgmlType::from_id(id).ok_or_else(|| GgufError::TensorType { name: name.clone(), id })?;
            let (block_elems, block_bytes) = ty.block();
            if dims[0] % block_elems != 0 {
                return Err(GgufError::Invalid(format!(
                    "tensor {name}: first dimension {} is not a multiple of the {} block size {block_elems}",
                    dims[0],
                    ty.name()
                )));
            }
            let n_elements = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| GgufError::Invalid(format!("tensor {name}: dims {dims:?} overflow")))?;
            let n_bytes = (n_elements / block_elems)
                .checked_mul(block_bytes)
                .ok_or_else(|| GgufError::Invalid(format!("tensor {name}: size overflows")))?;
            if offset % alignment != 0 {
                return Err(GgufError::Invalid(format!(
                    "tensor {name}: offset {offset} is not a multiple of the alignment {alignment}"
                )));
            }
            if !seen.insert(name.clone()) {
                return Err(GgufError::Invalid(format!("tensor {name} appears twice")));
            }
            tensors.push(TensorInfo { name, dims, ty, offset, n_bytes });
        }
        let data_offset = (r.pos as u64).div_ceil(alignment) * alignment;
        // A stream knows no length yet: only that each tensor's end is a number (so that
        // `check_disjoint`'s sums cannot overflow); each is checked against the bytes as they come.
        let data_len = if prefix { u64::MAX / 2 } else { (buf.len() as u64).saturating_sub(data_offset) };
        for t in &tensors {
            if prefix && t.offset.checked_add(t.n_bytes).is_none_or(|end| end > data_len) {
                return Err(GgufError::Invalid(format!(
                    "tensor {}: {} bytes at offset {} of the data section are past any file",
                    t.name, t.n_bytes, t.offset
                )));
            }
            if t.offset.checked_add(t.n_bytes).is_none_or(|end| end > data_len) {
                return Err(GgufError::Truncated {
                    what: format!("tensor {} data", t.name),
                    offset: data_offset.saturating_add(t.offset),
                    needed: t.n_bytes,
                    available: data_len.saturating_sub(t.offset),
                });
            }
        }
        check_disjoint(&tensors, alignment)?;
        Ok(Header { version, metadata, tensors, alignment, data_offset })
    }
}

/// Where a [`GgufFile`]'s tensor bytes are.
enum Data {
    /// The whole file, memory-mapped (or its bytes, in the browser).
    File(crate::files::FileBytes),
    /// A streamed file's ([`crate::gguf_stream`]): only the tensors it kept on the host, by
    /// name; the others went to the GPU as they arrived, or were skipped.
    Kept(HashMap<String, Vec<u8>>),
}

/// A GGUF file, memory-mapped (or its bytes, in the browser; or its header and the few tensors
/// a stream kept).
pub struct GgufFile {
    path: PathBuf,
    data: Data,
    header: Header,
    index: HashMap<String, usize>,
    keys: HashMap<String, usize>,
}

impl GgufFile {
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        Self::from_bytes(path, crate::files::FileBytes::map(path, "a .gguf file")?)
    }

    /// A GGUF file from its bytes (`path` names it in messages).
    pub fn from_bytes(path: &Path, map: crate::files::FileBytes) -> Result<GgufFile> {
        let header = Header::parse(&map).map_err(|e| e.into_model_error(path))?;
        Ok(Self::with_data(path, header, Data::File(map)))
    }

    /// A streamed file: its header, and the bytes of the tensors `kept` on the host (the
    /// others' [`has_data`](Self::has_data) is false).
    pub(crate) fn streamed(path: &Path, header: Header, kept: HashMap<String, Vec<u8>>) -> GgufFile {
        Self::with_data(path, header, Data::Kept(kept))
    }

    fn with_data(path: &Path, header: Header, data: Data) -> GgufFile {
        let index = header.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        let keys = header.metadata.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
        GgufFile { path: path.to_path_buf(), data, header, index, keys }
    }

    /// Keeps a streamed tensor's bytes on the host (nothing for a whole file, which has them).
    pub(crate) fn keep(&mut self, name: String, bytes: Vec<u8>) {
        if let Data::Kept(kept) = &mut self.data {
            kept.insert(name, bytes);
        }
    }

    /// Whether [`data`](Self::data) holds `t`'s bytes: always for a whole file; for a streamed
    /// one, only for the tensors the stream kept on the host.
    pub fn has_data(&self, t: &TensorInfo) -> bool {
        match &self.data {
            Data::File(_) => true,
            Data::Kept(kept) => t.n_bytes == 0 || kept.contains_key(&t.name),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.keys.get(key).map(|&i| &self.header.metadata[i].1)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.header.tensors[i])
    }

    /// The bytes of a tensor of this file (bounds were checked when the header was parsed);
    /// empty where [`has_data`](Self::has_data) is false (a streamed tensor now on the GPU).
    pub fn data(&self, t: &TensorInfo) -> &[u8] {
        match &self.data {
            Data::File(map) => {
                let start = (self.header.data_offset + t.offset) as usize;
                &map[start..start + t.n_bytes as usize]
            }
            Data::Kept(kept) => kept.get(&t.name).map_or(&[], Vec::as_slice),
        }
    }

    fn corrupt(&self, message: impl std::fmt::Display) -> ModelError {
        ModelError::Corrupt { path: self.path.clone(), message: message.to_string() }
    }

    fn required(&self, key: &str) -> Result<&Value> {
        self.get(key).ok_or_else(|| self.corrupt(format!("metadata {key} missing")))
    }

    pub fn u64(&self, key: &str) -> Result<u64> {
        let v = self.required(key)?;
        v.as_u64().ok_or_else(|| self.corrupt(format!("metadata {key}: expected an integer, found {v:?}")))
    }

    pub fn f64(&self, key: &str) -> Result<f64> {
        let v = self.required(key)?;
        v.as_f64().ok_or_else(|| self.corrupt(format!("metadata {key}: expected a number, found {v:?}")))
    }

    pub fn str(&self, key: &str) -> Result<&str> {
        let v = self.required(key)?;
        v.as_str().ok_or_else(|| self.corrupt(format!("metadata {key}: expected a string, found {}", v.type_name())))
    }

    pub fn strings(&self, key: &str) -> Result<&[String]> {
        match self.required(key)? {
            Value::Array(Array::String(v)) => Ok(v),
            v => Err(self.corrupt(format!("metadata {key}: expected an array of strings, found {}", v.type_name()))),
        }
    }

    /// The tensor `name`, checked to be of type `ty` with ggml dims `dims`.
    pub fn expect(&self, name: &str, ty: &[GgmlType], dims: &[u64]) -> Result<&TensorInfo> {
        let t = self
            .tensor(name)
            .ok_or_else(|| ModelError::MissingWeight(format!("{name} (in {})", self.path.display())))?;
        if !ty.contains(&t.ty) || t.dims != dims {
            let names: Vec<&str> = ty.iter().map(|t| t.name()).collect();
            return Err(ModelError::WeightShape {
                name: name.into(),
                expected: format!("{} {dims:?}", names.join("|")),
                found: format!("{} {:?}", t.ty.name(), t.dims),
            });
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes GGUF files for the tests, byte by byte as the format says.
    #[derive(Default)]
    pub(crate) struct Writer {
        pub buf: Vec<u8>,
    }

    impl Writer {
        pub fn u32(&mut self, v: u32) -> &mut Self {
            self.buf.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub fn u64(&mut self, v: u64) -> &mut Self {
            self.buf.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub fn str(&mut self, s: &str) -> &mut Self {
            self.u64(s.len() as u64);
            self.buf.extend_from_slice(s.as_bytes());
            self
        }
        pub fn header(&mut self, version: u32, n_tensors: u64, n_kv: u64) -> &mut Self {
            self.buf.extend_from_slice(b"GGUF");
            self.u32(version).u64(n_tensors).u64(n_kv)
        }
        pub fn pad_to(&mut self, align: usize) -> &mut Self {
            while !self.buf.len().is_multiple_of(align) {
                self.buf.push(0);
            }
            self
        }
    }

    /// A file with one KV of every type (and arrays, of strings and of arrays) and two tensors.
    fn sample(version: u32) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let mut w = Writer::default();
        w.header(version, 2, 15);
        w.str("u8").u32(0).buf.push(7);
        w.str("i8").u32(1).buf.push(0xfe);
        w.str("u16").u32(2).buf.extend_from_slice(&513u16.to_le_bytes());
        w.str("i16").u32(3).buf.extend_from_slice(&(-3i16).to_le_bytes());
        w.str("u32").u32(4).u32(70000);
        w.str("i32").u32(5).buf.extend_from_slice(&(-70000i32).to_le_bytes());
        w.str("f32").u32(6).buf.extend_from_slice(&1.5f32.to_le_bytes());
        w.str("bool").u32(7).buf.push(1);
        w.str("str").u32(8).str("héllo");
        w.str("u64").u32(10).u64(1 << 40);
        w.str("i64").u32(11).buf.extend_from_slice(&(-(1i64 << 40)).to_le_bytes());
        w.str("f64").u32(12).buf.extend_from_slice(&0.25f64.to_le_bytes());
        w.str("strings").u32(9).u32(8).u64(3).str("a").str("").str("<|im_end|>");
        w.str("nested").u32(9).u32(9).u64(2);
        w.u32(4).u64(2).u32(1).u32(2);
        w.u32(0).u64(0);
        w.str("general.alignment").u32(4).u32(64);
        // tensors: f32 [3], q8_0 [32, 2]
        w.str("norm").u32(1).u64(3).u32(0).u64(0);
        w.str("w").u32(2).u64(32).u64(2).u32(8).u64(64);
        w.pad_to(64);
        let norm: Vec<u8> = [1.0f32, -2.0, 3.5].iter().flat_map(|v| v.to_le_bytes()).collect();
        let q: Vec<u8> = (0..68u8).collect();
        w.buf.extend_from_slice(&norm);
        w.pad_to(64);
        w.buf.extend_from_slice(&q);
        (w.buf, norm, q)
    }

    fn parse_err(buf: &[u8]) -> GgufError {
        Header::parse(buf).expect_err("should not parse")
    }

    #[test]
    fn parses_every_value_type_and_the_tensor_table() {
        for version in [2, 3] {
            let (buf, norm, q) = sample(version);
            let h = Header::parse(&buf).unwrap();
            assert_eq!(h.version, version);
            assert_eq!(h.alignment, 64);
            let get = |k: &str| h.metadata.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap();
            assert_eq!(get("u8"), Value::U8(7));
            assert_eq!(get("i8"), Value::I8(-2));
            assert_eq!(get("u16"), Value::U16(513));
            assert_eq!(get("i16"), Value::I16(-3));
            assert_eq!(get("u32"), Value::U32(70000));
            assert_eq!(get("i32"), Value::I32(-70000));
            assert_eq!(get("f32"), Value::F32(1.5));
            assert_eq!(get("bool"), Value::Bool(true));
            assert_eq!(get("str"), Value::String("héllo".into()));
            assert_eq!(get("u64"), Value::U64(1 << 40));
            assert_eq!(get("i64"), Value::I64(-(1 << 40)));
            assert_eq!(get("f64"), Value::F64(0.25));
            assert_eq!(get("strings"), Value::Array(Array::String(vec!["a".into(), "".into(), "<|im_end|>".into()])));
            assert_eq!(get("nested"), Value::Array(Array::Array(vec![Array::U32(vec![1, 2]), Array::U8(vec![])])));
            assert_eq!(get("i32").as_u64(), None);
            assert_eq!(get("u16").as_u64(), Some(513));
            assert_eq!(h.tensors.len(), 2);
            assert_eq!(
                h.tensors[0],
                TensorInfo { name: "norm".into(), dims: vec![3], ty: GgmlType::F32, offset: 0, n_bytes: 12 }
            );
            assert_eq!(h.tensors[1].ty, GgmlType::Q8_0);
            assert_eq!(h.tensors[1].n_bytes, 68);
            let d = h.data_offset as usize;
            assert_eq!(d % 64, 0);
            assert_eq!(&buf[d..d + 12], &norm[..]);
            assert_eq!(&buf[d + 64..d + 64 + 68], &q[..]);
        }
    }

    #[test]
    fn default_alignment_is_32() {
        let mut w = Writer::default();
        w.header(3, 1, 0);
        w.str("t").u32(1).u64(8).u32(0).u64(0);
        w.pad_to(32);
        w.buf.extend_from_slice(&[0u8; 32]);
        let h = Header::parse(&w.buf).unwrap();
        assert_eq!(h.alignment, 32);
        assert_eq!(h.data_offset % 32, 0);
        assert!(h.data_offset > 0);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let (buf, _, _) = sample(3);
        for n in 0..buf.len() {
            match Header::parse(&buf[..n]) {
                Err(GgufError::Truncated { .. }) | Err(GgufError::Invalid(_)) => {}
                other => panic!("prefix of {n} bytes: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_magic_version_and_endianness() {
        let (mut buf, _, _) = sample(3);
        buf[0] = b'X';
        assert!(matches!(parse_err(&buf), GgufError::BadMagic(_)));
        for (v, want) in
            [(1u32, GgufError::Version(1)), (4, GgufError::Version(4)), (3u32.swap_bytes(), GgufError::BigEndian)]
        {
            let (mut buf, _, _) = sample(3);
            buf[4..8].copy_from_slice(&v.to_le_bytes());
            assert_eq!(parse_err(&buf), want);
        }
    }

    #[test]
    fn unsupported_tensor_type_names_the_tensor() {
        let mut w = Writer::default();
        w.header(3, 1, 0);
        w.str("blk.0.weird").u32(1).u64(32).u32(99).u64(0);
        assert_eq!(parse_err(&w.buf), GgufError::TensorType { name: "blk.0.weird".into(), id: 99 });
    }

    #[test]
    fn absurd_counts_are_errors_not_allocations() {
        // Tensor count, metadata count, string length, array length: each near u64::MAX.
        let mut w = Writer::default();
        w.header(3, u64::MAX / 2, 0);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("tensor count")));
        let mut w = Writer::default();
        w.header(3, 0, u64::MAX);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("metadata count")));
        let mut w = Writer::default();
        w.header(3, 0, 1).u64(1 << 62).u64(0);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("metadata key 0")));
        let mut w = Writer::default();
        w.header(3, 0, 1).str("big").u32(9).u32(8).u64(u64::MAX);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("metadata big")));
        let mut w = Writer::default();
        w.header(3, 0, 1).str("big").u32(9).u32(10).u64(1 << 61);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(_)));
        // Nested arrays deeper than the bound.
        let mut w = Writer::default();
        w.header(3, 0, 1).str("deep").u32(9);
        for _ in 0..20 {
            w.u32(9).u64(1);
        }
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("nested")));
    }

    #[test]
    fn bad_tensor_entries() {
        let one = |dims: &[u64], ty: u32, offset: u64, data: usize| {
            let mut w = Writer::default();
            w.header(3, 1, 0);
            w.str("t").u32(dims.len() as u32);
            for &d in dims {
                w.u64(d);
            }
            w.u32(ty).u64(offset);
            w.pad_to(32);
            w.buf.extend(std::iter::repeat_n(0u8, data));
            w.buf
        };
        assert!(Header::parse(&one(&[32, 2], 8, 0, 68)).is_ok());
        // Data past the end of the file.
        assert!(matches!(parse_err(&one(&[32, 2], 8, 0, 67)), GgufError::Truncated { .. }));
        assert!(matches!(parse_err(&one(&[32, 2], 8, 32, 68)), GgufError::Truncated { .. }));
        // Offset near u64::MAX must not wrap.
        assert!(matches!(parse_err(&one(&[8], 0, u64::MAX - 31, 32)), GgufError::Truncated { .. }));
        // Misaligned offset, dims not a whole number of blocks, overflowing dims, 0 or 5 dims.
        assert!(matches!(parse_err(&one(&[8], 0, 4, 64)), GgufError::Invalid(m) if m.contains("alignment")));
        assert!(matches!(parse_err(&one(&[33], 8, 0, 68)), GgufError::Invalid(m) if m.contains("block size")));
        assert!(
            matches!(parse_err(&one(&[1 << 40, 1 << 40], 0, 0, 0)), GgufError::Invalid(m) if m.contains("overflow"))
        );
        assert!(matches!(parse_err(&one(&[], 0, 0, 0)), GgufError::Invalid(m) if m.contains("dimensions")));
        assert!(
            matches!(parse_err(&one(&[1, 1, 1, 1, 1], 0, 0, 4)), GgufError::Invalid(m) if m.contains("dimensions"))
        );
    }

    /// A table of `tensors` (name, f32 element count, offset) over `data` bytes of data.
    fn table(tensors: &[(String, u64, u64)], data: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.header(3, tensors.len() as u64, 0);
        for (name, n, offset) in tensors {
            w.str(name).u32(1).u64(*n).u32(0).u64(*offset);
        }
        w.pad_to(32);
        w.buf.extend(std::iter::repeat_n(0u8, data));
        w.buf
    }

    #[test]
    fn overlapping_tensor_data_is_refused() {
        // Issue 28: 1000 layers whose tensors all point at layer 0's bytes. Each would be
        // uploaded on its own: 1000x the file's data on the device.
        let aliased: Vec<(String, u64, u64)> = (0..1000).map(|i| (format!("blk.{i}.w"), 256, 0)).collect();
        let e = parse_err(&table(&aliased, 1024));
        assert!(matches!(&e, GgufError::Invalid(m) if m.contains("overlap") && m.contains("blk.")), "{e}");
        // The same layers laid out one after another parse, and their bytes add up to no more
        // than the file's data section.
        let laid: Vec<(String, u64, u64)> = (0..1000).map(|i| (format!("blk.{i}.w"), 8, i * 32)).collect();
        let buf = table(&laid, 32 * 1000);
        let h = Header::parse(&buf).unwrap();
        let total: u64 = h.tensors.iter().map(|t| t.n_bytes).sum();
        assert!(total <= buf.len() as u64 - h.data_offset);
        // Attacks on the check: one byte of overlap at the end, a tensor inside another, the
        // overlapping pair listed in reverse order, and a pair that is identical in all but name.
        let t = |n: &str, elems: u64, off: u64| (n.to_string(), elems, off);
        for tensors in [
            vec![t("a", 9, 0), t("b", 8, 32)],  // 36 bytes from 0: 4 past where b begins
            vec![t("a", 64, 0), t("b", 8, 96)], // b inside a
            vec![t("b", 8, 96), t("a", 64, 0)], // the same, in reverse order in the table
            vec![t("a", 8, 64), t("b", 8, 64)], // the same range
        ] {
            let e = parse_err(&table(&tensors, 256));
            assert!(matches!(&e, GgufError::Invalid(m) if m.contains("overlap")), "{tensors:?}: {e}");
        }
        // Adjacent ranges (a ends where b begins) and empty tensors anywhere are fine.
        assert!(Header::parse(&table(&[t("a", 8, 0), t("b", 8, 32)], 64)).is_ok());
        assert!(Header::parse(&table(&[t("a", 16, 0), t("b", 8, 64)], 96)).is_ok());
        let empty = |n: &str, off: u64| (n.to_string(), 0, off);
        assert!(Header::parse(&table(&[t("a", 16, 0), empty("e", 32), empty("f", 32)], 64)).is_ok());
    }

    #[test]
    fn bad_values() {
        let mut w = Writer::default();
        w.header(3, 0, 1).str("b").u32(7).buf.push(2);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("bool")));
        let mut w = Writer::default();
        w.header(3, 0, 1).str("x").u32(13);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("value type 13")));
        let mut w = Writer::default();
        w.header(3, 0, 1).str("s").u32(8).u64(2).buf.extend_from_slice(&[0xff, 0xfe]);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("UTF-8")));
        let mut w = Writer::default();
        w.header(3, 0, 1).str("general.alignment").u32(4).u32(48);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("alignment")));
        let mut w = Writer::default();
        w.header(3, 0, 2).str("k").u32(0).buf.push(1);
        w.str("k").u32(0).buf.push(1);
        assert!(matches!(parse_err(&w.buf), GgufError::Invalid(m) if m.contains("twice")));
    }

    #[test]
    fn open_maps_the_file_and_reads_tensors() {
        let (buf, norm, q) = sample(3);
        let dir = std::env::temp_dir().join(format!("kiln-gguf-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sample.gguf");
        std::fs::write(&path, &buf).unwrap();
        let f = GgufFile::open(&path).unwrap();
        assert_eq!(f.data(f.tensor("norm").unwrap()), &norm[..]);
        assert_eq!(f.data(f.expect("w", &[GgmlType::Q8_0], &[32, 2]).unwrap()), &q[..]);
        assert!(matches!(f.expect("w", &[GgmlType::Q4_1], &[32, 2]), Err(ModelError::WeightShape { .. })));
        assert!(matches!(f.expect("nope", &[GgmlType::F32], &[3]), Err(ModelError::MissingWeight(_))));
        assert_eq!(f.u64("u32").unwrap(), 70000);
        assert_eq!(f.str("str").unwrap(), "héllo");
        assert_eq!(f.strings("strings").unwrap().len(), 3);
        assert!(matches!(f.u64("str"), Err(ModelError::Corrupt { .. })));
        std::fs::write(&path, &buf[..buf.len() - 1]).unwrap();
        assert!(matches!(GgufFile::open(&path), Err(ModelError::Corrupt { .. })));
        let mut v1 = buf.clone();
        v1[4] = 1;
        std::fs::write(&path, &v1).unwrap();
        let e = GgufFile::open(&path).err().unwrap();
        assert!(matches!(e, ModelError::Unsupported(_)) && e.to_string().contains("version 1"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Element types. The numeric values are the C ABI's `KilnDType` and never change.

use crate::{Error, Result};
use half::f16;

/// The dtype table: one line per element type,
/// `value Variant "name" bytes kind ["other accepted names"] "what it is"`. It produces
/// [`DType`] with `ALL`, `from_u32`, `parse`, `size`, `name`, `is_float` and `describe`; the C
/// enum `KilnDType` is generated from it by `kiln-gen` (ffi-c/src/status_gen.rs), and Python,
/// Elixir and Julia take the names from it. The numbers are the C ABI's and never change.
macro_rules! dtype_table {
    ($( $value:literal $v:ident $name:literal $size:literal $kind:ident [$($alias:literal),*] $what:literal; )*) => {
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum DType {
            $( #[doc = $what] $v = $value, )*
        }

        impl DType {
            pub const ALL: [DType; 0 $(+ { let _ = $value; 1 })*] = [$(DType::$v),*];

            pub fn from_u32(v: u32) -> Result<DType> {
                match v {
                    $($value => Ok(DType::$v),)*
                    _ => Err(Error::InvalidArgument(format!("unknown dtype value {v} (supported: {})", Self::listing(true)))),
                }
            }

            /// The name (`f32`) or one of its other names (`float32`), in any case.
            pub fn parse(name: &str) -> Result<DType> {
                match name.to_ascii_lowercase().as_str() {
                    $($name $(| $alias)* => Ok(DType::$v),)*
                    _ => Err(Error::InvalidArgument(format!("unknown dtype {name:?} (supported: {})", Self::listing(false)))),
                }
            }

            pub fn size(self) -> usize {
                match self { $(DType::$v => $size,)* }
            }

            pub fn name(self) -> &'static str {
                match self { $(DType::$v => $name,)* }
            }

            pub fn is_float(self) -> bool {
                match self { $(DType::$v => stringify!($kind) == "float",)* }
            }

            /// What the type is on the host (the C header's text).
            pub fn describe(self) -> &'static str {
                match self { $(DType::$v => $what,)* }
            }

            /// The other names `parse` accepts (`float32`, …).
            pub fn aliases(self) -> &'static [&'static str] {
                match self { $(DType::$v => &[$($alias),*],)* }
            }
        }
    };
}

dtype_table! {
    0 F32 "f32" 4 float ["float32"] "32-bit IEEE float (`float`).";
    1 F16 "f16" 2 float ["float16", "half"] "16-bit IEEE float (raw `uint16_t` bits on the host); needs an adapter with SHADER_F16.";
    2 I32 "i32" 4 int ["int32"] "32-bit signed integer (`int32_t`).";
    3 U32 "u32" 4 int ["uint32"] "32-bit unsigned integer (`uint32_t`).";
    4 Bool "bool" 1 bool ["boolean"] "Boolean, one byte per element on the host (`uint8_t` / `bool`: 0 false, any other value true, read back as 1); comparisons, logical ops, `all`/`any` and the predicates (`isnan`, …) produce it. Stored on the GPU as one u32 word per element.";
}

impl DType {
    /// "0=f32, 1=f16, …" (with values) or "f32, f16, …".
    fn listing(values: bool) -> String {
        let names =
            Self::ALL.iter().map(|d| if values { format!("{}={}", *d as u32, d.name()) } else { d.name().to_string() });
        names.collect::<Vec<_>>().join(", ")
    }

    /// The WGSL scalar type a tensor of this dtype is stored as (a bool is a u32 word holding
    /// 0 or 1: WGSL has no bool in storage buffers).
    pub fn wgsl(self) -> &'static str {
        match self {
            DType::Bool => "u32",
            _ => self.name(),
        }
    }

    /// Bytes per element in GPU storage: [`DType::size`] (the host's) but for bool, a 4-byte word.
    pub fn storage_size(self) -> usize {
        match self {
            DType::Bool => 4,
            _ => self.size(),
        }
    }

    /// The one check every binding's scalars go through (`full`, `fill`, `arange`, `x OP s`):
    /// an integer tensor takes only whole, finite values in its range, never a silently
    /// truncated, wrapped or NaN-turned-zero one. Floats take anything (out of range rounds to ±inf,
    /// as IEEE 754 does).
    pub fn check_scalar(self, v: f64) -> Result<()> {
        let (lo, hi) = match self {
            DType::F32 | DType::F16 => return Ok(()),
            DType::I32 => (i32::MIN as f64, i32::MAX as f64),
            DType::U32 => (0.0, u32::MAX as f64),
            DType::Bool => (0.0, 1.0),
        };
        if v.is_nan() || v.fract() != 0.0 || v < lo || v > hi {
            return Err(Error::InvalidArgument(format!(
                "scalar {v} is not a {self} value ({})",
                if self == DType::Bool {
                    "0 for false or 1 for true".to_string()
                } else {
                    format!("whole numbers from {lo} to {hi}; cast the tensor to a float dtype for other values")
                }
            )));
        }
        Ok(())
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A host element type that maps to a Kiln dtype.
pub trait Element: bytemuck::Pod + Copy + Send + Sync + 'static {
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}
impl Element for f16 {
    const DTYPE: DType = DType::F16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i32
    }
}
impl Element for u32 {
    const DTYPE: DType = DType::U32;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as u32
    }
}

/// Encodes one f64 value as the little-endian bytes of one element of `dtype`
/// (used for scalar operands and fills).
pub fn scalar_bytes(dtype: DType, v: f64) -> Vec<u8> {
    match dtype {
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F16 => f16::from_f64(v).to_le_bytes().to_vec(),
        DType::I32 => (v as i32).to_le_bytes().to_vec(),
        DType::U32 => (v as u32).to_le_bytes().to_vec(),
        DType::Bool => vec![(v != 0.0) as u8],
    }
}

/// Decodes little-endian bytes of `dtype` into f64 values (for references, printing and checks).
pub fn bytes_to_f64(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        DType::F32 => bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DType::F16 => bytes.chunks_exact(2).map(|c| f16::from_le_bytes(c.try_into().unwrap()).to_f64()).collect(),
        DType::I32 => bytes.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DType::U32 => bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DType::Bool => bytes.iter().map(|&b| (b != 0) as u8 as f64).collect(),
    }
}

/// Host bool bytes (any nonzero byte is true) as the GPU's words, 0 or 1 each (a plain map the
/// compiler vectorises: the conversion costs less than the copy to the GPU).
pub(crate) fn bools_to_words(bytes: &[u8]) -> Vec<u32> {
    bytes.iter().map(|&b| (b != 0) as u32).collect()
}

/// The GPU's bool words as host bytes, 0 or 1 each (a non-zero word, which only an unwritten
/// `empty` tensor can hold, reads as true).
pub(crate) fn words_to_bools(words: &[u32], out: &mut [u8]) {
    for (o, &w) in out.iter_mut().zip(words) {
        *o = (w != 0) as u8;
    }
}

/// Encodes f64 values as little-endian bytes of `dtype` (rounding to the dtype).
pub fn f64_to_bytes(dtype: DType, vals: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(vals.len() * dtype.size());
    for &v in vals {
        out.extend_from_slice(&scalar_bytes(dtype, v));
    }
    out
}

#[cfg(test)]
mod scalar_tests {
    use super::DType;

    #[test]
    fn integer_scalars_must_be_whole_and_in_range() {
        for v in
            [f64::NAN, 1.5, -0.5, 1e30, 2f64.powi(40), f64::INFINITY, f64::NEG_INFINITY, 2147483648.0, -2147483649.0]
        {
            assert!(DType::I32.check_scalar(v).is_err(), "i32 accepted {v}");
        }
        for v in [-5.0, -1.0, 4294967296.0, 0.5, f64::NAN] {
            assert!(DType::U32.check_scalar(v).is_err(), "u32 accepted {v}");
        }
        for v in [0.0, -0.0, -2147483648.0, 2147483647.0, 7.0] {
            DType::I32.check_scalar(v).unwrap();
        }
        for v in [0.0, 4294967295.0] {
            DType::U32.check_scalar(v).unwrap();
        }
        for v in [0.0, 1.0, -0.0] {
            DType::Bool.check_scalar(v).unwrap();
        }
        for v in [2.0, -1.0, 0.5, f64::NAN, f64::INFINITY] {
            assert!(DType::Bool.check_scalar(v).is_err(), "bool accepted {v}");
        }
        for v in [f64::NAN, f64::INFINITY, 1e300, -0.0] {
            DType::F32.check_scalar(v).unwrap();
            DType::F16.check_scalar(v).unwrap();
        }
    }
}

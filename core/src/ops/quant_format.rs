//! The GGUF block formats the quant ops read ([`QuantFormat`]: sizes, names, the WGSL that
//! decodes a block) and what a decode matvec folds into its product ([`QuantFusion`]): shared
//! by `ops::quant` and `ops::quant_matvec_wide` (one module each would import the other).

use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};

const COMMON: &str = include_str!("../../../shaders/quant_common.wgsl");

/// A GGUF block format. Each block holds [`QuantFormat::BLOCK_LEN`] consecutive values of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// 18 bytes: f16 d, 16 bytes of nibbles; x = d * (q - 8).
    Q4_0,
    /// 20 bytes: f16 d, f16 m, 16 bytes of nibbles; x = d * q + m.
    Q4_1,
    /// 34 bytes: f16 d, 32 signed bytes; x = d * q.
    Q8_0,
}

impl QuantFormat {
    pub const ALL: [QuantFormat; 3] = [QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q8_0];
    /// Values per block, for every format.
    pub const BLOCK_LEN: usize = 32;

    /// The lower-case name GGUF tools use: "q4_0", "q4_1", "q8_0".
    pub fn name(self) -> &'static str {
        match self {
            QuantFormat::Q4_0 => "q4_0",
            QuantFormat::Q4_1 => "q4_1",
            QuantFormat::Q8_0 => "q8_0",
        }
    }

    /// The format named `s` (case-insensitive).
    pub fn parse(s: &str) -> Result<QuantFormat> {
        Self::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(s.trim())).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|f| f.name()).collect();
            Error::InvalidArgument(format!("unknown quantized format {s:?}: expected one of {}", names.join(", ")))
        })
    }

    /// Bytes per block: 18, 20, 34.
    pub fn block_bytes(self) -> usize {
        match self {
            QuantFormat::Q4_0 => 18,
            QuantFormat::Q4_1 => 20,
            QuantFormat::Q8_0 => 34,
        }
    }

    /// Bytes of one row of `cols` values; an error unless `cols` is a multiple of 32.
    pub fn row_bytes(self, cols: usize) -> Result<usize> {
        if !cols.is_multiple_of(Self::BLOCK_LEN) {
            return Err(Error::InvalidArgument(format!(
                "{}: a row of {cols} values is not a whole number of {}-value blocks",
                self.name(),
                Self::BLOCK_LEN
            )));
        }
        Ok(cols / Self::BLOCK_LEN * self.block_bytes())
    }

    /// Bytes of a [rows, cols] matrix, overflow-checked.
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> Result<usize> {
        // The message is built only on overflow: every decode matvec checks its W here.
        let row = self.row_bytes(cols)?;
        rows.checked_mul(row)
            .ok_or_else(|| crate::shape::too_large(&format!("a {rows} x {cols} {} matrix", self.name())))
    }

    /// The WGSL that decodes unit `u` of the block at halfword `hb` into `r` (quant_common).
    fn decode_wgsl(self) -> &'static str {
        match self {
            QuantFormat::Q4_0 => {
                "    let d = half_to_f32(half_at(hb));
    let q = word_at(hb + 1u + 2u * u);
    r.a = d * (nibbles(q, 0u) - 8.0);
    r.b = d * (nibbles(q, 4u) - 8.0);
    r.pa = 4u * u;
    r.pb = 16u + 4u * u;"
            }
            QuantFormat::Q4_1 => {
                "    let dm = w[hb >> 1u];
    let d = half_to_f32(dm & 0xffffu);
    let m = half_to_f32(dm >> 16u);
    let q = w[(hb >> 1u) + 1u + u];
    r.a = d * nibbles(q, 0u) + m;
    r.b = d * nibbles(q, 4u) + m;
    r.pa = 4u * u;
    r.pb = 16u + 4u * u;"
            }
            QuantFormat::Q8_0 => {
                "    let d = half_to_f32(half_at(hb));
    r.a = d * sbytes(word_at(hb + 1u + 4u * u));
    r.b = d * sbytes(word_at(hb + 3u + 4u * u));
    r.pa = 8u * u;
    r.pb = 8u * u + 4u;"
            }
        }
    }

    /// quant_common.wgsl for this format.
    pub(crate) fn common_wgsl(self) -> String {
        let block_h = (self.block_bytes() / 2).to_string();
        render(COMMON, &[("BLOCK_H", &block_h), ("DECODE", self.decode_wgsl())])
    }
}

impl std::fmt::Display for QuantFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`quant_matmul_fused`](super::quant::quant_matmul_fused) folds into the product: the norm before a decoder layer's
/// matrices, the SwiGLU after its feed-forward up-projection, the residual after its output
/// projections. Decode runs one dispatch per matrix with them instead of three or four (a token
/// of a 30-layer model is hundreds of tiny dispatches, and each costs the host and the GPU a few
/// µs whatever it computes).
#[derive(Clone, Copy, Debug, Default)]
pub struct QuantFusion<'a> {
    /// RMS-normalise each row of x first: `x * weight / sqrt(mean(x²) + eps)` (as
    /// [`crate::ops::rms_norm`]); the weight is [K], of x's dtype.
    pub rms_norm: Option<(&'a Tensor, f32)>,
    /// W holds 2N rows, gate rows [0, N) then up rows [N, 2N); the result is
    /// `silu(x·gateᵀ) * (x·upᵀ)`, [..., N].
    pub swiglu: bool,
    /// Added to the result (same shape and dtype): `residual + x·Wᵀ`.
    pub residual: Option<&'a Tensor>,
}

//! The GGUF block formats the quant ops read ([`QuantFormat`]: sizes, names, the WGSL that
//! decodes a block) and what a decode matvec folds into its product ([`QuantFusion`]): shared
//! by `ops::quant` and `ops::quant_matvec_wide` (one module each would import the other).

use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Rows of x up to which `quant_matmul` takes the matrix-vector kernel (each x row then costs a
/// pass over W, but W is read in whole coalesced words; past it the tiled kernel's reuse wins).
/// Here, below both `quant` and `quant_coop`, because both choose by it.
pub(crate) const MATVEC_MAX_ROWS: usize = 8;

const COMMON: &str = include_str!("../../../shaders/quant_common.wgsl");

/// A GGUF block format. Each block holds [`QuantFormat::BLOCK_LEN`] consecutive values of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
// ggml's names (Q4_K, not Q4K).
#[allow(non_camel_case_types)]
pub enum QuantFormat {
    /// 18 bytes: f16 d, 16 bytes of nibbles; x = d * (q - 8).
    Q4_0,
    /// 20 bytes: f16 d, f16 m, 16 bytes of nibbles; x = d * q + m.
    Q4_1,
    /// 34 bytes: f16 d, 32 signed bytes; x = d * q.
    Q8_0,
    /// 22 bytes: f16 d, 32 high bits, 16 bytes of nibbles; x = d * (q - 16), q 5 bits.
    Q5_0,
    /// 24 bytes: f16 d, f16 m, 32 high bits, 16 bytes of nibbles; x = d * q + m, q 5 bits.
    Q5_1,
    /// 84 bytes per 256 values: 16 bytes of 4-bit scales and mins (one each per 16 values), 64
    /// bytes of 2-bit codes, f16 d, f16 dmin; x = d * sc * q - dmin * m.
    Q2_K,
    /// 110 bytes per 256 values: 32 bytes of high bits, 64 bytes of low 2 bits, 12 bytes of
    /// 6-bit scales (one per 16 values), f16 d; x = d * (sc - 32) * (q - 4), q 3 bits.
    Q3_K,
    /// A 256-value super-block of 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and
    /// mins (one each per 32 values), 128 bytes of nibbles; x = d * sc * q - dmin * m.
    Q4_K,
    /// 176 bytes per 256 values: Q4_K's fields plus 32 bytes of fifth bits (q 5 bits).
    Q5_K,
    /// 210 bytes per 256 values: 128 bytes of low nibbles, 64 of 2-bit highs, 16 signed 8-bit
    /// scales (one per 16 values), f16 d; x = d * sc * (q - 32), q 6 bits.
    Q6_K,
}

impl QuantFormat {
    pub const ALL: [QuantFormat; 10] = [
        QuantFormat::Q4_0,
        QuantFormat::Q4_1,
        QuantFormat::Q8_0,
        QuantFormat::Q5_0,
        QuantFormat::Q5_1,
        QuantFormat::Q2_K,
        QuantFormat::Q3_K,
        QuantFormat::Q4_K,
        QuantFormat::Q5_K,
        QuantFormat::Q6_K,
    ];
    /// Values per group: the kernels' unit of work along a row (a whole block of the 32-value
    /// formats, an eighth of a K super-block), decoded 8 values at a time.
    pub const BLOCK_LEN: usize = 32;
    /// Values per K-format super-block (ggml's QK_K).
    pub const SUPER_LEN: usize = 256;

    /// Values per block: 32, or 256 for the K formats.
    pub fn block_len(self) -> usize {
        match self {
            QuantFormat::Q2_K | QuantFormat::Q3_K | QuantFormat::Q4_K | QuantFormat::Q5_K | QuantFormat::Q6_K => {
                Self::SUPER_LEN
            }
            _ => Self::BLOCK_LEN,
        }
    }

    /// The lower-case name GGUF tools use: "q4_0", "q4_1", "q8_0".
    pub fn name(self) -> &'static str {
        match self {
            QuantFormat::Q4_0 => "q4_0",
            QuantFormat::Q4_1 => "q4_1",
            QuantFormat::Q8_0 => "q8_0",
            QuantFormat::Q5_0 => "q5_0",
            QuantFormat::Q5_1 => "q5_1",
            QuantFormat::Q2_K => "q2_k",
            QuantFormat::Q3_K => "q3_k",
            QuantFormat::Q4_K => "q4_k",
            QuantFormat::Q5_K => "q5_k",
            QuantFormat::Q6_K => "q6_k",
        }
    }

    /// The format named `s` (case-insensitive).
    pub fn parse(s: &str) -> Result<QuantFormat> {
        Self::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(s.trim())).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|f| f.name()).collect();
            Error::InvalidArgument(format!("unknown quantized format {s:?}: expected one of {}", names.join(", ")))
        })
    }

    /// Bytes per block (of [`QuantFormat::block_len`] values): 18, 20, 34, 22, 24, 84, 110,
    /// 144, 176, 210 (all even: blocks start on 16-bit boundaries).
    pub fn block_bytes(self) -> usize {
        match self {
            QuantFormat::Q4_0 => 18,
            QuantFormat::Q4_1 => 20,
            QuantFormat::Q8_0 => 34,
            QuantFormat::Q5_0 => 22,
            QuantFormat::Q5_1 => 24,
            QuantFormat::Q2_K => 84,
            QuantFormat::Q3_K => 110,
            QuantFormat::Q4_K => 144,
            QuantFormat::Q5_K => 176,
            QuantFormat::Q6_K => 210,
        }
    }

    /// Bytes of one row of `cols` values; an error unless `cols` is a multiple of
    /// [`QuantFormat::block_len`] (32, or 256 for the K formats).
    pub fn row_bytes(self, cols: usize) -> Result<usize> {
        let len = self.block_len();
        if !cols.is_multiple_of(len) {
            return Err(Error::InvalidArgument(format!(
                "{}: a row of {cols} values is not a whole number of {len}-value blocks",
                self.name(),
            )));
        }
        Ok(cols / len * self.block_bytes())
    }

    /// Whether the wide matvec kernel (`ops::quant_matvec_wide`) has this format's decode
    /// (Q4_0, Q4_1, Q8_0; the others take the strided kernel).
    pub(crate) fn has_wide_kernel(self) -> bool {
        matches!(self, QuantFormat::Q4_0 | QuantFormat::Q4_1 | QuantFormat::Q8_0)
    }

    /// Bytes of a [rows, cols] matrix, overflow-checked.
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> Result<usize> {
        // The message is built only on overflow: every decode matvec checks its W here.
        let row = self.row_bytes(cols)?;
        rows.checked_mul(row)
            .ok_or_else(|| crate::shape::too_large(&format!("a {rows} x {cols} {} matrix", self.name())))
    }

    /// The WGSL that decodes unit `u` of group `s` of the block at halfword `hb` into `r`
    /// (quant_common). Each expression has ggml's dequantize_row_* form and order (the K
    /// formats' `d * sc` first, exact in f32 as an f16 times a small integer).
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
            QuantFormat::Q5_0 => {
                "    let d = half_to_f32(half_at(hb));
    let qh = word_at(hb + 1u);
    let q = word_at(hb + 3u + 2u * u);
    r.a = d * (nibbles(q, 0u) + 16.0 * bits4(qh, 4u * u) - 16.0);
    r.b = d * (nibbles(q, 4u) + 16.0 * bits4(qh, 16u + 4u * u) - 16.0);
    r.pa = 4u * u;
    r.pb = 16u + 4u * u;"
            }
            QuantFormat::Q5_1 => {
                "    let dm = w[hb >> 1u];
    let d = half_to_f32(dm & 0xffffu);
    let m = half_to_f32(dm >> 16u);
    let qh = w[(hb >> 1u) + 1u];
    let q = w[(hb >> 1u) + 2u + u];
    r.a = d * (nibbles(q, 0u) + 16.0 * bits4(qh, 4u * u)) + m;
    r.b = d * (nibbles(q, 4u) + 16.0 * bits4(qh, 16u + 4u * u)) + m;
    r.pa = 4u * u;
    r.pb = 16u + 4u * u;"
            }
            QuantFormat::Q2_K => {
                "    let n = s / 4u;
    let sc = byte_at(hb, 8u * n + 2u * (s % 4u) + u / 2u);
    let dl = half_to_f32(half_at(hb + 40u)) * f32(sc & 0xfu);
    let ml = half_to_f32(half_at(hb + 41u)) * f32(sc >> 4u);
    let qs = hb + 8u + 16u * n + 4u * u;
    let sh = 2u * (s % 4u);
    r.a = dl * crumbs(word_at(qs), sh) - ml;
    r.b = dl * crumbs(word_at(qs + 2u), sh) - ml;
    r.pa = 8u * u;
    r.pb = 8u * u + 4u;"
            }
            QuantFormat::Q3_K => {
                "    let n = s / 4u;
    let dl = half_to_f32(half_at(hb + 54u)) * f32(q3_scale(hb, 8u * n + 2u * (s % 4u) + u / 2u));
    let qs = hb + 16u + 16u * n + 4u * u;
    let sh = 2u * (s % 4u);
    let hm = hb + 4u * u;
    r.a = dl * (crumbs(word_at(qs), sh) - 4.0 + 4.0 * byte_bits(word_at(hm), s));
    r.b = dl * (crumbs(word_at(qs + 2u), sh) - 4.0 + 4.0 * byte_bits(word_at(hm + 2u), s));
    r.pa = 8u * u;
    r.pb = 8u * u + 4u;"
            }
            QuantFormat::Q4_K => {
                "    let sm = scale_min_k4(hb, s);
    let d1 = half_to_f32(half_at(hb)) * f32(sm.x);
    let m1 = half_to_f32(half_at(hb + 1u)) * f32(sm.y);
    let qs = hb + 8u + 16u * (s / 2u) + 4u * u;
    let sh = (s % 2u) * 4u;
    r.a = d1 * nibbles(word_at(qs), sh) - m1;
    r.b = d1 * nibbles(word_at(qs + 2u), sh) - m1;
    r.pa = 8u * u;
    r.pb = 8u * u + 4u;"
            }
            QuantFormat::Q5_K => {
                "    let sm = scale_min_k4(hb, s);
    let d1 = half_to_f32(half_at(hb)) * f32(sm.x);
    let m1 = half_to_f32(half_at(hb + 1u)) * f32(sm.y);
    let qs = hb + 24u + 16u * (s / 2u) + 4u * u;
    let qh = hb + 8u + 4u * u;
    let sh = (s % 2u) * 4u;
    r.a = d1 * (nibbles(word_at(qs), sh) + 16.0 * byte_bits(word_at(qh), s)) - m1;
    r.b = d1 * (nibbles(word_at(qs + 2u), sh) + 16.0 * byte_bits(word_at(qh + 2u), s)) - m1;
    r.pa = 8u * u;
    r.pb = 8u * u + 4u;"
            }
            QuantFormat::Q6_K => {
                "    let n = s / 4u;
    let g = s % 4u;
    let d = half_to_f32(half_at(hb + 104u));
    let ds = d * f32(sbyte_at(hb, 192u + 8u * n + 2u * g + u / 2u));
    let ql = hb + 32u * n + 16u * (g % 2u) + 4u * u;
    let qh = hb + 64u + 16u * n + 4u * u;
    let sh = (g / 2u) * 4u;
    r.a = ds * (nibbles(word_at(ql), sh) + 16.0 * crumbs(word_at(qh), 2u * g) - 32.0);
    r.b = ds * (nibbles(word_at(ql + 2u), sh) + 16.0 * crumbs(word_at(qh + 2u), 2u * g) - 32.0);
    r.pa = 8u * u;
    r.pb = 8u * u + 4u;"
            }
        }
    }

    /// Groups of [`QuantFormat::BLOCK_LEN`] values per block: 1, or 8 for the K formats.
    pub(crate) fn groups_per_block(self) -> usize {
        self.block_len() / Self::BLOCK_LEN
    }

    /// quant_common.wgsl for this format.
    pub(crate) fn common_wgsl(self) -> String {
        let block_h = (self.block_bytes() / 2).to_string();
        let gpb = self.groups_per_block().to_string();
        render(COMMON, &[("BLOCK_H", &block_h), ("GPB", &gpb), ("DECODE", self.decode_wgsl())])
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

//! The decode matrix-vector kernels' RoPE-to-cache epilogue (`ops::quant_qkv_rope_to_cache`), shared
//! by the strided kernel (ops/quant.rs) and the wide one (ops/quant_matvec_wide.rs): its
//! operands and parameter words, its plan rule, and its WGSL (`shaders/quant_matvec_rope.wgsl`,
//! with the rotation's `rope_pair` also used by `rope_kv_cache.wgsl`'s kernels in ops/kv_cache.rs).
//! A module of its own so that neither kernel's file depends on the other's or on kv_cache.

use crate::device::Device;
use crate::exec::Params;
use crate::pipeline::render;
use crate::tensor::Tensor;

const MATVEC_ROPE: &str = include_str!("../../../shaders/quant_matvec_rope.wgsl");
/// The rotation angles, shared with `ops::rope` and `ops::rope_qkv_to_cache`.
pub(crate) const ROPE_COMMON: &str = include_str!("../../../shaders/rope_common.wgsl");

/// `rope_pair(pos, i)` for a kernel: with `factors`, the factors' binding at `slot - 1`; and the
/// params' binding, `slot` (ops/quant.rs's matrix-vector epilogue uses it too).
pub(crate) fn rope_pair_source(factors: bool, slot: usize) -> (String, String) {
    let ff = if factors {
        format!(
            "@group(0) @binding({}) var<storage, read> ff: array<f32>;\n\
             fn rope_pair(pos: f32, i: u32) -> vec2<f32> {{ return rope_turn(pos * (rope_freq(i, p.inv_half, p.log2_base) / ff[i])); }}\n",
            slot - 1
        )
    } else {
        "fn rope_pair(pos: f32, i: u32) -> vec2<f32> { return rope_cos_sin(pos, i, p.inv_half, p.log2_base); }\n".into()
    };
    (ff, slot.to_string())
}

/// What a matrix-vector kernel without ROPE gets for the ROPE part's functions.
const ROPE_STUBS: &str =
    "fn rope_row(wgi: u32, slot: u32) -> u32 { return 0u; }\nfn rope_store(n: u32, l: u32, s0: f32, s1: f32) {}\n";

/// The ROPE fields of a matrix-vector kernel's `Params` (after its 8 words).
const ROPE_FIELDS: &str = "    nh: u32,\n    nkv: u32,\n    cap: u32,\n    pos: u32,\n    log2_base: f32,\n    \
     inv_half: f32,\n    half: u32,\n    row0: u32,\n";

/// A matrix-vector kernel's ROPE template values for dtype `t`: its `Params` fields, the ROPE
/// part (`quant_matvec_rope.wgsl` with `rope_pair`, or stubs) and the params' binding slot
/// (5 without ROPE; after the caches, and the frequency factors where bound, with it).
pub(crate) fn rope_part(with_rope: bool, factors: bool, t: &str) -> (String, String, String) {
    if !with_rope {
        return (String::new(), ROPE_STUBS.to_string(), "5".to_string());
    }
    let (pair, slot) = rope_pair_source(factors, 7 + factors as usize);
    (ROPE_FIELDS.to_string(), render(MATVEC_ROPE, &[("T", t), ("ROPE_PAIR", &pair)]), slot)
}

/// The matrix-vector kernel's ROPE epilogue (`ops::quant_qkv_rope_to_cache`, checked there):
/// the stack's rows are `n_heads` query, `n_kv_heads` key and `n_kv_heads` value heads of `2 half`
/// rows; the queries go to `out` [n_heads, M, 2 half], keys and values into the caches
/// [n_kv_heads, cap, 2 half] at rows pos .. pos + M. A dispatch's W holds the stack's rows from
/// `row0` on (whole heads): a stack whose parts differ in format (a Q4_K_M's Q4_K Q and K, Q6_K
/// V) runs one dispatch per part, each storing its own heads.
pub(crate) struct RopeToCache<'a> {
    pub k_cache: &'a Tensor,
    pub v_cache: &'a Tensor,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub half: usize,
    pub cap: usize,
    pub pos: usize,
    pub base: f32,
    /// RoPE frequency factors (f32 [half], checked by the caller), or None.
    pub factors: Option<&'a Tensor>,
    /// The stack row of this dispatch's first W row (a multiple of `2 half`).
    pub row0: usize,
}

impl RopeToCache<'_> {
    /// Appends the ROPE fields (`ROPE_FIELDS`) to a matrix-vector kernel's 8 words; returns
    /// them and the index of the word that holds `pos`.
    pub(crate) fn push_params(&self, params: Params) -> (Params, usize) {
        let params = params.u32(self.n_heads).u32(self.n_kv_heads).u32(self.cap);
        let pos_word = params.len();
        let params = params
            .u32(self.pos)
            .f32((self.base as f64).log2() as f32)
            .f32((1.0 / self.half as f64) as f32)
            .u32(self.half)
            .u32(self.row0);
        (params, pos_word)
    }

    /// Under a decode plan's capture, lets a replay move the rows written on with the position
    /// (`plan.rs`): `pos` + delta, while `m` rows still fit the cache, the same `groups`.
    pub(crate) fn follow_in_plan(&self, device: &Device, pos_word: usize, m: usize, groups: [u32; 3]) {
        if crate::device::capture::capturing(device) {
            let (pos, cap) = (self.pos, self.cap);
            crate::device::capture::follow(
                device,
                Box::new(move |delta, w| {
                    let p = pos.checked_add(delta).filter(|p| p + m <= cap)?;
                    w[pos_word] = p as u32;
                    Some(groups)
                }),
            );
        }
    }
}

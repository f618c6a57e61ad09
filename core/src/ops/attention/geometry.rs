//! The problem's sizes and what every attention kernel shares: the batch part of their
//! parameter blocks, the shared WGSL pieces, the limits more than one path reads, and the score
//! options (soft-cap, window) the flash and split-KV kernels render into their source.

use crate::exec::Params;
use crate::{Error, Result};

/// `batch_offsets`, rendered into every attention kernel after its Params.
pub(super) const ATTENTION_COMMON: &str = include_str!("../../../../shaders/attention_common.wgsl");
/// The parameter block shared by the flash kernels.
pub(super) const FLASH_PARAMS: &str = include_str!("../../../../shaders/flash_params.wgsl");
/// Threads per workgroup of the attention kernel (the shader's WG).
pub(super) const WG: usize = 64;
/// The flash kernels' largest D and Dv: q and the output accumulators live in registers.
pub(super) const FLASH_MAX_D: usize = 256;
/// Split-KV: workgroups to aim for (several per SM on a big GPU).
pub(super) const SPLIT_TARGET_GROUPS: usize = 1024;

/// Optional changes to the scores, for Gemma 2/3's attention; the default changes nothing (the
/// kernels are then exactly those without options: the same source, the same bits).
/// Taken by the flash (one row per thread) and split-KV kernels only: forcing `Fused`,
/// `Matmul` or `FlashCoop` with an option set is InvalidArgument, and Auto avoids them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScoreOptions {
    /// Logit soft-capping: each scaled score s becomes cap * tanh(s / cap) before the mask is
    /// added (Gemma 2's `attn_logit_softcapping`, as llama.cpp applies it). Positive, finite.
    pub softcap: Option<f32>,
    /// Sliding-window attention: a query sees only the last `window` of the keys it would see
    /// without it (under `causal`, keys i - window + 1 ..= i of query i; over a KV cache's
    /// prefix without `causal`, the last `window` of the `len` keys: a decode step's query at
    /// position len - 1 sees positions len - window ..= len - 1, llama.cpp's standard SWA).
    /// At least 1.
    pub window: Option<usize>,
}

impl ScoreOptions {
    pub(super) fn is_off(&self) -> bool {
        self.softcap.is_none() && self.window.is_none()
    }

    /// Their part of a pipeline key (the options are constants of the kernel's source).
    pub(super) fn key(&self) -> String {
        if self.is_off() {
            return String::new();
        }
        format!(":{:?}:{:?}", self.softcap.map(f32::to_bits), self.window)
    }

    /// WGSL replacing score `var` (scaled by `base`: 1, or log2(e) for the base-2 flash kernel)
    /// by its soft-capped value; empty without soft-capping.
    pub(super) fn softcap_wgsl(&self, var: &str, base: f32, indent: &str) -> String {
        match self.softcap {
            None => String::new(),
            Some(cap) => {
                let c = format!("bitcast<f32>({}u)", (cap * base).to_bits());
                format!("{indent}{var} = {c} * k_tanh({var} / {c});\n")
            }
        }
    }

    /// WGSL moving `jbeg` up to the row's window start (keys seen: [0, `nk`)); empty without a
    /// window.
    pub(super) fn window_wgsl(&self, jbeg: &str, nk: &str, indent: &str) -> String {
        match self.window {
            None => String::new(),
            Some(w) => format!("{indent}{jbeg} = max({jbeg}, select(0u, {nk} - {w}u, {nk} > {w}u));\n"),
        }
    }

    pub(super) fn check(&self) -> Result<()> {
        if let Some(c) = self.softcap.filter(|c| !(c.is_finite() && *c > 0.0)) {
            return Err(Error::InvalidArgument(format!("attention: soft-cap {c} must be positive and finite")));
        }
        if let Some(w) = self.window.filter(|&w| w == 0 || w > u32::MAX as usize) {
            return Err(Error::InvalidArgument(format!("attention: window {w} must be 1 to 2^32 - 1 keys")));
        }
        Ok(())
    }
}

/// The problem's sizes, shared by the kernels' parameter blocks.
pub(super) struct Geometry<'a> {
    pub(super) lq: usize,
    /// Keys attended to ...
    pub(super) lk: usize,
    /// ... of the rows K and V hold per batch entry (their batch stride).
    pub(super) kv_rows: usize,
    pub(super) d: usize,
    pub(super) dv: usize,
    pub(super) rows: usize,
    pub(super) causal: bool,
    pub(super) scale: f32,
    /// Soft-cap and window (flash and split-KV only).
    pub(super) opts: ScoreOptions,
    pub(super) batch_shape: &'a [usize],
    pub(super) qb: &'a [usize],
    pub(super) kb: &'a [usize],
    pub(super) vb: &'a [usize],
}

impl Geometry<'_> {
    /// The parameter block of the flash kernels (`nqb` query blocks per batch entry).
    pub(super) fn flash_params(&self, nqb: usize, blocks: usize, mask: Option<&[usize]>) -> Params {
        let (msq, msk) = mask.map_or((0, 0), |s| (s[s.len() - 2], s[s.len() - 1]));
        let params = Params::new()
            .u32(self.lq)
            .u32(self.lk)
            .u32(self.d)
            .u32(self.dv)
            .u32(nqb)
            .u32(blocks)
            .u32(self.causal as u32)
            .f32(self.scale * std::f32::consts::LOG2_E)
            .u32(msq)
            .u32(msk)
            .u32(self.batch_shape.len())
            .u32(0);
        self.batch_params(params, mask)
    }

    /// The batch dimensions and each operand's batch strides (dims8 lists), mask's last.
    pub(super) fn batch_params(&self, params: Params, mask: Option<&[usize]>) -> Params {
        let bs = self.batch_shape;
        let mstride: Vec<usize> = mask.map_or(vec![], |m| m[..m.len() - 2].to_vec());
        params
            .dims8(bs, 1)
            .dims8(&crate::shape::batch_strides(self.qb, bs, self.lq * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.kb, bs, self.kv_rows * self.d), 0)
            .dims8(&crate::shape::batch_strides(self.vb, bs, self.kv_rows * self.dv), 0)
            .dims8(&mstride, 0)
    }
}

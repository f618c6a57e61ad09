//! Which kernel computes attention: the `AttentionPath` a caller names, or Auto's choice by
//! shape, device and mask (measured on the H100/H200, BENCHMARKS.md).

use crate::device::Device;
use crate::{Error, Result};

/// The matmul path holds the f32 score matrix (and its softmax) only up to this size.
pub(super) const SCORES_MAX_BYTES: usize = 1 << 30;
/// ... and is taken only from this many scores on, and for rows at least `MIN_KEYS` long
/// (below, four launches and a workgroup per short row cost more than the fused kernel).
const MIN_SCORES: usize = 1 << 16;
const MIN_KEYS: usize = 64;
/// Auto takes the split-KV path for at most this many queries per batch entry.
const DECODE_MAX_LQ: usize = 4;

/// Which kernel computes attention. `Auto` picks by shape (measured on the H200, see
/// BENCHMARKS.md); the others force one, for tests and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionPath {
    Auto,
    /// Tiled flash kernel (`shaders/flash_attention.wgsl`): BR query rows per workgroup, K/V
    /// tiles in workgroup memory, online softmax. D and Dv up to `FLASH_MAX_D`.
    Flash,
    /// The flash kernel for f16 on cooperative matrices (`shaders/flash_attention_coop.wgsl`):
    /// where the device has them, D and Dv multiples of 16 up to `FLASH_MAX_D`
    /// ([`uses_flash_coop`](super::uses_flash_coop)).
    FlashCoop,
    /// f16 flash attention on the native tier (shaders/native/attention_f16_cm2.comp, NV
    /// cooperative matrix 2): where the device has it and a variant has the head sizes
    /// ([`uses_attention_native`](super::uses_attention_native)); a mask contiguous along the
    /// keys with 16-byte strides; no score options.
    Native,
    /// Split over the key length with a combine pass (`shaders/flash_attention_split.wgsl`):
    /// for few queries against many keys (decode). Any D and Dv.
    SplitKv,
    /// One workgroup per query row (`shaders/attention.wgsl`); no mask.
    Fused,
    /// q kᵀ, a softmax, p v through the matmul kernels; no mask, score matrix under 1 GiB.
    Matmul,
}

/// What the choice looks at besides the caller's path.
pub(super) struct Problem<'a> {
    pub(super) device: &'a Device,
    pub(super) lq: usize,
    /// Keys attended to.
    pub(super) lk: usize,
    pub(super) d: usize,
    pub(super) dv: usize,
    /// Query rows times keys: the matmul path's score matrix.
    pub(super) scores: usize,
    /// An additive mask is given.
    pub(super) masked: bool,
    /// K and V are read up to a prefix of their rows (a KV cache).
    pub(super) prefix: bool,
    /// The score matrix fits the matmul path ([`matmul_fits`]).
    pub(super) matmul_fits: bool,
    /// The flash kernel takes these head sizes on this device (a K/V tile fits).
    pub(super) flash_fits: bool,
    /// The cooperative-matrix flash kernel takes them.
    pub(super) coop_fits: bool,
    /// The native-tier kernel takes them (f16, a variant with these head sizes, a mask it reads).
    pub(super) native_fits: bool,
    /// A soft-cap or window is set ([`ScoreOptions`](super::ScoreOptions)).
    pub(super) scored: bool,
}

/// Whether `scores` f32 scores fit the matmul path on `device`.
pub(super) fn matmul_fits(device: &Device, scores: usize) -> bool {
    scores * 4 <= SCORES_MAX_BYTES.min(device.max_tensor_bytes() as usize)
}

/// The path that runs: Auto resolved by shape, and a path that cannot walk the keys on this CPU
/// adapter replaced (Auto) or refused (named by the caller). The kernels' own limits (head
/// sizes, mask, prefix) are checked where they run.
pub(super) fn choose(path: AttentionPath, p: &Problem) -> Result<AttentionPath> {
    let Problem {
        device,
        lq,
        lk,
        d,
        dv,
        scores,
        masked,
        prefix,
        matmul_fits,
        flash_fits,
        coop_fits,
        native_fits,
        scored,
    } = *p;
    // Measured on the H100 (BENCHMARKS.md): flash beats the matmul path at D = 64 (8.25 vs 7.77
    // TFLOP/s) but not at D = 128 (3.2 vs 10.6: q and the accumulators no longer fit in
    // registers), where it still beats the per-row kernel for scores too big for the matmuls.
    let auto = path == AttentionPath::Auto;
    let path = match path {
        AttentionPath::Auto if lq <= DECODE_MAX_LQ => AttentionPath::SplitKv,
        // A KV cache's prefix (a decoder's prefill) on a CPU adapter: split-KV, not flash.
        // SwiftShader (Chromium's adapter) runs the flash kernels with its memory growing
        // without bound (natively through its Vulkan ICD too: > 3 GB within a minute on
        // SmolLM2's prefill and on the flash tests), until Chromium's GPU process dies and
        // the page's device is lost. Split-KV runs there; on a CPU the flash kernel's
        // workgroup tiling buys nothing anyway.
        AttentionPath::Auto if prefix && device.info().device_type == "Cpu" => AttentionPath::SplitKv,
        // The native tier has no score options (the next step takes those); `native_fits`
        // already says whether it reads this mask.
        AttentionPath::Auto if native_fits && !scored => AttentionPath::Native,
        AttentionPath::Auto if coop_fits => AttentionPath::FlashCoop,
        // A prefix of K and V is read in place only by the kernels that take batch strides.
        AttentionPath::Auto if prefix && flash_fits => AttentionPath::Flash,
        AttentionPath::Auto if prefix => AttentionPath::SplitKv,
        AttentionPath::Auto if flash_fits && d <= 64 && dv <= 64 => AttentionPath::Flash,
        AttentionPath::Auto if masked && flash_fits => AttentionPath::Flash,
        AttentionPath::Auto if masked => AttentionPath::SplitKv,
        AttentionPath::Auto if lk >= MIN_KEYS && scores >= MIN_SCORES && matmul_fits => AttentionPath::Matmul,
        AttentionPath::Auto if flash_fits && !matmul_fits => AttentionPath::Flash,
        AttentionPath::Auto => AttentionPath::Fused,
        p => p,
    };
    // Score options live in the one-row flash and split-KV kernels only.
    let path = match path {
        AttentionPath::Fused | AttentionPath::Matmul | AttentionPath::FlashCoop | AttentionPath::Native if scored => {
            if !auto {
                return Err(Error::InvalidArgument(format!(
                    "attention: the {path:?} path takes no soft-cap or window (Flash and SplitKv do)"
                )));
            }
            if flash_fits && !(prefix && device.info().device_type == "Cpu") {
                AttentionPath::Flash
            } else {
                AttentionPath::SplitKv
            }
        }
        p => p,
    };
    // The flash and per-row kernels walk every key in one invocation: past llvmpipe's loop
    // limiter (core/src/loop_budget.rs) they would stop early without an error, so where Auto
    // chose them a CPU adapter takes split-KV, whose splits are bounded there
    // (`split_keys_cap`), and where a caller chose them it is told.
    let path = match path {
        AttentionPath::Flash | AttentionPath::Fused
            if !crate::loop_budget::fits(device, one_invocation_passes(path, lk, d, dv)) =>
        {
            if !auto {
                return Err(Error::InvalidArgument(format!(
                    "attention: the {path:?} kernel cannot walk {lk} keys (D {d}, Dv {dv}) in one invocation on \
                     this CPU adapter (llvmpipe's loop limiter); Auto and SplitKv can"
                )));
            }
            AttentionPath::SplitKv
        }
        p => p,
    };
    Ok(path)
}

/// Loop passes one invocation of the flash (`Flash`) or per-row (`Fused`) kernel makes over `lk`
/// keys, for core/src/loop_budget.rs: measured on lavapipe (8 queries; the first wrong result
/// at): Flash 63062 keys at D 4, 64463 at D 64 (a pass a key); Fused 54793 at D 4, 29197 at
/// D 64 (~290 + 4.5 D a step of 256 keys). Over-counted here, to stay on the safe side.
fn one_invocation_passes(path: AttentionPath, lk: usize, d: usize, dv: usize) -> u64 {
    let (lk, d, dv) = (lk as u64, d as u64, dv as u64);
    match path {
        AttentionPath::Flash => lk + lk / 8 + 1024,
        _ => (lk / 256 + 1) * (300 + 5 * (d + dv)),
    }
}

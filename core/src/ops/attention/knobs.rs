//! The measurement and tuning knobs of the attention paths (`KILN_FLASH_*`, `KILN_ATTN_*` for
//! the cooperative-matrix flash kernel, `KILN_DECODE_*`; README.md's settings table) and the
//! `with_*` switches tests and `kiln bench` turn on one thread: every variable those paths read
//! is read here, once, on first use, and nowhere else. Unset, each accessor gives the production
//! choice, so the paths' own modules hold no environment reads, and the timing-only variants
//! (`KILN_FLASH_PART`, `KILN_DECODE_PART`: results wrong) are named in this module alone. Not a
//! cargo feature: README.md documents them as runtime settings of every build, and
//! `KILN_DECODE_FUSE=0` is also the way around a driver that breaks the one-pass merge.

thread_local! {
    /// `with_flash_blocking`'s choice for this thread (None: the default, blocked where it fits).
    static FLASH_BLOCKING: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with the flash path's register-blocked kernel allowed (`true`, the default) or not
/// (the one-row-per-thread kernel) on this thread: tests and `kiln bench` compare the two.
#[doc(hidden)]
pub fn with_flash_blocking<R>(blocked: bool, f: impl FnOnce() -> R) -> R {
    let before = FLASH_BLOCKING.with(|c| c.replace(Some(blocked)));
    let r = f();
    FLASH_BLOCKING.with(|c| c.set(before));
    r
}

/// Whether the blocked kernel issues the next tile's loads before this tile's arithmetic
/// (`KILN_FLASH_PREFETCH=1`; measured on the H100 at 8x8x1024x64 / 4x16x4096x64 causal: 8.33 /
/// 10.10 TFLOP/s against 8.80 / 10.70 without: its 32 registers cost more than the latency
/// they hide, as in the matmul).
pub(super) fn flash_prefetch() -> bool {
    static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| std::env::var("KILN_FLASH_PREFETCH").is_ok_and(|v| v == "1"))
}

/// Which exp2 the flash kernels' softmax uses (`KILN_FLASH_EXP2`, for measurement). Measured on
/// the H100 at 8x8x1024x64 / 4x16x4096x64 causal (blocked kernel): softmax 13.6 / 15.8 TFLOP/s
/// (13.9 / 16.3 before its two k_keep), special 9.5 / 10.8, builtin 14.5 / 17.2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum FlashExp2 {
    /// `shaders/flash_exp2.wgsl`: builtin-free, for the softmax's range only (the default).
    Softmax,
    /// `special`: the shared builtin-free `k_exp2`, every input to a few ULP (the cost before).
    Special,
    /// `builtin`: WGSL's `exp2`, whose precision WGSL leaves to the device, so its bits differ
    /// between backends: only to measure what the builtin-free exp2 costs.
    Builtin,
}

pub(super) fn flash_exp2_kind() -> FlashExp2 {
    static ENV: std::sync::OnceLock<FlashExp2> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| match std::env::var("KILN_FLASH_EXP2").as_deref() {
        Ok("special") => FlashExp2::Special,
        Ok("builtin") => FlashExp2::Builtin,
        _ => FlashExp2::Softmax,
    })
}

/// Whether the blocked kernel skips the accumulators' rescale where no row of the thread has a
/// new maximum in this tile (`KILN_FLASH_SKIP_RESCALE=1`; the same bits: the factor is exactly 1
/// there). Measured on the H100 at 8x8x1024x64 / 4x16x4096x64 causal: 13.7 / 16.0 TFLOP/s against
/// 14.0 / 16.4 without (twice, an earlier flash_exp2), then 13.67 / 15.93 against 13.56 / 15.82
/// (the final one): within noise either way. A warp holds 16 rows, so some row still grows in
/// most tiles.
pub(super) fn flash_skip_rescale() -> bool {
    static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| std::env::var("KILN_FLASH_SKIP_RESCALE").is_ok_and(|v| v == "1"))
}

/// Timing-only variants of the register-blocked kernel that drop a part of it (results are
/// wrong): `KILN_FLASH_PART=nored` (each thread's own row maxima instead of the round trip
/// through `red` and its barrier), `nos` (no Q K^T products), `noexp` (p = s - m, no exp2),
/// `nopv` (no P V products). Splits the kernel's time the way `KILN_COOP_PART` splits the f16
/// matmul's (BENCHMARKS.md item 40).
pub(super) fn flash_part() -> &'static str {
    static P: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    P.get_or_init(|| std::env::var("KILN_FLASH_PART").unwrap_or_default())
}

/// `src` with the part `part` names cut out (unchanged for "" or an unknown name).
pub(super) fn timing_part(src: String, part: &str) -> String {
    match part {
        "nored" => match (src.find("        red[rr + half][lane] = max4(s0);"), src.find("        m = mn;")) {
            (Some(a), Some(b)) if a < b => {
                let rescale_at = src[a..b].find("        let alpha").map_or(b, |r| a + r);
                format!(
                    "{}        let mn = max(m, vec4<f32>(max4(s0), max4(s1), max4(s2), max4(s3)));\n{}",
                    &src[..a],
                    &src[rescale_at..]
                )
            }
            _ => src,
        },
        "nos" => src.replacen("for (var d = 0u; d < DP * 4u; d += 4u) {", "for (var d = 0u; d < 0u; d += 4u) {", 1),
        "noexp" => src.replace("= flash_exp2_4(s", "= (s"),
        "nopv" => src.replacen("for (var j = 0u; j < jfull; j++) {", "for (var j = 0u; j < 0u; j++) {", 1).replacen(
            "for (var j = jfull; j < jmax; j++) {",
            "for (var j = jfull; j < jfull; j++) {",
            1,
        ),
        _ => src,
    }
}

pub(super) fn flash_blocking_wanted() -> bool {
    static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    FLASH_BLOCKING
        .with(|c| c.get())
        .unwrap_or_else(|| *ENV.get_or_init(|| std::env::var("KILN_FLASH_BLOCKED").map_or(true, |v| v != "0")))
}

/// The split-KV path's tuning and timing knobs, read once.
pub(super) struct DecodeKnobs {
    /// `KILN_DECODE_CHUNK=N`: keys per split.
    pub(super) chunk: Option<usize>,
    /// `KILN_DECODE_KLOAD=row|block`: the vec4 kernel reads each key's K row in its own thread,
    /// or the step's rows as one block (default: block for f32, row for f16).
    pub(super) block_loads: Option<bool>,
    /// `KILN_DECODE_HOIST=0`: the vec4 kernel's loads stay inside their bounds checks.
    pub(super) hoist: bool,
    /// `KILN_DECODE_PART=nocombine|serialcombine|parallelcombine`: the two-pass vec4 path
    /// without its combine pass (results are wrong; for splitting the time only), or with the
    /// given merge.
    pub(super) part: String,
    /// `KILN_DECODE_FUSE=0`: the vec4 kernel's splits merged by a second dispatch (the two-pass
    /// path) rather than by the last workgroup of each row, and RoPE with the cache write as a
    /// dispatch of its own rather than the QKV matvec's epilogue (`ops::kv_cache`): a decoder
    /// layer's 7 dispatches of before, for A/B timing.
    pub(super) fuse: bool,
}

thread_local! {
    /// `with_decode_fusion`'s choice for this thread (None: `KILN_DECODE_FUSE`).
    static DECODE_FUSION: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Whether decode's fusions are on: `with_decode_fusion`'s choice on this thread, else
/// `KILN_DECODE_FUSE` (read once; on unless 0).
pub(crate) fn decode_fusion() -> bool {
    DECODE_FUSION.with(|c| c.get()).unwrap_or(decode_knobs().fuse)
}

/// Runs `f` with decode's fusions on or off on this thread, whatever `KILN_DECODE_FUSE` says:
/// tests hold the fused kernels to the unfused ones in one process.
#[doc(hidden)]
pub fn with_decode_fusion<R>(on: bool, f: impl FnOnce() -> R) -> R {
    let before = DECODE_FUSION.with(|c| c.replace(Some(on)));
    let r = f();
    DECODE_FUSION.with(|c| c.set(before));
    r
}

pub(super) fn decode_knobs() -> &'static DecodeKnobs {
    static K: std::sync::OnceLock<DecodeKnobs> = std::sync::OnceLock::new();
    K.get_or_init(|| DecodeKnobs {
        chunk: Some(crate::env::env_or("KILN_DECODE_CHUNK", 0usize)).filter(|&c| c > 0),
        block_loads: match crate::env::env_or("KILN_DECODE_KLOAD", String::new()).as_str() {
            "row" => Some(false),
            "block" => Some(true),
            _ => None,
        },
        hoist: crate::env::env_or("KILN_DECODE_HOIST", 1u32) != 0,
        part: crate::env::env_or("KILN_DECODE_PART", String::new()),
        fuse: crate::env::env_or("KILN_DECODE_FUSE", 1u32) != 0,
    })
}

/// `KILN_ATTN_NSG=2|4|8|16`: the cooperative-matrix flash kernel's subgroups per workgroup to
/// try first (None: its own order, `coop::nsg_choices`).
pub(super) fn attn_nsg() -> Option<usize> {
    static N: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *N.get_or_init(|| match std::env::var("KILN_ATTN_NSG").ok().and_then(|v| v.parse().ok()) {
        Some(n @ (2 | 4 | 8 | 16)) => Some(n),
        _ => None,
    })
}

/// `KILN_ATTN_VEC=0|1`: the cooperative-matrix flash kernel's tile layout forced (None: by
/// head size, `coop::vec_layout`).
pub(super) fn attn_vec() -> Option<bool> {
    static V: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var("KILN_ATTN_VEC").ok().map(|v| v != "0"))
}

/// `KILN_ATTN_HALVES=0`: the cooperative-matrix flash kernel's 64-key tiles in two halves off
/// (`coop::halves_wanted`; on by default).
pub(super) fn attn_halves() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var("KILN_ATTN_HALVES").map(|v| v != "0").unwrap_or(true))
}

/// `KILN_ATTN_NATIVE=d64s|d64|d64y|d128` forces one variant of the native f16 attention kernel
/// (shaders/native/attention_f16_cm2.comp; where the device can run it and the head sizes
/// match), `0` turns the kernel off (the WGSL tier runs); unset, the variant the choice picks.
pub(super) fn attn_native() -> Option<&'static str> {
    static ENV: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| std::env::var("KILN_ATTN_NATIVE").ok().map(|v| v.trim().to_string())).as_deref()
}

//! llvmpipe's loop limiter, and how kernels whose loops grow with an input dimension stay under
//! it.
//!
//! lavapipe (Mesa 22.3's llvmpipe, gallivm `lp_bld_ir_common.c`) gives each shader invocation
//! ONE counter, `LP_MAX_TGSI_LOOP_ITERATIONS` = 65535, shared by every loop of the shader and
//! never reset: every pass through any loop's end decrements it (a loop of n iterations makes
//! n + 1 passes: gallivm runs a SIMD vector of invocations under masks and leaves a loop only at
//! its end, once every lane has broken out), and once it reaches 0 the loop being run stops
//! and every later loop makes one pass per entry, without an error. So nested loops with short
//! inner trip counts do not help: what must stay under 65535 is the invocation's TOTAL of loop
//! passes. (A 1 x K by K x 1 matmul on the one-thread tiling makes 196 passes per 32-long k step
//! with vec4 loads of A, 292 without; it summed the first 334 x 32 + 1 = 10689 and 224 x 32 + 1
//! = 7169 terms.) Kernels exposed to it split their long loop over several dispatches on CPU
//! adapters (each dispatch's invocations start with a fresh counter), in the same order, so
//! results keep their bits; GPUs run one dispatch as before.

use crate::device::Device;

/// The loop passes one invocation may make before llvmpipe's limiter stops its loops.
const PASSES: u64 = 65535;

/// Passes kept in reserve for a kernel's short fixed loops (index decoding over at most 8
/// dimensions, prologue and epilogue loops): a kernel with more states them in `fixed`.
const RESERVE: u64 = 64;

/// Whether `device` may have llvmpipe's loop limiter: every CPU adapter is treated as lavapipe
/// (splitting a loop over dispatches costs a CPU little and changes no result).
pub(crate) fn limited(device: &Device) -> bool {
    device.info().device_type == "Cpu"
}

/// How many steps of a loop one dispatch may run on `device`, for a kernel whose invocation
/// makes `per_step` loop passes per step of its long loop (the long loop's own pass included)
/// and `fixed` passes outside it: `None` where there is no limiter (one dispatch, any length).
pub(crate) fn steps_per_dispatch(device: &Device, per_step: u64, fixed: u64) -> Option<u64> {
    if !limited(device) {
        return None;
    }
    // The long loop's exit makes one more pass.
    Some((PASSES.saturating_sub(RESERVE + fixed + 1) / per_step.max(1)).max(1))
}

/// Whether an invocation that makes `passes` loop passes in all runs to its end on `device`.
pub(crate) fn fits(device: &Device, passes: u64) -> bool {
    !limited(device) || passes + RESERVE <= PASSES
}

/// Passes of a loop `for (var i = start; i < tasks; i += stride)` in the invocation that runs
/// the most iterations (start 0): its iterations plus the exit pass.
pub(crate) fn strided_passes(tasks: u64, stride: u64) -> u64 {
    tasks.div_ceil(stride.max(1)) + 1
}

/// The half-open chunks [begin, end) of `0..len` in steps of `step` that one dispatch each may
/// run (`max_steps` steps of `step` each; one chunk where `max_steps` is `None`). `len` = 0
/// gives one empty chunk (the kernel still runs once, to write its zeros or bias).
pub(crate) fn chunks(len: usize, step: usize, max_steps: Option<u64>) -> Vec<(usize, usize)> {
    let Some(max) = max_steps else { return vec![(0, len)] };
    let span = (max as usize).saturating_mul(step.max(1));
    let mut out = vec![];
    let mut begin = 0usize;
    loop {
        let end = len.min(begin.saturating_add(span));
        out.push((begin, end));
        if end >= len {
            return out;
        }
        begin = end;
    }
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn chunks_cover_in_whole_steps() {
        assert_eq!(chunks(100, 32, None), vec![(0, 100)]);
        assert_eq!(chunks(0, 32, Some(2)), vec![(0, 0)]);
        assert_eq!(chunks(64, 32, Some(2)), vec![(0, 64)]);
        assert_eq!(chunks(65, 32, Some(2)), vec![(0, 64), (64, 65)]);
        assert_eq!(chunks(200, 32, Some(2)), vec![(0, 64), (64, 128), (128, 192), (192, 200)]);
    }
}

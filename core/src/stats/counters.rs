//! The runtime's own counters, kept where the work happens: per op (one `OpStats` per kernel
//! family, found once when its pipeline is compiled and held by the pipeline, so a dispatch
//! touches a few relaxed atomics and never looks anything up or allocates), per error code, and
//! one histogram of the bytes each dispatch binds. `gather` turns them into metric families.

// In the page only the counting half is used (no exporter there).
#![cfg_attr(target_arch = "wasm32", allow(dead_code))]

use crate::error::{Error, ErrorCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Upper bounds of the GPU-time histogram, seconds: ×4 from 1 µs to ~4 s.
pub(crate) const GPU_SECONDS_BOUNDS: [f64; 12] =
    [1e-6, 4e-6, 1.6e-5, 6.4e-5, 2.56e-4, 1.024e-3, 4.096e-3, 1.6384e-2, 6.5536e-2, 0.262144, 1.048576, 4.194304];

/// Upper bounds of the bound-bytes histogram: ×4 from 1 KiB to 4 GiB (2^10, 2^12, ... 2^32).
pub(crate) const BYTES_BOUNDS_LOG2: [u32; 12] = [10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32];

/// A histogram of fixed buckets in atomics (the last slot is +Inf).
pub(crate) struct AtomicHistogram<const N: usize> {
    pub(crate) buckets: [AtomicU64; N],
    pub(crate) count: AtomicU64,
    /// In the unit of the observations (nanoseconds, bytes); scaled at export.
    pub(crate) sum: AtomicU64,
}

impl<const N: usize> Default for AtomicHistogram<N> {
    fn default() -> Self {
        AtomicHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }
}

impl<const N: usize> AtomicHistogram<N> {
    fn observe(&self, bucket: usize, value: u64) {
        self.buckets[bucket.min(N - 1)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Per-bucket counts (not cumulative), count, sum.
    pub(crate) fn snapshot(&self) -> ([u64; N], u64, u64) {
        let b = std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed));
        (b, self.count.load(Ordering::Relaxed), self.sum.load(Ordering::Relaxed))
    }
}

/// Counters of one op (a kernel family, see `op_name`).
pub(crate) struct OpStats {
    pub(crate) name: Box<str>,
    pub(crate) dispatches: AtomicU64,
    pub(crate) operations: AtomicU64,
    pub(crate) bound_bytes: AtomicU64,
    /// GPU time of the passes that were timed (profiling, or a session with a GPU budget).
    pub(crate) gpu: AtomicHistogram<13>,
}

impl OpStats {
    /// Counts one recorded dispatch. Relaxed atomics only: the dispatch path's whole cost here.
    pub(crate) fn record_dispatch(&self, operations: u64, bound_bytes: u64) {
        if !ENABLED.load(Ordering::Relaxed) {
            return;
        }
        self.dispatches.fetch_add(1, Ordering::Relaxed);
        self.operations.fetch_add(operations, Ordering::Relaxed);
        self.bound_bytes.fetch_add(bound_bytes, Ordering::Relaxed);
        let bits = 64 - bound_bytes.saturating_sub(1).leading_zeros();
        DISPATCH_BYTES.observe((bits.saturating_sub(10) as usize).div_ceil(2), bound_bytes);
    }

    pub(crate) fn record_gpu_ns(&self, ns: u64) {
        let s = ns as f64 * 1e-9;
        let bucket = GPU_SECONDS_BOUNDS.iter().position(|&b| s <= b).unwrap_or(GPU_SECONDS_BOUNDS.len());
        self.gpu.observe(bucket, ns);
    }
}

static OPS: Mutex<Vec<Arc<OpStats>>> = Mutex::new(Vec::new());
static ERRORS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
pub(crate) static DISPATCH_BYTES: std::sync::LazyLock<AtomicHistogram<13>> =
    std::sync::LazyLock::new(AtomicHistogram::default);
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the per-dispatch counters off or on (process-wide). Only for measuring what they cost
/// (the overhead benchmark); the exported figures are wrong while they are off.
#[doc(hidden)]
pub fn set_dispatch_counters(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// The counters of op `name` (created on first use; `pipeline::op_label` names a pipeline's op).
pub(crate) fn op_stats(name: &str) -> Arc<OpStats> {
    let mut ops = OPS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(o) = ops.iter().find(|o| *o.name == *name) {
        return o.clone();
    }
    let o = Arc::new(OpStats {
        name: name.into(),
        dispatches: AtomicU64::new(0),
        operations: AtomicU64::new(0),
        bound_bytes: AtomicU64::new(0),
        gpu: AtomicHistogram::default(),
    });
    ops.push(o.clone());
    o
}

/// Every op that has compiled a pipeline so far.
pub(crate) fn all_ops() -> Vec<Arc<OpStats>> {
    OPS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Counts an error produced on one of the runtime's paths (dispatch, allocation, reads and
/// waits, sessions). Returns it, for `map_err(count_error)`.
pub(crate) fn count_error(e: Error) -> Error {
    let code = e.code() as usize;
    ERRORS[code.min(ERRORS.len() - 1)].fetch_add(1, Ordering::Relaxed);
    e
}

/// Errors counted so far, per code.
pub fn errors_by_code() -> Vec<(ErrorCode, u64)> {
    ErrorCode::ALL
        .iter()
        .filter(|c| **c != ErrorCode::Ok)
        .map(|&c| (c, ERRORS[(c as usize).min(ERRORS.len() - 1)].load(Ordering::Relaxed)))
        .collect()
}

//! Metrics and profiles over the C ABI: the runtime's metrics as Prometheus text, and per-op
//! GPU-time profiles (docs/DESIGN.md, "Metrics and profiling"). Strings handed out are owned by
//! the caller and released with kiln_string_free; a profile's rows with kiln_profile_rows_free.

use crate::boundary::{call, out_ptr};
use crate::types::KilnStatus;
use kiln_core::profile::{self, Clock};
use kiln_core::Error;
use std::ffi::CString;
use std::os::raw::c_char;

/// KilnProfileSummary.clock: GPU timestamps at each op's pass.
pub const KILN_CLOCK_GPU_TIMESTAMPS: u32 = 0;
/// KilnProfileSummary.clock: the adapter has no timestamp queries; host wall clock of each op
/// submitted and waited for alone (includes submit and wait overhead).
pub const KILN_CLOCK_WALL: u32 = 1;

/// Longest op name a KilnProfileRow holds, with its NUL (longer ones are cut; Kiln's op names
/// are far shorter).
pub const KILN_PROFILE_OP_LEN: usize = 64;

/// One op's line of a profile.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KilnProfileRow {
    /// The op (kernel family, e.g. "matmul", "elementwise:add", "user_kernel"), NUL-terminated.
    pub op: [c_char; 64],
    /// Dispatches of the op while the profile ran.
    pub calls: u64,
    /// Of those, how many were timed.
    pub timed: u64,
    pub total_s: f64,
    pub mean_s: f64,
    /// Part of the profile's total, 0..1.
    pub share: f64,
}

/// kiln_profile_stop's totals.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct KilnProfileSummary {
    /// Rows written to `*rows`.
    pub n_rows: usize,
    /// KILN_CLOCK_GPU_TIMESTAMPS or KILN_CLOCK_WALL.
    pub clock: u32,
    /// The rows' total time, seconds.
    pub total_s: f64,
    /// Host wall clock from kiln_profile_start to kiln_profile_stop, seconds.
    pub wall_s: f64,
}

fn c_string(s: String) -> *mut c_char {
    // Kiln's texts have no NUL; one would only be replaced, never fail the call.
    let s = s.replace('\0', " ");
    CString::new(s).map(CString::into_raw).unwrap_or(std::ptr::null_mut())
}

fn row_of(r: &kiln_core::ProfileRow) -> KilnProfileRow {
    let mut op = [0 as c_char; KILN_PROFILE_OP_LEN];
    for (d, b) in op.iter_mut().zip(r.op.bytes().take(KILN_PROFILE_OP_LEN - 1)) {
        *d = b as c_char;
    }
    KilnProfileRow { op, calls: r.calls, timed: r.timed, total_s: r.total_s, mean_s: r.mean_s, share: r.share }
}

/// Writes the runtime's metrics in Prometheus' text format (version 0.0.4) to `*out`, a new
/// NUL-terminated string the caller releases with kiln_string_free. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_metrics_text(out: *mut *mut c_char) -> KilnStatus {
    call("kiln_metrics_text", || {
        let out = out_ptr(out, "out")?;
        *out = std::ptr::null_mut();
        *out = c_string(kiln_core::metrics::prometheus_text());
        if out.is_null() {
            return Err(Error::Internal("the metrics text could not be allocated".into()));
        }
        Ok(())
    })
}

/// Releases a string Kiln handed out (kiln_metrics_text). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn kiln_string_free(s: *mut c_char) -> KilnStatus {
    call("kiln_string_free", || {
        if !s.is_null() {
            drop(CString::from_raw(s));
        }
        Ok(())
    })
}

/// Starts a per-op GPU-time profile of every dispatch in the process (one at a time:
/// KILN_ERR_INVALID_ARGUMENT while one runs). Each dispatch gets a compute pass of its own while
/// it runs, so profiled work is slower.
#[no_mangle]
pub extern "C" fn kiln_profile_start() -> KilnStatus {
    call("kiln_profile_start", profile::start)
}

/// Stops the profile (waits for the GPU): writes the totals to `*summary`, a new array of
/// `summary->n_rows` rows (most time first) to `*rows` (release with kiln_profile_rows_free; NULL
/// when there are none) and, when `text` is not NULL, the aligned table as a new string to
/// `*text` (release with kiln_string_free). KILN_ERR_INVALID_ARGUMENT when no profile runs;
/// on failure `*rows` and `*text` are NULL.
#[no_mangle]
pub unsafe extern "C" fn kiln_profile_stop(
    summary: *mut KilnProfileSummary,
    rows: *mut *mut KilnProfileRow,
    text: *mut *mut c_char,
) -> KilnStatus {
    call("kiln_profile_stop", || {
        let summary = out_ptr(summary, "summary")?;
        let rows = out_ptr(rows, "rows")?;
        *summary = KilnProfileSummary::default();
        *rows = std::ptr::null_mut();
        if !text.is_null() {
            *text = std::ptr::null_mut();
        }
        let p = profile::stop()?;
        let table: Box<[KilnProfileRow]> = p.rows.iter().map(row_of).collect();
        *summary = KilnProfileSummary {
            n_rows: table.len(),
            clock: match p.clock {
                Clock::GpuTimestamps => KILN_CLOCK_GPU_TIMESTAMPS,
                Clock::WallClock => KILN_CLOCK_WALL,
            },
            total_s: p.total_s,
            wall_s: p.wall_s,
        };
        if !table.is_empty() {
            *rows = Box::into_raw(table) as *mut KilnProfileRow;
        }
        if !text.is_null() {
            *text = c_string(p.to_string());
        }
        Ok(())
    })
}

/// Releases the `n_rows` rows kiln_profile_stop wrote (n_rows as it said). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn kiln_profile_rows_free(rows: *mut KilnProfileRow, n_rows: usize) -> KilnStatus {
    call("kiln_profile_rows_free", || {
        if !rows.is_null() {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(rows, n_rows)));
        }
        Ok(())
    })
}

//! Metrics and profiles over the C ABI: the runtime's metrics as Prometheus text, and per-op
//! GPU-time profiles (docs/DESIGN.md, "Metrics and profiling"). Strings handed out are owned by
//! the caller and released with kiln_string_free; a profile's result with
//! kiln_profile_result_free.

use crate::boundary::{call, out_ptr};
use crate::types::KilnStatus;
use kiln_core::profile::{self, Clock, Profile};
use kiln_core::{Error, Result};
use std::ffi::CString;
use std::os::raw::c_char;

/// KilnProfileResult.clock: GPU timestamps at each op's pass.
pub const KILN_CLOCK_GPU_TIMESTAMPS: u32 = 0;
/// KilnProfileResult.clock: the adapter has no timestamp queries; host wall clock of each op
/// submitted and waited for alone (includes submit and wait overhead).
pub const KILN_CLOCK_WALL: u32 = 1;

/// One op's line of a profile.
#[repr(C)]
pub struct KilnProfileRow {
    /// The op (kernel family, e.g. "matmul", "elementwise:add", "user_kernel"); owned by the
    /// result.
    pub op: *mut c_char,
    /// Dispatches of the op while the profile ran.
    pub calls: u64,
    /// Of those, how many were timed.
    pub timed: u64,
    pub total_s: f64,
    pub mean_s: f64,
    /// Part of the profile's total, 0..1.
    pub share: f64,
}

/// What kiln_profile_stop writes: the table as text, the rows (most time first) and the
/// totals. Release with kiln_profile_result_free.
#[repr(C)]
pub struct KilnProfileResult {
    /// The aligned table (what Kiln's other bindings print), NUL-terminated.
    pub text: *mut c_char,
    pub rows: *mut KilnProfileRow,
    pub n_rows: usize,
    /// KILN_CLOCK_GPU_TIMESTAMPS or KILN_CLOCK_WALL.
    pub clock: u32,
    pub total_s: f64,
    pub wall_s: f64,
}

fn c_string(s: String) -> *mut c_char {
    // Kiln's texts have no NUL; one would only cut the string short, never fail.
    let s = s.replace('\0', " ");
    CString::new(s).map(CString::into_raw).unwrap_or(std::ptr::null_mut())
}

fn result_of(p: Profile) -> KilnProfileResult {
    let rows: Box<[KilnProfileRow]> = p
        .rows
        .iter()
        .map(|r| KilnProfileRow {
            op: c_string(r.op.clone()),
            calls: r.calls,
            timed: r.timed,
            total_s: r.total_s,
            mean_s: r.mean_s,
            share: r.share,
        })
        .collect();
    let n_rows = rows.len();
    KilnProfileResult {
        text: c_string(p.to_string()),
        rows: Box::into_raw(rows) as *mut KilnProfileRow,
        n_rows,
        clock: match p.clock {
            Clock::GpuTimestamps => KILN_CLOCK_GPU_TIMESTAMPS,
            Clock::WallClock => KILN_CLOCK_WALL,
        },
        total_s: p.total_s,
        wall_s: p.wall_s,
    }
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

/// Stops the profile (waits for the GPU) and writes its result to `*out`; release it with
/// kiln_profile_result_free. KILN_ERR_INVALID_ARGUMENT when no profile runs; `*out` is zeroed
/// on failure.
#[no_mangle]
pub unsafe extern "C" fn kiln_profile_stop(out: *mut KilnProfileResult) -> KilnStatus {
    call("kiln_profile_stop", || {
        let out = out_ptr(out, "out")?;
        *out = empty();
        *out = result_of(profile::stop()?);
        Ok(())
    })
}

fn empty() -> KilnProfileResult {
    KilnProfileResult {
        text: std::ptr::null_mut(),
        rows: std::ptr::null_mut(),
        n_rows: 0,
        clock: 0,
        total_s: 0.0,
        wall_s: 0.0,
    }
}

/// Releases what kiln_profile_stop wrote into `*r` and zeroes it (freeing twice is a no-op).
/// NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn kiln_profile_result_free(r: *mut KilnProfileResult) -> KilnStatus {
    call("kiln_profile_result_free", || {
        if r.is_null() {
            return Ok(());
        }
        let res = std::mem::replace(&mut *r, empty());
        free_result(res)
    })
}

unsafe fn free_result(res: KilnProfileResult) -> Result<()> {
    if !res.text.is_null() {
        drop(CString::from_raw(res.text));
    }
    if !res.rows.is_null() {
        let rows = Box::from_raw(std::ptr::slice_from_raw_parts_mut(res.rows, res.n_rows));
        for row in rows.iter() {
            if !row.op.is_null() {
                drop(CString::from_raw(row.op));
            }
        }
    }
    Ok(())
}

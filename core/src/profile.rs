//! Per-op GPU-time profiles: `start`, run work, `stop` (or `profile(|| ...)`), and get a
//! [`Profile`]: one row per op (kernel family, see `metrics`) with its calls and GPU time.
//!
//! While a profile runs, every dispatch gets a compute pass of its own whose begin and end write
//! timestamps, so that each pass's time is exactly one op's (batching otherwise puts many
//! dispatches in one pass). That costs a pass per dispatch: profiled runs are slower than
//! unprofiled ones, by the pass overhead (a few µs per dispatch on a GPU). Work of every thread
//! is profiled. `stop` synchronizes every device, then reads the times.
//!
//! Where the adapter has no timestamp queries (`KILN_NO_TIMESTAMPS=1` simulates that), each
//! dispatch is submitted and waited for on its own and the wall clock from submit to done is
//! its time: the profile says so (`Clock::WallClock`, and in its table's heading), since that
//! time includes a submit and a wait per op and is only good for comparing ops with each other.
//!
//! Native only: in the browser `start` answers UNSUPPORTED (reading the times back needs the
//! blocking waits a page does not have).

use crate::stats::recording::{active, state, Acc, State, ACTIVE, GENERATION};
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// What a profile's times were measured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// GPU timestamps at the begin and end of each op's pass: GPU time proper.
    GpuTimestamps,
    /// The adapter has no timestamp queries: host wall clock of each op submitted and waited for
    /// alone (includes submit and wait overhead).
    WallClock,
}

impl Clock {
    pub fn name(self) -> &'static str {
        match self {
            Clock::GpuTimestamps => "gpu_timestamps",
            Clock::WallClock => "wall_clock",
        }
    }
}

/// One op's line of a profile.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    /// The op (kernel family, e.g. `matmul`, `elementwise:add`, `user_kernel`).
    pub op: String,
    /// Dispatches of the op while the profile ran.
    pub calls: u64,
    /// Of those, how many were timed (all of them, unless a batch ran out of timestamp queries).
    pub timed: u64,
    pub total_s: f64,
    /// `total_s / timed`.
    pub mean_s: f64,
    /// Part of the profile's total time, 0..1.
    pub share: f64,
}

/// The result of a profile: rows sorted by total time, most first.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub clock: Clock,
    pub rows: Vec<ProfileRow>,
    /// The rows' total time.
    pub total_s: f64,
    /// Host wall clock from `start` to `stop`.
    pub wall_s: f64,
}

/// Starts profiling every dispatch of the process. Work queued before is submitted first (not
/// counted). INVALID_ARGUMENT when a profile already runs (one at a time).
pub fn start() -> Result<()> {
    if cfg!(target_arch = "wasm32") {
        return Err(Error::Unsupported("profiles need blocking waits, which the browser does not have".into()));
    }
    let mut s = state();
    if s.is_some() {
        return Err(Error::InvalidArgument("a profile is already running (one at a time per process)".into()));
    }
    for d in crate::device::live_devices() {
        d.flush()?;
    }
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    *s = Some(State { generation, started: crate::platform::Instant::now(), rows: Vec::new() });
    ACTIVE.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether a profile runs now.
pub fn is_running() -> bool {
    active()
}

/// Stops the profile: synchronizes every device (so every timed pass is read) and returns the
/// rows. INVALID_ARGUMENT when no profile runs.
pub fn stop() -> Result<Profile> {
    if state().is_none() {
        return Err(Error::InvalidArgument("no profile is running (start one first)".into()));
    }
    ACTIVE.store(false, Ordering::SeqCst);
    let devices = crate::device::live_devices();
    let mut synced = Ok(());
    for d in &devices {
        if let Err(e) = d.synchronize() {
            synced = Err(e);
        }
    }
    let Some(s) = state().take() else {
        return Err(Error::InvalidArgument("the profile was stopped by another thread".into()));
    };
    synced?;
    // Each device's clock; with several devices, timestamps if every one of them has them.
    let timestamps = !devices.is_empty() && devices.iter().all(|d| d.has_timestamps());
    let clock = if timestamps || devices.is_empty() { Clock::GpuTimestamps } else { Clock::WallClock };
    Ok(build(clock, s.rows, s.started.elapsed().as_secs_f64()))
}

fn build(clock: Clock, accs: Vec<Acc>, wall_s: f64) -> Profile {
    let total_ns: u64 = accs.iter().map(|a| a.ns).sum();
    let total_s = total_ns as f64 * 1e-9;
    let mut rows: Vec<ProfileRow> = accs
        .into_iter()
        .map(|a| {
            let total = a.ns as f64 * 1e-9;
            ProfileRow {
                op: a.op.name.to_string(),
                calls: a.calls,
                timed: a.timed,
                total_s: total,
                mean_s: if a.timed > 0 { total / a.timed as f64 } else { 0.0 },
                share: if total_ns > 0 { a.ns as f64 / total_ns as f64 } else { 0.0 },
            }
        })
        .collect();
    rows.sort_by(|a, b| b.total_s.total_cmp(&a.total_s).then_with(|| a.op.cmp(&b.op)));
    Profile { clock, rows, total_s, wall_s }
}

/// Runs `f` under a profile and returns its result with the profile.
pub fn profile<R>(f: impl FnOnce() -> R) -> Result<(R, Profile)> {
    start()?;
    let guard = StopOnDrop;
    let r = f();
    std::mem::forget(guard);
    Ok((r, stop()?))
}

/// Stops the profile if `f` panics, so the next one can start.
struct StopOnDrop;

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        ACTIVE.store(false, Ordering::SeqCst);
        state().take();
    }
}

/// Seconds in a readable unit, right-aligned by the caller.
fn human(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} us", s * 1e6)
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.clock {
            Clock::GpuTimestamps => "GPU time (timestamp queries)",
            Clock::WallClock => {
                "WALL-CLOCK time (no timestamp queries on this adapter: each op submitted and waited for alone)"
            }
        };
        writeln!(f, "{what}: {} in {} ops, {} wall", human(self.total_s), self.rows.len(), human(self.wall_s))?;
        let w = self.rows.iter().map(|r| r.op.len()).max().unwrap_or(0).max(2);
        writeln!(f, "{:<w$}  {:>8}  {:>12}  {:>12}  {:>6}", "op", "calls", "total", "mean", "share")?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<w$}  {:>8}  {:>12}  {:>12}  {:>5.1}%",
                r.op,
                r.calls,
                human(r.total_s),
                human(r.mean_s),
                r.share * 100.0
            )?;
        }
        Ok(())
    }
}

//! Sessions for BEAM processes (`Kiln.Session`). kiln-core's current session is a thread-local,
//! but a process's NIF calls run on whichever (dirty) scheduler thread is free, so the binding
//! keeps its own "current session" per process: `session_enter` pushes a session for the
//! calling pid, `session_exit` pops it, and `guard` (lib.rs) makes the top one current on the
//! scheduler thread for the length of each call only.
//!
//! A pid's entries hold the session resource, and a monitor on the pid drops them when the
//! process exits without leaving (killed inside `Kiln.Session.with/2`). A session is closed by
//! `Kiln.Session.close/1`, or by the resource's destructor when its last reference goes (the
//! garbage collector, or a process exit with it current and no other holder).

use crate::{bad_arg, guard, Reply};
use kiln_core::{Error, Session, SessionLimits};
use rustler::{Decoder, Env, LocalPid, Monitor, NifMap, NifResult, ResourceArc, Term};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

pub struct SessionRes(Session);

/// A session argument: the resource inside a `%Kiln.Session{}`.
pub struct SRef(ResourceArc<SessionRes>);

impl<'a> Decoder<'a> for SRef {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        term.decode::<ResourceArc<SessionRes>>().map(SRef).map_err(|_| bad_arg(term, "expected a Kiln.Session"))
    }
}

impl Drop for SessionRes {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[rustler::resource_impl]
impl rustler::Resource for SessionRes {
    fn down<'a>(&'a self, _env: Env<'a>, pid: LocalPid, _monitor: Monitor) {
        // The entries are dropped after the lock is released: dropping the last reference
        // closes a session, which must not happen under the map's lock.
        let gone = lock().remove(&pid);
        if gone.is_some() {
            BOUND_PIDS.fetch_sub(1, Ordering::Relaxed);
        }
        drop(gone);
    }
}

type Stack = Vec<(ResourceArc<SessionRes>, Option<Monitor>)>;

/// The sessions entered by each process, innermost last.
static BOUND: LazyLock<Mutex<HashMap<LocalPid, Stack>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// How many pids have an entry: 0 spares every call of a program without sessions the lock.
static BOUND_PIDS: AtomicUsize = AtomicUsize::new(0);

fn lock() -> MutexGuard<'static, HashMap<LocalPid, Stack>> {
    BOUND.lock().unwrap_or_else(|p| p.into_inner())
}

/// The calling process's current session, if it entered one.
pub fn current_of(env: Env<'_>) -> Option<Session> {
    if BOUND_PIDS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let pid = env.pid();
    lock().get(&pid).and_then(|stack| stack.last()).map(|(res, _)| res.0.clone())
}

/// A new session resource (`session_open`, generated in session_gen.rs, decodes the limits).
pub(crate) fn open(limits: SessionLimits) -> ResourceArc<SessionRes> {
    ResourceArc::new(SessionRes(Session::new(limits)))
}

/// Makes `s` the calling process's current session until the matching `session_exit`.
#[rustler::nif]
fn session_enter(env: Env<'_>, s: SRef) {
    let s = s.0;
    let pid = env.pid();
    let monitor = env.monitor(&s, &pid);
    let mut bound = lock();
    let stack = bound.entry(pid).or_default();
    if stack.is_empty() {
        BOUND_PIDS.fetch_add(1, Ordering::Relaxed);
    }
    stack.push((s, monitor));
}

/// Leaves the calling process's innermost session (the one entered before comes back).
#[rustler::nif]
fn session_exit(env: Env<'_>) -> Reply<()> {
    let pid = env.pid();
    let top = {
        let mut bound = lock();
        let Some(stack) = bound.get_mut(&pid) else {
            return Err(crate::KError(Error::InvalidArgument("this process has no current session to leave".into())));
        };
        let top = stack.pop();
        if stack.is_empty() {
            bound.remove(&pid);
            BOUND_PIDS.fetch_sub(1, Ordering::Relaxed);
        }
        top
    };
    if let Some((res, Some(monitor))) = &top {
        env.demonitor(res, monitor);
    }
    Ok(())
}

/// The calling process's current session, or nil.
#[rustler::nif]
fn session_current(env: Env<'_>) -> Option<ResourceArc<SessionRes>> {
    lock().get(&env.pid()).and_then(|stack| stack.last()).map(|(res, _)| res.clone())
}

#[rustler::nif(schedule = "DirtyIo")]
fn session_close(env: Env<'_>, s: SRef) -> Reply<()> {
    guard(env, || {
        s.0 .0.close();
        Ok(())
    })
}

#[derive(NifMap)]
pub struct Stats {
    id: u64,
    bytes_in_use: u64,
    peak_bytes: u64,
    live_buffers: u64,
    ops_total: u64,
    dispatches: u64,
    kernels_compiled: u64,
    quota_exceeded: u64,
    compute_limit_hits: u64,
    policy_rejections: u64,
    bound_bytes: u64,
    gpu_time_ns: u64,
    gpu_time_limit_hits: u64,
    closed: bool,
}

#[rustler::nif]
fn session_stats(s: SRef) -> Stats {
    let st = s.0 .0.stats();
    Stats {
        id: st.id,
        bytes_in_use: st.bytes_in_use,
        peak_bytes: st.peak_bytes,
        live_buffers: st.live_buffers,
        ops_total: st.ops_total,
        dispatches: st.dispatches,
        kernels_compiled: st.kernels_compiled,
        quota_exceeded: st.quota_exceeded,
        compute_limit_hits: st.compute_limit_hits,
        policy_rejections: st.policy_rejections,
        bound_bytes: st.bound_bytes,
        gpu_time_ns: st.gpu_time_ns,
        gpu_time_limit_hits: st.gpu_time_limit_hits,
        closed: st.closed,
    }
}

/// kiln-core's metrics (every open session's counters among them) in Prometheus' text format.
#[rustler::nif(schedule = "DirtyIo")]
fn metrics_text(env: Env<'_>) -> Reply<String> {
    guard(env, || Ok(kiln_core::metrics::prometheus_text()))
}

/// One op's line of a profile (`Kiln.profile/1`).
#[derive(NifMap)]
pub struct ProfileRow {
    op: String,
    calls: u64,
    timed: u64,
    total_s: f64,
    mean_s: f64,
    share: f64,
}

/// A stopped profile: its rows, the clock they were measured with, and the printable table.
#[derive(NifMap)]
pub struct Profile {
    clock: String,
    rows: Vec<ProfileRow>,
    total_s: f64,
    wall_s: f64,
    text: String,
}

/// Starts the process-wide per-op GPU-time profile (`kiln_core::profile`).
#[rustler::nif(schedule = "DirtyIo")]
fn profile_start(env: Env<'_>) -> Reply<()> {
    guard(env, kiln_core::profile::start)
}

/// Stops the profile (synchronizing every device) and returns it.
#[rustler::nif(schedule = "DirtyIo")]
fn profile_stop(env: Env<'_>) -> Reply<Profile> {
    guard(env, || {
        let p = kiln_core::profile::stop()?;
        Ok(Profile {
            clock: p.clock.name().to_string(),
            rows: p
                .rows
                .iter()
                .map(|r| ProfileRow {
                    op: r.op.clone(),
                    calls: r.calls,
                    timed: r.timed,
                    total_s: r.total_s,
                    mean_s: r.mean_s,
                    share: r.share,
                })
                .collect(),
            total_s: p.total_s,
            wall_s: p.wall_s,
            text: p.to_string(),
        })
    })
}

/// Whether a profile runs now.
#[rustler::nif]
fn profile_running() -> bool {
    kiln_core::profile::is_running()
}

//! The running profile's rows, written by the dispatch path (`device`) and read by `profile`,
//! which starts and stops profiles: one relaxed load per dispatch while none runs.

use super::counters::OpStats;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) struct Acc {
    pub(crate) op: Arc<OpStats>,
    pub(crate) calls: u64,
    pub(crate) timed: u64,
    pub(crate) ns: u64,
}

pub(crate) struct State {
    pub(crate) generation: u64,
    pub(crate) started: crate::platform::Instant,
    pub(crate) rows: Vec<Acc>,
}

pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);
pub(crate) static GENERATION: AtomicU64 = AtomicU64::new(0);
static STATE: Mutex<Option<State>> = Mutex::new(None);

pub(crate) fn state() -> std::sync::MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a profile runs (one relaxed load: what every dispatch pays for profiling).
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// The running profile's number (passes recorded under it carry it).
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

fn row<'a>(rows: &'a mut Vec<Acc>, op: &Arc<OpStats>) -> &'a mut Acc {
    let i = match rows.iter().position(|r| Arc::ptr_eq(&r.op, op)) {
        Some(i) => i,
        None => {
            rows.push(Acc { op: op.clone(), calls: 0, timed: 0, ns: 0 });
            rows.len() - 1
        }
    };
    &mut rows[i]
}

pub(crate) fn count_call(op: &Arc<OpStats>) {
    if let Some(s) = state().as_mut() {
        row(&mut s.rows, op).calls += 1;
    }
}

pub(crate) fn add_gpu(generation: u64, op: &Arc<OpStats>, ns: u64) {
    if let Some(s) = state().as_mut().filter(|s| s.generation == generation) {
        let r = row(&mut s.rows, op);
        r.timed += 1;
        r.ns += ns;
    }
}

pub(crate) fn add_wall(op: &Arc<OpStats>, took: Duration) {
    if let Some(s) = state().as_mut() {
        // The call itself was counted when it was recorded (`count_call`).
        let r = row(&mut s.rows, op);
        r.timed += 1;
        r.ns += took.as_nanos() as u64;
    }
}

//! `/ready`: every served device answers a tiny round trip (an upload and a read back of 4 bytes) within
//! `PROBE_WAIT`, checked at most once per `PROBE_CACHE`. A device that is lost, or busy past
//! the wait (wedged by a long kernel), is not ready: a balancer should send work elsewhere.
//! The probe runs on a thread of its own, never more than one at once, so a probe stuck behind
//! a wedged device costs one parked thread, not one per request, and nothing waits for it.

use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long a probe result is reused (probes are cheap, but not free on a busy device).
pub const PROBE_CACHE: Duration = Duration::from_millis(1000);
/// How long the device may take to answer a probe before it counts as not answering.
pub const PROBE_WAIT: Duration = Duration::from_millis(2000);

pub struct Readiness {
    state: Mutex<State>,
    /// Bumped when a probe finishes.
    done: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    /// When the last finished probe started, and what it found.
    last: Option<(Instant, Result<(), String>)>,
    /// When the probe now running started.
    running: Option<Instant>,
}

impl Default for Readiness {
    fn default() -> Readiness {
        Readiness { state: Mutex::new(State::default()), done: watch::channel(0).0 }
    }
}

/// One round trip through each of `devices` (adapter indices); the first that fails is named.
/// Every one must answer: a replica with a broken GPU is better drained and restarted than left
/// placing sessions on the others while those on the broken one fail.
fn probe(devices: &[usize]) -> Result<(), String> {
    if devices.is_empty() {
        return Err("this server has no device".into());
    }
    for &i in devices {
        probe_one(i).map_err(|e| format!("device {i}: {e}"))?;
    }
    Ok(())
}

fn probe_one(index: usize) -> Result<(), String> {
    let d = kiln_core::runtime().device_at(index).map_err(|e| e.message().to_string())?;
    if d.is_lost() {
        return Err("the GPU device is lost".into());
    }
    let t =
        kiln_core::Tensor::from_bytes_on(&d, &[1, 2, 3, 4], &[1], kiln_core::DType::U32).map_err(|e| e.to_string())?;
    match t.to_bytes() {
        Ok(b) if b == [1, 2, 3, 4] => Ok(()),
        Ok(_) => Err("the GPU device answered a probe wrongly".into()),
        Err(e) => Err(e.message().to_string()),
    }
}

impl Readiness {
    /// Ok when `devices` answered a probe that started at most `PROBE_CACHE` ago.
    pub async fn check(self: &std::sync::Arc<Self>, devices: Vec<usize>) -> Result<(), String> {
        let (started, mut rx) = {
            let mut s = crate::state::lock(&self.state);
            if let Some((at, r)) = &s.last {
                if at.elapsed() < PROBE_CACHE {
                    return r.clone();
                }
            }
            let started = match s.running {
                Some(at) => at,
                None => {
                    let (me, at) = (self.clone(), Instant::now());
                    let spawned = std::thread::Builder::new().name("kiln-ready".into()).spawn(move || {
                        let r = std::panic::catch_unwind(|| probe(&devices))
                            .unwrap_or_else(|_| Err("the probe panicked".into()));
                        let mut s = crate::state::lock(&me.state);
                        s.last = Some((at, r));
                        s.running = None;
                        drop(s);
                        me.done.send_modify(|n| *n += 1);
                    });
                    if spawned.is_err() {
                        return Err("no thread for a device probe".into());
                    }
                    s.running = Some(at);
                    at
                }
            };
            (started, self.done.subscribe())
        };
        let left = PROBE_WAIT.saturating_sub(started.elapsed());
        let _ = tokio::time::timeout(left, rx.changed()).await;
        let s = crate::state::lock(&self.state);
        match &s.last {
            Some((at, r)) if *at >= started => r.clone(),
            _ => Err(format!(
                "the GPU device has not answered a probe within {} ms (busy with a long kernel, or wedged)",
                started.elapsed().as_millis()
            )),
        }
    }
}

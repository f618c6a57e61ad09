//! Waiting for the GPU: one poller thread waits on the device, callers wait on channels (after
//! a short non-blocking check), and a wait past the timeout gives the device up. In the browser
//! there is no thread to wait on: `wait_web` replaces the poller and the blocking wait.

// In the page only the shared parts below are used (`wait_web` has the rest).
#![cfg_attr(target_arch = "wasm32", allow(dead_code, unused_imports))]

use super::Device;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a waiter checks for its result without blocking before it parks on its channel.
/// Measured on the H200, one tiny op + synchronize: 91-109 µs parked on the channel at once
/// (two thread wake-ups through the poller), 41-53 µs with this check first.
/// `KILN_WAIT_SPIN_US` overrides it (0: park at once, no core spent checking).
pub(super) const SPIN: Duration = Duration::from_micros(200);

/// The poller's sleep between checks while someone waits: from the first to the second value,
/// doubling. Waits shorter than `SPIN` never reach the poller (the waiter checks by itself), so
/// the cap adds at most this much to a longer wait, and costs a few thousand cheap checks a
/// second while the GPU works.
const POLL_BACKOFF: (Duration, Duration) = (Duration::from_micros(10), Duration::from_micros(200));

/// How often a parked waiter looks whether its device was lost meanwhile.
const LOST_CHECK: Duration = Duration::from_millis(50);

/// The default `KILN_TIMEOUT_MS`: long enough for any single wait of real work (the longest
/// test on a software adapter waits a few seconds), short enough that a runaway kernel gives
/// an interactive caller its error within a minute.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// Devices given up after a timeout, never dropped (see `Device::abandon`).
static ABANDONED: Mutex<Vec<Arc<Device>>> = Mutex::new(Vec::new());

pub(super) struct Poller {
    pub(super) pending: Mutex<usize>,
    pub(super) wake: Condvar,
}

impl Device {
    /// The one thread that waits on the device; callers wait on channels.
    #[cfg(not(target_arch = "wasm32"))]
    ///
    /// It checks with `poll(Poll)` and sleeps between checks (`POLL_BACKOFF`), never
    /// `poll(Wait { .. })`: wgpu-core 30 asserts, and panics, when a waiting poll reads the fence,
    /// a `queue.submit` on another thread (which polls inside, outside Kiln's lock) retires the
    /// submissions meanwhile, and the waiting poll then finds the queue empty below the index it
    /// waited for. A panic there drops the callbacks it had collected, so the waiters never hear.
    pub(super) fn start_poller(dev: &Arc<Device>) {
        let weak = Arc::downgrade(dev);
        let poller = dev.poller.clone();
        std::thread::Builder::new()
            .name("kiln-poller".into())
            .spawn(move || {
                let mut backoff = POLL_BACKOFF.0;
                loop {
                    {
                        let mut pending = poller.pending.lock().unwrap_or_else(|p| p.into_inner());
                        if *pending == 0 {
                            backoff = POLL_BACKOFF.0;
                        }
                        while *pending == 0 {
                            let (p, _) = poller
                                .wake
                                .wait_timeout(pending, Duration::from_secs(1))
                                .unwrap_or_else(|p| p.into_inner());
                            pending = p;
                            if weak.strong_count() == 0 {
                                return;
                            }
                        }
                    }
                    let Some(dev) = weak.upgrade() else { return };
                    if dev.is_lost() {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    // A panic inside wgpu must not take the poller down: every waiter depends on it.
                    let polling = dev.poll_lock.lock().unwrap_or_else(|p| p.into_inner());
                    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        dev.device.poll(wgpu::PollType::Poll)
                    }));
                    drop(polling);
                    if let Err(payload) = polled {
                        let e = Error::from_panic(payload);
                        dev.uncaptured.lock().unwrap_or_else(|p| p.into_inner()).push(format!("poll panicked: {e}"));
                    }
                    // Not held while sleeping: the device must be free to drop meanwhile.
                    drop(dev);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(POLL_BACKOFF.1);
                }
            })
            .expect("kiln: cannot start the poller thread");
    }

    /// Gives up on a device whose work does not finish: marks it lost (every later call on it
    /// answers DeviceLost at once, none reaches `queue.submit`, which blocked forever after a
    /// timeout) and keeps it alive for the rest of the process, because dropping a wgpu queue
    /// waits for the GPU to go idle, which a runaway kernel may never let it do.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn abandon(&self, reason: String) {
        {
            let mut r = self.lost_reason.lock().unwrap_or_else(|p| p.into_inner());
            if r.is_empty() {
                *r = reason;
            }
        }
        self.lost.store(true, Ordering::SeqCst);
        self.device.destroy();
        if let Some(me) = self.me.upgrade() {
            ABANDONED.lock().unwrap_or_else(|p| p.into_inner()).push(me);
        }
        self.poller.wake.notify_all();
    }

    /// Waits for a callback-fed channel through the poller thread.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn wait<T>(&self, rx: mpsc::Receiver<T>) -> Result<T> {
        let _wait = crate::startup::span("wait for the GPU");
        // A short GPU round trip finishes before the poller and this thread could trade wake-ups:
        // first check without blocking for a while (`poll(Poll)` never waits, and only while no
        // other poll runs: wgpu-core asserts, and panics, when two polls finish the same
        // submissions at once), then hand the wait to the poller and park on the channel.
        let start = Instant::now();
        let mut early = None;
        while start.elapsed() < self.wait_spin {
            if let Ok(v) = rx.try_recv() {
                early = Some(v);
                break;
            }
            let guard = match self.poll_lock.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if guard.is_some() {
                let _ =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.device.poll(wgpu::PollType::Poll)));
            }
            drop(guard);
            // Leave the core to others between checks (a software adapter computes on the CPU).
            // Measured on the H100: a pure spin instead waits the same (27.5 µs either way).
            std::thread::yield_now();
        }
        let out = match early {
            Some(v) => Ok(v),
            None => {
                *self.poller.pending.lock().unwrap() += 1;
                self.poller.wake.notify_all();
                // In slices, so that a device lost or abandoned by another thread meanwhile
                // releases this waiter at once instead of at its own deadline.
                let out = loop {
                    let left = self.timeout.saturating_sub(start.elapsed());
                    match rx.recv_timeout(left.min(LOST_CHECK)) {
                        Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() && !self.is_lost() => continue,
                        other => break other,
                    }
                };
                *self.poller.pending.lock().unwrap() -= 1;
                out
            }
        };
        // Without timestamps, a session with a GPU budget is charged the wall clock of its waits.
        if !self.has_timestamps() {
            if let Some(s) = crate::session::current_inner().filter(|s| s.has_gpu_budget()) {
                s.charge_gpu_ns(start.elapsed().as_nanos() as u64);
            }
        }
        // The host waited for the GPU: the next queue of work starts with an early submit again,
        // and its parameter blocks may go through the ring (a round trip is what it cuts).
        // Not waited for: another thread may hold the batch lock inside a `queue.submit` that
        // blocks while the GPU is busy (lavapipe), and a timed-out wait must answer and give the
        // device up at its deadline, not when the runaway work ends (7.2 s for a 1.5 s timeout).
        if let Ok(mut batch) = self.batch.try_lock() {
            batch.flush_at = self.flush_bytes;
            batch.ring_ok = true;
        }
        match out {
            Ok(v) => Ok(v),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.check_alive()?;
                self.abandon(format!("GPU work ran past the {:?} timeout (KILN_TIMEOUT_MS)", self.timeout));
                Err(Error::Timeout(format!(
                    "GPU work did not finish within {:?} (KILN_TIMEOUT_MS); the device was reset: its tensors and kernels \
                     are lost, and the next call creates a fresh device",
                    self.timeout
                )))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.fault("the GPU callback was dropped".into())),
        }
    }

    /// How long one wait for the GPU may take before the device is given up (`KILN_TIMEOUT_MS`):
    /// work queued ahead of a wait (a decode loop's lookahead) should take well under it.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Submits everything queued and waits until the GPU has finished it.
    pub fn synchronize(&self) -> Result<()> {
        self.synchronize_counted().map_err(crate::stats::counters::count_error)
    }

    fn synchronize_counted(&self) -> Result<()> {
        self.check_alive()?;
        {
            let mut batch = self.batch.lock().unwrap();
            self.submit_locked(&mut batch)?;
        }
        let (tx, rx) = mpsc::channel();
        self.queue.on_submitted_work_done(move || {
            let _ = tx.send(());
        });
        self.wait(rx)?;
        self.settle_times()?;
        self.take_uncaptured()
    }

    /// `synchronize` for async callers; natively it waits on the calling thread.
    #[cfg(not(target_arch = "wasm32"))]
    pub async fn synchronize_async(&self) -> Result<()> {
        self.synchronize()
    }
}

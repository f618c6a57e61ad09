//! Sessions: who is using the device, and how much they may. A session owns the tensors and
//! kernels created while it is current on a thread, charges their memory and the operations of
//! every dispatch against its limits, and frees everything it owns when it is closed. Code that
//! never opens a session runs in the default session: no limits, no accounting, today's API.
//! docs/DESIGN.md, "Sessions and untrusted kernels", has the rules and the error codes.
//!
//! The counters are plain atomics read by `Session::stats` (and `live_sessions`), so that a
//! metrics exporter can read them later without a lock on the dispatch path.

mod audit;
pub(crate) mod kernel_cost;
pub(crate) mod kernel_front;
mod kernels;
mod limits;
pub(crate) mod loop_guard;
pub(crate) mod opaque_id;
pub(crate) mod policy;
#[doc(hidden)]
pub mod sandbox_check;

pub use audit::{audit_enabled, audit_off, audit_to_callback, audit_to_file};
pub(crate) use audit::{error_fields, event};
pub use limits::{
    LimitField, LimitTy, SessionLimits, ShaderPolicy, DEFAULT_LOOP_BUDGET, KERNEL_CHARGE_BYTES, SUGGESTED_MAX_KERNELS,
};

use crate::{Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Where a session's buffers live (a device): frees them when the session closes. A trait, so
/// that sessions need not know devices (the device module implements it).
pub(crate) trait BufferHome: Send + Sync {
    /// Makes `buffers` unusable (every later dispatch, copy or read naming one fails with
    /// INVALID_ARGUMENT) and gives their memory back now, also for the handles callers still hold.
    fn revoke(&self, buffers: Vec<(wgpu::Buffer, u64)>);
}

/// A session's buffers on one home, gathered for `BufferHome::revoke`.
type HomeBuffers = (Arc<dyn BufferHome>, Vec<(wgpu::Buffer, u64)>);

struct Owned {
    buffer: wgpu::Buffer,
    class: u64,
    home: Arc<dyn BufferHome>,
}

/// A snapshot of one session's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    pub id: u64,
    /// Bytes the session's live tensors hold (size classes), and `KERNEL_CHARGE_BYTES` for
    /// each of its live kernels.
    pub bytes_in_use: u64,
    pub peak_bytes: u64,
    pub live_buffers: u64,
    /// Operations counted so far: the real work of every dispatch and built-in op (see
    /// `SessionLimits::max_ops_per_dispatch`).
    pub ops_total: u64,
    pub dispatches: u64,
    /// Bytes of the storage buffers bound to the session's dispatches (their size classes).
    pub bound_bytes: u64,
    /// GPU time charged to the session, in nanoseconds: timestamp-measured time of its passes
    /// while it has a GPU budget (`SessionLimits::max_gpu_time_ms`) or a profile runs; the
    /// wall clock of its waits where the adapter has no timestamp queries and it has a budget.
    pub gpu_time_ns: u64,
    /// Dispatches refused because the GPU-time budget was spent (also in `compute_limit_hits`).
    pub gpu_time_limit_hits: u64,
    pub kernels_compiled: u64,
    /// User kernels of the session alive now (see `SessionLimits::max_kernels`).
    pub kernels_alive: u64,
    /// Allocations refused with QUOTA_EXCEEDED.
    pub quota_exceeded: u64,
    /// Dispatches refused, or kernels stopped, with COMPUTE_LIMIT.
    pub compute_limit_hits: u64,
    /// Kernels refused by the shader policy.
    pub policy_rejections: u64,
    pub closed: bool,
}

#[derive(Default)]
struct Counters {
    bytes_in_use: AtomicU64,
    peak_bytes: AtomicU64,
    ops_total: AtomicU64,
    dispatches: AtomicU64,
    bound_bytes: AtomicU64,
    gpu_time_ns: AtomicU64,
    gpu_time_limit_hits: AtomicU64,
    kernels_compiled: AtomicU64,
    kernels_alive: AtomicU64,
    quota_exceeded: AtomicU64,
    compute_limit_hits: AtomicU64,
    policy_rejections: AtomicU64,
}

pub(crate) struct SessionInner {
    id: u64,
    limits: SessionLimits,
    closed: AtomicBool,
    counters: Counters,
    owned: Mutex<HashMap<u64, Owned>>,
}

/// A handle on a session; clones share it. Dropping the handles does not close the session:
/// `close` does (the bindings close at the end of a `with` block or on their handle's release).
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<SessionInner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({}{})", self.inner.id, if self.is_closed() { ", closed" } else { "" })
    }
}

static NEXT_BUFFER: AtomicU64 = AtomicU64::new(1);
static LIVE: Mutex<Vec<Weak<SessionInner>>> = Mutex::new(Vec::new());

thread_local! {
    static CURRENT: RefCell<Option<Session>> = const { RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Session {
    /// Opens a session with `limits` (see `SessionLimits`; the default has none).
    pub fn new(limits: SessionLimits) -> Session {
        let inner = Arc::new(SessionInner {
            id: opaque_id::next(),
            limits,
            closed: AtomicBool::new(false),
            counters: Counters::default(),
            owned: Mutex::new(HashMap::new()),
        });
        {
            let mut live = lock(&LIVE);
            live.retain(|w| w.strong_count() > 0);
            live.push(Arc::downgrade(&inner));
        }
        let l = &inner.limits;
        event("session_opened", |m| {
            m.insert("session".into(), inner.id.into());
            m.insert("max_bytes".into(), l.max_bytes.into());
            m.insert("max_ops_per_dispatch".into(), l.max_ops_per_dispatch.into());
            m.insert("max_ops_total".into(), l.max_ops_total.into());
            m.insert("max_gpu_time_ms".into(), l.max_gpu_time_ms.into());
            m.insert("max_loop_iterations".into(), l.loop_budget().into());
        });
        Session { inner }
    }

    /// Unique in the process and never 0, but not a count of the sessions opened before it
    /// (see `opaque_id`): error messages name it, and tenants read those.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub fn limits(&self) -> &SessionLimits {
        &self.inner.limits
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    pub fn stats(&self) -> SessionStats {
        self.inner.stats()
    }

    /// Makes this the current session of the calling thread until the guard drops (the previous
    /// one, or the default session, comes back then).
    pub fn enter(&self) -> Entered {
        Entered { previous: set_current(Some(self.clone())) }
    }

    /// Runs `f` with this session current on the calling thread.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let _entered = self.enter();
        f()
    }

    /// Closes the session: frees every buffer it owns now (tensors callers still hold answer
    /// INVALID_ARGUMENT from then on, naming the closed session), refuses its kernels and any
    /// further work under it. Closing twice is a no-op.
    pub fn close(&self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let freed;
        {
            // Held while revoking, so that a tensor dropped meanwhile does not pool a buffer
            // that is being destroyed.
            let mut owned = lock(&self.inner.owned);
            freed = owned.len();
            let mut by_home: HashMap<usize, HomeBuffers> = HashMap::new();
            for (_, o) in owned.drain() {
                let key = Arc::as_ptr(&o.home) as *const () as usize;
                by_home.entry(key).or_insert_with(|| (o.home.clone(), Vec::new())).1.push((o.buffer, o.class));
            }
            for (_, (home, buffers)) in by_home {
                home.revoke(buffers);
            }
            self.inner.counters.bytes_in_use.store(0, Ordering::Relaxed);
            self.inner.counters.kernels_alive.store(0, Ordering::Relaxed);
        }
        let s = self.stats();
        event("session_closed", |m| {
            m.insert("session".into(), s.id.into());
            m.insert("buffers_freed".into(), freed.into());
            m.insert("peak_bytes".into(), s.peak_bytes.into());
            m.insert("ops_total".into(), s.ops_total.into());
            m.insert("dispatches".into(), s.dispatches.into());
            m.insert("gpu_time_ns".into(), s.gpu_time_ns.into());
            m.insert("kernels_compiled".into(), s.kernels_compiled.into());
        });
    }
}

/// Restores the previous current session on drop (see `Session::enter`).
pub struct Entered {
    previous: Option<Session>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        set_current(self.previous.take());
    }
}

/// The calling thread's current session (None: the default session).
pub fn current() -> Option<Session> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Sets the calling thread's current session, returning the previous one (the C ABI's way; Rust
/// code uses `Session::enter`).
pub fn set_current(session: Option<Session>) -> Option<Session> {
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), session))
}

/// Every session not yet dropped, open or closed (for metrics and tests).
pub fn live_sessions() -> Vec<Session> {
    lock(&LIVE).iter().filter_map(|w| w.upgrade()).map(|inner| Session { inner }).collect()
}

/// A new process-unique buffer id (what a session's ownership map is keyed by).
pub(crate) fn next_buffer_id() -> u64 {
    NEXT_BUFFER.fetch_add(1, Ordering::Relaxed)
}

impl SessionInner {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::InvalidArgument(format!("session {} is closed", self.id)));
        }
        Ok(())
    }

    fn stats(&self) -> SessionStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SessionStats {
            id: self.id,
            bytes_in_use: get(&c.bytes_in_use),
            peak_bytes: get(&c.peak_bytes),
            live_buffers: lock(&self.owned).len() as u64,
            ops_total: get(&c.ops_total),
            dispatches: get(&c.dispatches),
            bound_bytes: get(&c.bound_bytes),
            gpu_time_ns: get(&c.gpu_time_ns),
            gpu_time_limit_hits: get(&c.gpu_time_limit_hits),
            kernels_compiled: get(&c.kernels_compiled),
            kernels_alive: get(&c.kernels_alive),
            quota_exceeded: get(&c.quota_exceeded),
            compute_limit_hits: get(&c.compute_limit_hits),
            policy_rejections: get(&c.policy_rejections),
            closed: self.is_closed(),
        }
    }

    fn limit_hit(&self, counter: &AtomicU64, e: Error) -> Error {
        counter.fetch_add(1, Ordering::Relaxed);
        event("limit_hit", |m| {
            m.insert("session".into(), self.id.into());
            error_fields(m, &e);
        });
        e
    }

    /// Reserves `class` bytes of the memory quota before a buffer is allocated; `uncharge_bytes`
    /// gives them back if the allocation then fails. Over the quota nothing changes.
    pub(crate) fn charge_bytes(&self, class: u64) -> Result<()> {
        self.check_open()?;
        let max = self.limits.max_bytes;
        let c = &self.counters;
        let mut now = c.bytes_in_use.load(Ordering::Relaxed);
        loop {
            let next = now.saturating_add(class);
            if max > 0 && next > max {
                return Err(self.limit_hit(
                    &c.quota_exceeded,
                    Error::QuotaExceeded(format!(
                        "session {} holds {now} bytes; {class} more would pass its quota of {max} bytes",
                        self.id
                    )),
                ));
            }
            match c.bytes_in_use.compare_exchange_weak(now, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    c.peak_bytes.fetch_max(next, Ordering::Relaxed);
                    return Ok(());
                }
                Err(actual) => now = actual,
            }
        }
    }

    pub(crate) fn uncharge_bytes(&self, class: u64) {
        self.counters.bytes_in_use.fetch_sub(class, Ordering::Relaxed);
    }

    /// Records that the session owns `buffer` (freed by `close`). If the session closed since
    /// the charge, the caller must not hand the buffer out: answers the closed error.
    pub(crate) fn adopt(&self, id: u64, buffer: &wgpu::Buffer, class: u64, home: Arc<dyn BufferHome>) -> Result<()> {
        let mut owned = lock(&self.owned);
        if self.is_closed() {
            drop(owned);
            return self.check_open();
        }
        owned.insert(id, Owned { buffer: buffer.clone(), class, home });
        Ok(())
    }

    /// A tensor's buffer `id` is dropped. True when the session still owned it (the caller gives
    /// it back as usual); false when `close` already freed it.
    pub(crate) fn release(&self, id: u64) -> bool {
        let Some(o) = lock(&self.owned).remove(&id) else { return false };
        self.counters.bytes_in_use.fetch_sub(o.class, Ordering::Relaxed);
        true
    }

    /// Counts one dispatch of `ops` operations (its real work, see `SessionLimits`), refusing it
    /// (COMPUTE_LIMIT) over the per-dispatch or the total budget; a refused dispatch counts nothing.
    pub(crate) fn charge_ops(&self, ops: u64) -> Result<()> {
        self.charge("a dispatch", ops)?;
        self.counters.dispatches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Charges the real work of one built-in op (`what`: multiply-adds of a matmul, a
    /// convolution, an attention), decided from its shapes before any of its dispatches is
    /// recorded, under the same per-dispatch and total budgets as `charge_ops` (the op's
    /// dispatches then charge their own invocations on top).
    pub(crate) fn charge_work(&self, what: &str, ops: u64) -> Result<()> {
        self.charge(what, ops)
    }

    fn charge(&self, what: &str, ops: u64) -> Result<()> {
        self.check_open()?;
        let l = &self.limits;
        let c = &self.counters;
        if l.max_ops_per_dispatch > 0 && ops > l.max_ops_per_dispatch {
            return Err(self.limit_hit(
                &c.compute_limit_hits,
                Error::ComputeLimit(format!(
                    "{what} of {ops} operations is over session {}'s limit of {} per dispatch",
                    self.id, l.max_ops_per_dispatch
                )),
            ));
        }
        let mut now = c.ops_total.load(Ordering::Relaxed);
        loop {
            let next = now.saturating_add(ops);
            if l.max_ops_total > 0 && next > l.max_ops_total {
                return Err(self.limit_hit(
                    &c.compute_limit_hits,
                    Error::ComputeLimit(format!(
                        "session {} has run {now} operations; {what} of {ops} more would pass its budget of {}",
                        self.id, l.max_ops_total
                    )),
                ));
            }
            match c.ops_total.compare_exchange_weak(now, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(actual) => now = actual,
            }
        }
    }

    /// Whether the session's passes must be timed (it has a GPU-time budget).
    pub(crate) fn has_gpu_budget(&self) -> bool {
        self.limits.max_gpu_time_ms > 0
    }

    /// COMPUTE_LIMIT once the GPU time charged so far reached the session's budget.
    pub(crate) fn check_gpu_budget(&self) -> Result<()> {
        let budget_ms = self.limits.max_gpu_time_ms;
        if budget_ms == 0 {
            return Ok(());
        }
        let used = self.counters.gpu_time_ns.load(Ordering::Relaxed);
        if used < budget_ms.saturating_mul(1_000_000) {
            return Ok(());
        }
        self.counters.gpu_time_limit_hits.fetch_add(1, Ordering::Relaxed);
        Err(self.limit_hit(
            &self.counters.compute_limit_hits,
            Error::ComputeLimit(format!(
                "session {} has used {:.3} ms of GPU time, its budget of {budget_ms} ms (max_gpu_time_ms) is spent",
                self.id,
                used as f64 * 1e-6
            )),
        ))
    }

    /// Charges GPU time measured for one of the session's passes (or waits, see `SessionLimits`).
    pub(crate) fn charge_gpu_ns(&self, ns: u64) {
        self.counters.gpu_time_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Counts the bytes bound by one of the session's dispatches.
    pub(crate) fn record_bound_bytes(&self, bytes: u64) {
        self.counters.bound_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn kernel_compiled(&self) {
        self.counters.kernels_compiled.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn policy_rejected(&self) {
        self.counters.policy_rejections.fetch_add(1, Ordering::Relaxed);
    }

    /// A kernel of this session ran out of its loop budget (seen when its output is read).
    pub(crate) fn loop_budget_hit(&self, e: &Error) {
        let _ = self.limit_hit(&self.counters.compute_limit_hits, e.clone());
    }
}

/// The calling thread's current session's internals (the allocation and dispatch hooks).
pub(crate) fn current_inner() -> Option<Arc<SessionInner>> {
    CURRENT.with(|c| c.borrow().as_ref().map(|s| s.inner.clone()))
}

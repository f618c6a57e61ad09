//! Buffers and what they cost: allocation through the pool, the memory counters, poisoning
//! for tests, and giving cached memory back.

use super::Device;
use crate::pool::{size_class, Taken, DEFAULT_OWNER};
use crate::session::{BufferHome, SessionInner};
use crate::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const STORAGE_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::STORAGE.union(wgpu::BufferUsages::COPY_SRC).union(wgpu::BufferUsages::COPY_DST);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of every GPU buffer Kiln holds (live tensors, the pool, staging).
    pub allocated_bytes: u64,
    /// Bytes held by live tensors.
    pub in_use_bytes: u64,
    /// The highest `in_use_bytes` seen.
    pub peak_bytes: u64,
    pub live_buffers: u64,
    /// Bytes kept in the pool for reuse.
    pub pooled_bytes: u64,
}

#[derive(Default)]
pub(super) struct Mem {
    pub(super) allocated: AtomicU64,
    pub(super) in_use: AtomicU64,
    pub(super) peak: AtomicU64,
    pub(super) live: AtomicU64,
}

/// A GPU buffer owned by a tensor; goes back to the pool on drop (or was freed earlier, when
/// the session that owned it closed).
pub(crate) struct GpuBuffer {
    pub(crate) buffer: Option<wgpu::Buffer>,
    pub(crate) class: u64,
    device: Arc<Device>,
    /// The session it was allocated in (None: the default session) and its id there.
    owner: Option<(Arc<SessionInner>, u64)>,
    /// Set by a sandboxed kernel that wrote this buffer: its loop-budget verdict, checked when
    /// the buffer is read (see `kernel`).
    pub(crate) verdict: std::sync::Mutex<Option<Arc<dyn Verdict>>>,
}

/// Whether the last writer of a buffer finished: Err(COMPUTE_LIMIT) when it stopped early.
pub(crate) trait Verdict: Send + Sync {
    fn check(&self) -> Result<()>;
    /// The browser cannot block: the buffer holding the verdict's words (on its device, and its
    /// size in bytes), to be read back with an `await` and handed to `settle` before `check`
    /// (None once settled).
    #[cfg(target_arch = "wasm32")]
    fn unsettled(&self) -> Option<(Arc<Device>, wgpu::Buffer, usize)>;
    #[cfg(target_arch = "wasm32")]
    fn settle(&self, words: &[u32]);
}

impl GpuBuffer {
    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("buffer present until drop")
    }

    /// INVALID_ARGUMENT once the owning session closed (its memory is gone); COMPUTE_LIMIT when
    /// the kernel that last wrote it ran out of its loop budget.
    pub(crate) fn check_readable(&self) -> Result<()> {
        if let Some((s, _)) = &self.owner {
            if s.is_closed() {
                return Err(Error::InvalidArgument(format!(
                    "this tensor belonged to session {}, which was closed: its memory was freed",
                    s.id()
                )));
            }
        }
        let v = self.verdict.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(v) = v {
            v.check()?;
            // Read once: the verdict does not change, and the buffer's next writer resets it.
            *self.verdict.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        Ok(())
    }
}

#[cfg(target_arch = "wasm32")]
impl GpuBuffer {
    /// Reads the last writer's loop-budget verdict back without blocking the page, so that
    /// `check_readable` then finds it decided (the blocking read is not available there).
    pub(crate) async fn settle_verdict_async(&self) -> Result<()> {
        let v = self.verdict.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(v) = v {
            if let Some((device, guard, nbytes)) = v.unsettled() {
                // The guard's own buffer has no verdict: read it directly (no recursion).
                let mut bytes = vec![0u8; nbytes];
                device.read_async(&guard, bytes.len() as u64, &mut bytes).await?;
                v.settle(&bytemuck::pod_collect_to_vec::<u8, u32>(&bytes));
            }
        }
        Ok(())
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            let d = &self.device;
            if let Some((s, id)) = &self.owner {
                if !s.release(*id) {
                    // Its session's close destroyed it and did the accounting.
                    d.unrevoke(&b);
                    return;
                }
            }
            d.mem.in_use.fetch_sub(self.class, Ordering::Relaxed);
            d.mem.live.fetch_sub(1, Ordering::Relaxed);
            let owner = self.owner.as_ref().map_or(DEFAULT_OWNER, |(s, _)| s.id());
            d.pool.release(self.class, STORAGE_USAGE, owner, b);
        }
    }
}

impl BufferHome for Device {
    fn revoke(&self, buffers: Vec<(wgpu::Buffer, u64)>) {
        {
            let mut revoked = self.revoked.lock().unwrap_or_else(|p| p.into_inner());
            revoked.extend(buffers.iter().map(|(b, _)| b.clone()));
            self.revoked_count.store(revoked.len(), Ordering::SeqCst);
        }
        // Commands recorded before the revocation may use these buffers: submit them first, so
        // that destroying a buffer cannot invalidate a batch other sessions' work is in (wgpu
        // keeps a destroyed buffer's memory until the submissions using it are done).
        let _ = self.flush();
        for (b, class) in buffers {
            self.pool.destroy(b);
            self.mem.allocated.fetch_sub(class, Ordering::Relaxed);
            self.mem.in_use.fetch_sub(class, Ordering::Relaxed);
            self.mem.live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Device {
    /// The largest tensor one buffer can hold on this device, in bytes.
    pub fn max_tensor_bytes(&self) -> u64 {
        self.limits.max_buffer_size.min(self.limits.max_storage_buffer_binding_size)
    }

    /// A buffer of at least `bytes`. With `gpu_written`, the first write will be a GPU command
    /// recorded after this call, so a buffer freed earlier in the open batch may be reused; a
    /// buffer the host will upload into (`queue.write_buffer` runs before the batch) may not.
    pub(crate) fn alloc(self: &Arc<Device>, bytes: u64, gpu_written: bool) -> Result<GpuBuffer> {
        self.alloc_counted(bytes, gpu_written).map_err(crate::stats::counters::count_error)
    }

    fn alloc_counted(self: &Arc<Device>, bytes: u64, gpu_written: bool) -> Result<GpuBuffer> {
        self.check_alive()?;
        let Some(session) = crate::session::current_inner() else {
            return self.alloc_in(bytes, gpu_written, None, DEFAULT_OWNER);
        };
        let class = self.class_of(bytes);
        session.charge_bytes(class)?;
        let mut buf = match self.alloc_in(bytes, gpu_written, Some(class), session.id()) {
            Ok(b) => b,
            Err(e) => {
                session.uncharge_bytes(class);
                return Err(e);
            }
        };
        let id = crate::session::next_buffer_id();
        let home: Arc<dyn BufferHome> = self.clone();
        if let Err(e) = session.adopt(id, buf.raw(), buf.class, home) {
            // Closed meanwhile: the buffer goes back as if the default session had dropped it.
            session.uncharge_bytes(class);
            return Err(e);
        }
        buf.owner = Some((session, id));
        Ok(buf)
    }

    fn class_of(&self, bytes: u64) -> u64 {
        let max = self.max_tensor_bytes();
        size_class(bytes).min(max.max(16)).max(bytes.next_multiple_of(4))
    }

    /// Allocation proper; `class` was computed by the caller when it charged a session, `owner`
    /// is whose bytes the buffer will hold (`pool::DEFAULT_OWNER` for the default session).
    fn alloc_in(
        self: &Arc<Device>,
        bytes: u64,
        gpu_written: bool,
        class: Option<u64>,
        owner: u64,
    ) -> Result<GpuBuffer> {
        let max = self.max_tensor_bytes();
        if bytes > max {
            return Err(Error::OutOfMemory(format!(
                "a buffer of {bytes} bytes is over this device's limit of {max} bytes per buffer"
            )));
        }
        let class = class.unwrap_or_else(|| self.class_of(bytes));
        let poison = self.poison.load(Ordering::Relaxed);
        let reused = self.pool.take_for(class, STORAGE_USAGE, owner).or_else(|| {
            (gpu_written && !poison).then(|| self.pool.take_deferred(class, STORAGE_USAGE, owner)).flatten()
        });
        let buffer = match reused {
            Some(Taken { buffer, foreign: false }) => buffer,
            Some(Taken { buffer, foreign: true }) => {
                self.clear_foreign(&buffer, bytes, class, gpu_written);
                buffer
            }
            None => {
                let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: class,
                    usage: STORAGE_USAGE,
                    mapped_at_creation: false,
                });
                crate::platform::check_scope(scope, move |e| {
                    Error::OutOfMemory(format!("allocating {class} bytes failed: {e}"))
                })?;
                self.mem.allocated.fetch_add(class, Ordering::Relaxed);
                b
            }
        };
        if poison {
            self.queue.write_buffer(&buffer, 0, &vec![0xFF; class as usize]);
        }
        let now = self.mem.in_use.fetch_add(class, Ordering::Relaxed) + class;
        self.mem.peak.fetch_max(now, Ordering::Relaxed);
        self.mem.live.fetch_add(1, Ordering::Relaxed);
        Ok(GpuBuffer { buffer: Some(buffer), class, device: self.clone(), owner: None, verdict: Default::default() })
    }

    /// Zeroes a pooled buffer whose bytes were another owner's (another session's, or the default
    /// session's) before its new owner can read them (issue 28). A buffer that GPU commands will
    /// write (`empty()` and every op's output) is cleared by a command recorded in the open
    /// batch: after every earlier reader of its old contents (it may come from the batch's own
    /// freed buffers) and before any command of the new owner. A buffer the host uploads into is
    /// idle, and the upload (`queue.write_buffer`, which runs before the batch) overwrites its
    /// first `bytes` rounded up to a word: only the rest of its size class is zeroed, by a fill
    /// submitted before the upload's writes.
    ///
    /// The cost (`cargo test --release -p kiln-core --test pool_owners -- --ignored
    /// clearing_cost --nocapture`; lavapipe on a shared 2-core machine, ms, median of 20; two
    /// runs differed by up to 2x at 64 MiB):
    ///
    /// | bytes  | `empty()`: own / another's (cleared) / new | + first full read: own / another's / new | upload: own / another's |
    /// |--------|--------------------------|----------------------|---------------|
    /// | 4 KiB  | 0.002 / 0.038 / 0.014    | 0.043 / 0.028 / 0.036 | 0.016 / 0.043 |
    /// | 256 KiB| 0.001 / 0.028 / 0.007    | 0.041 / 0.044 / 0.056 | 0.026 / 0.054 |
    /// | 4 MiB  | 0.001 / 0.069 / 0.007    | 0.34 / 0.52 / 0.48    | 0.22 / 0.29   |
    /// | 64 MiB | 0.001 / 1.4-3.0 / 0.013  | 68 / 72 / 233         | 19.6 / 18.3   |
    ///
    /// (A new buffer looks free until first used: wgpu zero-fills it then, hence its read column.)
    /// A buffer of the asker's own is handed out as before, without a clear, so a program that
    /// never mixes sessions (or one session's steady state) pays nothing. Clearing on reuse was
    /// chosen over a pool per owner: a pool per owner keeps freed memory away from every other
    /// session (a closed session's buffers would be new allocations for everyone else, and
    /// wgpu zero-fills every new buffer anyway, at about the same cost as the clear).
    fn clear_foreign(&self, buffer: &wgpu::Buffer, bytes: u64, class: u64, gpu_written: bool) {
        if gpu_written {
            return self.clear(buffer);
        }
        let covered = bytes.next_multiple_of(4).min(class);
        if covered < class {
            // Submitted now, so that it runs before the upload's writes (queued for the next
            // submit): a GPU fill, not a host buffer of zeros copied through staging (that cost
            // 8 ms more for a 48 MiB upload into a 64 MiB class on lavapipe, this ~1 ms).
            let mut enc = self.device.create_command_encoder(&Default::default());
            enc.clear_buffer(buffer, covered, Some(class - covered));
            self.queue.submit([enc.finish()]);
        }
    }

    /// Stops refusing `buffer` (its last handle is gone, its id may be reused).
    fn unrevoke(&self, buffer: &wgpu::Buffer) {
        let mut revoked = self.revoked.lock().unwrap_or_else(|p| p.into_inner());
        revoked.remove(buffer);
        self.revoked_count.store(revoked.len(), Ordering::SeqCst);
    }

    /// INVALID_ARGUMENT when a buffer about to be used belonged to a closed session. Called with
    /// the batch lock held, so that nothing recorded after a revocation names a revoked buffer.
    pub(super) fn check_not_revoked<'a>(&self, buffers: impl IntoIterator<Item = &'a wgpu::Buffer>) -> Result<()> {
        if self.revoked_count.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        let revoked = self.revoked.lock().unwrap_or_else(|p| p.into_inner());
        if buffers.into_iter().any(|b| revoked.contains(b)) {
            return Err(Error::InvalidArgument(
                "a tensor given belonged to a session that was closed: its memory was freed".into(),
            ));
        }
        Ok(())
    }

    /// Test aid: fill every buffer handed to a tensor with 0xFF bytes (NaN for floats), so a
    /// kernel that leaves an element unwritten is caught. Also on with `KILN_POISON=1`.
    pub fn set_poison_allocations(&self, on: bool) {
        self.poison.store(on, Ordering::Relaxed);
    }

    pub fn memory_stats(&self) -> MemoryStats {
        MemoryStats {
            allocated_bytes: self.mem.allocated.load(Ordering::Relaxed),
            in_use_bytes: self.mem.in_use.load(Ordering::Relaxed),
            peak_bytes: self.mem.peak.load(Ordering::Relaxed),
            live_buffers: self.mem.live.load(Ordering::Relaxed),
            pooled_bytes: self.pool.cached_bytes(),
        }
    }

    /// Starts `peak_bytes` again from what is in use now (as torch.cuda.reset_peak_memory_stats),
    /// so one phase of a program can be measured on its own.
    pub fn reset_peak_memory(&self) {
        self.mem.peak.store(self.mem.in_use.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Gives every pooled buffer back to the driver, and drops the cached user-kernel pipelines
    /// that no live `Kernel` holds.
    pub fn empty_cache(&self) {
        let freed = self.pool.clear();
        self.mem.allocated.fetch_sub(freed, Ordering::Relaxed);
        self.forget_destroyed();
        self.pipelines.evict_unused_user();
        // Some drivers (lavapipe) free destroyed pipelines only at the next submission.
        self.submit_now();
    }
}

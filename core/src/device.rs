//! One device: its queue, the open command batch, the poller, the buffer pool, the pipeline
//! cache and the memory accounting. Everything that talks to wgpu for execution lives here.

use crate::gpu_timer::{summarize, GpuTime, Timer};
use crate::pipeline::{Checks, Pipeline, PipelineCache, PipelineStats};
use crate::pool::{size_class, Pool};
use crate::runtime::AdapterInfo;
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Dispatches recorded before the batch is submitted on its own.
const MAX_BATCH_DISPATCHES: usize = 1024;
/// Early submits, so that the GPU starts on big work while the host records what follows: the
/// first once the batch's dispatches have bound this many bytes, each next one after twice as
/// many as the last (up to `FLUSH_GROWTH` times this), back to the start whenever the host
/// waits for the GPU. A submit costs the host ~50 µs and the GPU a short gap (measured on the
/// H200: submitting every 256 MiB cost big ops 15-30%), so a long queue of big work gets a few
/// submits, not one per op (and a chain of small ops one after 256 of them, see
/// `DISPATCH_FLOOR_BYTES`).
/// `KILN_FLUSH_BYTES` overrides the first threshold (0: no early submits).
const FLUSH_BYTES: u64 = 256 << 20;
/// Each dispatch counts as at least this many bytes: a dispatch costs the GPU ~2 µs however
/// little it touches (measured on the H200: 1000 dependent tiny ops, 2.1 µs each), so a long
/// chain of small ops also gets an early submit (after 256 of them) and runs while the host
/// records the rest.
const DISPATCH_FLOOR_BYTES: u64 = 1 << 20;
const FLUSH_GROWTH: u64 = 16;
/// How long a waiter checks for its result without blocking before it parks on its channel.
/// Measured on the H200, one tiny op + synchronize: 91-109 µs parked on the channel at once
/// (two thread wake-ups through the poller), 41-53 µs with this check first.
/// `KILN_WAIT_SPIN_US` overrides it (0: park at once, no core spent checking).
const SPIN: Duration = Duration::from_micros(200);
/// Largest parameter block one dispatch may carry.
pub(crate) const MAX_PARAMS_BYTES: usize = 1024;

const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);
const STAGING_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::MAP_READ.union(wgpu::BufferUsages::COPY_DST);

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
struct Mem {
    allocated: AtomicU64,
    in_use: AtomicU64,
    peak: AtomicU64,
    live: AtomicU64,
}

struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    dispatches: usize,
    /// Bytes bound by the dispatches recorded since the last submit (see `FLUSH_BYTES`).
    bound_bytes: u64,
    /// The bound bytes at which the next early submit happens (0: never).
    flush_at: u64,
    params: Vec<u8>,
    /// While a GPU timer runs, each pass opened writes begin/end timestamps into it.
    timer: Option<Timer>,
}

/// A GPU buffer owned by a tensor; goes back to the pool on drop.
pub(crate) struct GpuBuffer {
    pub(crate) buffer: Option<wgpu::Buffer>,
    pub(crate) class: u64,
    device: Arc<Device>,
}

impl GpuBuffer {
    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("buffer present until drop")
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            let d = &self.device;
            d.mem.in_use.fetch_sub(self.class, Ordering::Relaxed);
            d.mem.live.fetch_sub(1, Ordering::Relaxed);
            d.pool.release(self.class, STORAGE_USAGE, b);
        }
    }
}

/// One buffer bound to a dispatch at `slot`: the whole buffer, or its first `size` bytes.
pub(crate) struct Binding<'a> {
    pub(crate) slot: u32,
    pub(crate) buffer: &'a wgpu::Buffer,
    pub(crate) size: Option<u64>,
}

struct Poller {
    pending: Mutex<usize>,
    wake: Condvar,
}

pub struct Device {
    pub(crate) info: AdapterInfo,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) limits: wgpu::Limits,
    pub(crate) features: wgpu::Features,
    /// The adapter's cooperative-matrix configurations (empty without the feature).
    pub(crate) coop_props: Vec<wgpu::CooperativeMatrixProperties>,
    /// The subgroup size where the adapter has only one (NVIDIA: 32).
    pub(crate) subgroup_size: Option<u32>,
    batch: Mutex<Batch>,
    params_buffer: wgpu::Buffer,
    params_capacity: usize,
    pub(crate) pool: Pool,
    pub(crate) pipelines: PipelineCache,
    mem: Mem,
    lost: Arc<AtomicBool>,
    lost_reason: Arc<Mutex<String>>,
    uncaptured: Arc<Mutex<Vec<String>>>,
    poller: Arc<Poller>,
    timeout: Duration,
    poison: AtomicBool,
    flush_bytes: u64,
    /// How long a waiter checks before it parks (`SPIN`).
    wait_spin: Duration,
    /// Held by whoever polls the device (the poller, or a waiter's non-blocking check): wgpu-core
    /// 30 panics when two polls retire the same submissions concurrently.
    poll_lock: Mutex<()>,
    /// The index of the latest submit, which the poller waits on.
    last_submission: Mutex<Option<wgpu::SubmissionIndex>>,
}

impl Device {
    pub(crate) fn create(adapter: &wgpu::Adapter, info: AdapterInfo) -> Result<Arc<Device>> {
        let wanted = wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP;
        let mut features = adapter.features() & wanted;
        // Cooperative matrices (tensor cores) only where the adapter offers them; the feature is
        // experimental in wgpu 30, so it needs the opt-in token, asked for only in that case.
        // Only the f16 matmul uses it (ops/matmul.rs), behind its own checks and tests.
        let coop = adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && std::env::var_os("KILN_NO_COOP").is_none();
        let coop_props = if coop { adapter.cooperative_matrix_properties() } else { Vec::new() };
        let experimental = if coop && !coop_props.is_empty() {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            // SAFETY: opting in to wgpu's experimental cooperative-matrix API, used only by the
            // f16 matmul kernel, whose results the test-suite checks against a CPU reference.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let ainfo = adapter.get_info();
        let subgroup_size = (ainfo.subgroup_min_size == ainfo.subgroup_max_size).then_some(ainfo.subgroup_min_size);
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("kiln"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| Error::NoAdapter(format!("cannot open a device on {}: {e}", info.name)))?;

        let lost = Arc::new(AtomicBool::new(false));
        let lost_reason = Arc::new(Mutex::new(String::new()));
        let poller = Arc::new(Poller { pending: Mutex::new(0), wake: Condvar::new() });
        {
            let (lost, reason, poller) = (lost.clone(), lost_reason.clone(), poller.clone());
            device.set_device_lost_callback(move |r, msg| {
                // Keep the first reason (`destroy` records its own before wgpu reports it).
                let mut reason = reason.lock().unwrap_or_else(|p| p.into_inner());
                if reason.is_empty() {
                    *reason = format!("{r:?}: {msg}");
                }
                lost.store(true, Ordering::SeqCst);
                poller.wake.notify_all();
            });
        }
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        {
            let sink = uncaptured.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                sink.lock().unwrap().push(e.to_string());
            }));
        }
        // Parameter blocks of one batch share one uniform buffer, written once at submit.
        let params_capacity = 1 << 20;
        let params_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln params"),
            size: params_capacity as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let flush_bytes = std::env::var("KILN_FLUSH_BYTES").ok().and_then(|s| s.parse().ok()).unwrap_or(FLUSH_BYTES);
        let timeout_ms = std::env::var("KILN_TIMEOUT_MS").ok().and_then(|s| s.parse().ok()).unwrap_or(600_000);
        // Keep at most a quarter of the largest buffer's worth (and at most 4 GiB) in the pool.
        let pool_cap = (limits.max_buffer_size / 4).clamp(64 << 20, 4 << 30);
        let dev = Arc::new(Device {
            info,
            device,
            queue,
            limits,
            features,
            coop_props,
            subgroup_size,
            batch: Mutex::new(Batch {
                encoder: None,
                pass: None,
                dispatches: 0,
                bound_bytes: 0,
                flush_at: flush_bytes,
                params: Vec::new(),
                timer: None,
            }),
            params_buffer,
            params_capacity,
            pool: Pool::new(pool_cap),
            pipelines: PipelineCache::default(),
            mem: Mem::default(),
            lost,
            lost_reason,
            uncaptured,
            poller,
            timeout: Duration::from_millis(timeout_ms),
            poison: AtomicBool::new(std::env::var_os("KILN_POISON").is_some()),
            flush_bytes,
            wait_spin: std::env::var("KILN_WAIT_SPIN_US").ok().and_then(|s| s.parse().ok()).map_or(SPIN, Duration::from_micros),
            poll_lock: Mutex::new(()),
            last_submission: Mutex::new(None),
        });
        Self::start_poller(&dev);
        Ok(dev)
    }

    /// The one thread that waits on the device; callers wait on channels.
    fn start_poller(dev: &Arc<Device>) {
        let weak = Arc::downgrade(dev);
        let poller = dev.poller.clone();
        std::thread::Builder::new()
            .name("kiln-poller".into())
            .spawn(move || loop {
                {
                    let mut pending = poller.pending.lock().unwrap_or_else(|p| p.into_inner());
                    while *pending == 0 {
                        let (p, _) = poller.wake.wait_timeout(pending, Duration::from_secs(1)).unwrap_or_else(|p| p.into_inner());
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
                    // Wait on the submission index Kiln recorded, not on "the latest": wgpu-core can
                    // panic ("current submission index should be at least the wait submission
                    // index") when `None` races with a submit on another thread.
                    let last = dev.last_submission.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    match last {
                        Some(idx) => dev.device.poll(wgpu::PollType::Wait { submission_index: Some(idx), timeout: Some(Duration::from_millis(100)) }),
                        None => dev.device.poll(wgpu::PollType::Poll),
                    }
                }));
                drop(polling);
                if let Err(payload) = polled {
                    let e = Error::from_panic(payload);
                    dev.uncaptured.lock().unwrap_or_else(|p| p.into_inner()).push(format!("poll panicked: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
            .expect("kiln: cannot start the poller thread");
    }

    pub fn info(&self) -> &AdapterInfo {
        &self.info
    }

    pub fn has_f16(&self) -> bool {
        self.features.contains(wgpu::Features::SHADER_F16)
    }

    pub fn has_subgroups(&self) -> bool {
        self.features.contains(wgpu::Features::SUBGROUP)
    }

    /// Whether the device has wgpu's (experimental) cooperative matrices (tensor cores).
    /// `KILN_NO_COOP=1` turns them off.
    pub fn has_cooperative_matrix(&self) -> bool {
        self.features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
    }

    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Destroys this device now and gives its memory back: every later call on it or on its
    /// tensors returns DeviceLost, and the next `kiln_core::device()` creates a fresh device.
    /// For releasing the GPU early, and for fault drills (the same path as a real loss).
    pub fn destroy(&self) {
        *self.lost_reason.lock().unwrap_or_else(|p| p.into_inner()) = "destroyed on request".into();
        self.lost.store(true, Ordering::SeqCst);
        self.device.destroy();
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        if self.is_lost() {
            return Err(Error::DeviceLost(format!(
                "the device {} was lost ({}); the next call on a new tensor re-creates it",
                self.info.name,
                self.lost_reason.lock().unwrap()
            )));
        }
        Ok(())
    }

    /// Errors wgpu reported outside any scope since the last check.
    fn take_uncaptured(&self) -> Result<()> {
        let errs = std::mem::take(&mut *self.uncaptured.lock().unwrap());
        if errs.is_empty() {
            Ok(())
        } else {
            Err(Error::Internal(errs.join("; ")))
        }
    }

    /// The largest tensor one buffer can hold on this device, in bytes.
    pub fn max_tensor_bytes(&self) -> u64 {
        self.limits.max_buffer_size.min(self.limits.max_storage_buffer_binding_size)
    }

    /// A buffer of at least `bytes`. With `gpu_written`, the first write will be a GPU command
    /// recorded after this call, so a buffer freed earlier in the open batch may be reused; a
    /// buffer the host will upload into (`queue.write_buffer` runs before the batch) may not.
    pub(crate) fn alloc(self: &Arc<Device>, bytes: u64, gpu_written: bool) -> Result<GpuBuffer> {
        self.check_alive()?;
        let max = self.max_tensor_bytes();
        if bytes > max {
            return Err(Error::OutOfMemory(format!(
                "a buffer of {bytes} bytes is over this device's limit of {max} bytes per buffer"
            )));
        }
        let class = size_class(bytes).min(max.max(16)).max(bytes.next_multiple_of(4));
        let poison = self.poison.load(Ordering::Relaxed);
        let reused = self.pool.take(class, STORAGE_USAGE).or_else(|| {
            (gpu_written && !poison).then(|| self.pool.take_deferred(class, STORAGE_USAGE)).flatten()
        });
        let buffer = match reused {
            Some(b) => b,
            None => {
                let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: class,
                    usage: STORAGE_USAGE,
                    mapped_at_creation: false,
                });
                if let Some(e) = pollster::block_on(scope.pop()) {
                    return Err(Error::OutOfMemory(format!("allocating {class} bytes failed: {e}")));
                }
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
        Ok(GpuBuffer { buffer: Some(buffer), class, device: self.clone() })
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

    /// Gives every pooled buffer back to the driver, and drops the cached user-kernel pipelines
    /// that no live `Kernel` holds.
    pub fn empty_cache(&self) {
        let freed = self.pool.clear();
        self.mem.allocated.fetch_sub(freed, Ordering::Relaxed);
        self.pipelines.evict_unused_user();
        // Some drivers (lavapipe) free destroyed pipelines only at the next submission.
        if self.check_alive().is_ok() {
            self.queue.submit([]);
        }
    }

    pub fn pipeline_stats(&self) -> PipelineStats {
        self.pipelines.stats()
    }

    pub(crate) fn pipeline(&self, key: &str, checks: Checks, source: impl FnOnce() -> String) -> Result<Arc<Pipeline>> {
        self.check_alive()?;
        self.pipelines.get_or_compile(&self.device, key, "main", checks, source)
    }

    /// Host bytes into a buffer. Runs before any later-recorded GPU work (see `Pool`).
    pub(crate) fn upload(&self, buf: &GpuBuffer, data: &[u8]) -> Result<()> {
        self.check_alive()?;
        if data.is_empty() {
            return Ok(());
        }
        // In pieces: wgpu stages each write in its own host-visible allocation, and pieces of this
        // size come from its pooled memory blocks instead of a fresh mapping (and page faults)
        // the size of the whole tensor.
        // Big uploads spread the pieces over a few threads: one thread's copy into
        // write-combined staging memory tops out well below the bus.
        const PIECE: usize = 8 << 20;
        const THREADS: usize = 4;
        let whole = data.len() / 4 * 4;
        let pieces: Vec<usize> = (0..whole).step_by(PIECE).collect();
        let write = |start: usize| {
            let end = (start + PIECE).min(whole);
            self.queue.write_buffer(buf.raw(), start as u64, &data[start..end]);
        };
        if pieces.len() < 2 * THREADS {
            pieces.iter().for_each(|&p| write(p));
        } else {
            std::thread::scope(|scope| {
                for share in pieces.chunks(pieces.len().div_ceil(THREADS)) {
                    scope.spawn(|| share.iter().for_each(|&p| write(p)));
                }
            });
        }
        if whole < data.len() {
            let mut tail = data[whole..].to_vec();
            tail.resize(4, 0);
            self.queue.write_buffer(buf.raw(), whole as u64, &tail);
        }
        Ok(())
    }

    /// Records one dispatch into the open batch; `params` is a uniform block bound at its slot.
    pub(crate) fn dispatch(&self, pipe: &Pipeline, bindings: &[Binding<'_>], params: Option<(u32, &[u8])>, groups: [u32; 3]) -> Result<()> {
        self.check_alive()?;
        let max = self.limits.max_compute_workgroups_per_dimension;
        if groups.iter().any(|&g| g > max) {
            return Err(Error::InvalidArgument(format!("workgroup count {groups:?} is over this device's limit of {max} per dimension")));
        }
        if groups.contains(&0) {
            return Ok(());
        }
        let mut batch = self.batch.lock().unwrap();
        let align = (self.limits.min_uniform_buffer_offset_alignment as usize).max(16);
        let param_len = params.map_or(0, |(_, p)| p.len().next_multiple_of(16).max(16));
        if param_len > MAX_PARAMS_BYTES {
            return Err(Error::InvalidArgument(format!("uniform block of {param_len} bytes is over {MAX_PARAMS_BYTES}")));
        }
        if batch.dispatches >= MAX_BATCH_DISPATCHES || batch.params.len().next_multiple_of(align) + param_len > self.params_capacity {
            self.submit_locked(&mut batch)?;
        }
        let mut entries: Vec<wgpu::BindGroupEntry<'_>> = bindings
            .iter()
            .map(|b| wgpu::BindGroupEntry {
                binding: b.slot,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: b.buffer,
                    offset: 0,
                    size: b.size.map(|s| wgpu::BufferSize::new(s.max(4)).unwrap()),
                }),
            })
            .collect();
        if let Some((slot, p)) = params {
            let offset = batch.params.len().next_multiple_of(align);
            batch.params.resize(offset, 0);
            batch.params.extend_from_slice(p);
            batch.params.resize(offset + param_len, 0);
            entries.push(wgpu::BindGroupEntry {
                binding: slot,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.params_buffer,
                    offset: offset as u64,
                    size: wgpu::BufferSize::new(param_len as u64),
                }),
            });
        }
        let bind_group = pipe.layout.as_ref().map(|layout| self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout, entries: &entries }));
        let Batch { encoder, pass, timer, .. } = &mut *batch;
        let encoder = encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
        let pass = pass.get_or_insert_with(|| {
            let timestamp_writes = timer.as_mut().and_then(|t| t.next_pass());
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes }).forget_lifetime()
        });
        pass.set_pipeline(&pipe.pipeline);
        if let Some(bg) = &bind_group {
            pass.set_bind_group(0, bg, &[]);
        }
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        batch.dispatches += 1;
        let bound = bindings.iter().map(|b| b.size.unwrap_or_else(|| b.buffer.size())).sum::<u64>();
        batch.bound_bytes += bound.max(DISPATCH_FLOOR_BYTES);
        if batch.flush_at > 0 && batch.bound_bytes >= batch.flush_at {
            batch.flush_at = (batch.flush_at * 2).min(self.flush_bytes * FLUSH_GROWTH);
            self.submit_locked(&mut batch)?;
        }
        Ok(())
    }

    /// Records a buffer-to-buffer copy in the batch, after every dispatch recorded so far.
    pub(crate) fn copy(&self, src: &wgpu::Buffer, src_off: u64, dst: &wgpu::Buffer, dst_off: u64, bytes: u64) -> Result<()> {
        self.check_alive()?;
        if bytes == 0 {
            return Ok(());
        }
        let mut batch = self.batch.lock().unwrap();
        batch.pass = None;
        let enc = batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
        enc.copy_buffer_to_buffer(src, src_off, dst, dst_off, bytes);
        batch.dispatches += 1;
        Ok(())
    }

    fn submit_locked(&self, batch: &mut Batch) -> Result<Option<wgpu::SubmissionIndex>> {
        batch.pass = None;
        let Some(encoder) = batch.encoder.take() else {
            // Nothing recorded: buffers freed since the last submit have no pending reader.
            let destroyed = self.pool.on_submit();
            self.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
            return Ok(None);
        };
        if !batch.params.is_empty() {
            self.queue.write_buffer(&self.params_buffer, 0, &batch.params);
            batch.params.clear();
        }
        batch.dispatches = 0;
        batch.bound_bytes = 0;
        let idx = self.queue.submit([encoder.finish()]);
        *self.last_submission.lock().unwrap_or_else(|p| p.into_inner()) = Some(idx.clone());
        let destroyed = self.pool.on_submit();
        self.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
        self.take_uncaptured()?;
        Ok(Some(idx))
    }

    /// Submits the open batch without waiting.
    pub fn flush(&self) -> Result<()> {
        self.check_alive()?;
        let mut batch = self.batch.lock().unwrap();
        self.submit_locked(&mut batch).map(|_| ())
    }

    /// Waits for a callback-fed channel through the poller thread.
    fn wait<T>(&self, rx: mpsc::Receiver<T>) -> Result<T> {
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
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.device.poll(wgpu::PollType::Poll)));
            }
            drop(guard);
            // Leave the core to others between checks (a software adapter computes on the CPU).
            std::thread::yield_now();
        }
        let out = match early {
            Some(v) => Ok(v),
            None => {
                *self.poller.pending.lock().unwrap() += 1;
                self.poller.wake.notify_all();
                let out = rx.recv_timeout(self.timeout.saturating_sub(start.elapsed()));
                *self.poller.pending.lock().unwrap() -= 1;
                out
            }
        };
        // The host waited for the GPU: the next queue of work starts with an early submit again.
        self.batch.lock().unwrap().flush_at = self.flush_bytes;
        match out {
            Ok(v) => Ok(v),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.check_alive()?;
                Err(Error::Timeout(format!("GPU work did not finish within {:?} (KILN_TIMEOUT_MS)", self.timeout)))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.check_alive()?;
                Err(Error::Internal("the GPU callback was dropped".into()))
            }
        }
    }

    /// Submits everything queued and waits until the GPU has finished it.
    pub fn synchronize(&self) -> Result<()> {
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
        self.take_uncaptured()
    }

    /// Starts timing GPU work with timestamp queries: every compute pass recorded from now on
    /// writes its begin and end time. Returns false (and times nothing) where the adapter has no
    /// timestamp queries. Work recorded before this call is submitted first and not counted.
    /// One timer per device at a time (InvalidArgument otherwise); passes other threads record
    /// meanwhile are timed too.
    pub fn start_gpu_timer(&self) -> Result<bool> {
        self.check_alive()?;
        if !self.features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Ok(false);
        }
        let mut batch = self.batch.lock().unwrap();
        if batch.timer.is_some() {
            return Err(Error::InvalidArgument("a GPU timer is already running on this device (one at a time)".into()));
        }
        self.submit_locked(&mut batch)?;
        batch.timer = Some(Timer::new(&self.device));
        Ok(true)
    }

    /// Waits for the work recorded since `start_gpu_timer` and returns how long the GPU took.
    /// None when no timer ran, no pass was recorded, or more passes ran than one timer can hold
    /// (`Timer::CAPACITY / 2`).
    pub fn stop_gpu_timer(self: &Arc<Device>) -> Result<Option<GpuTime>> {
        self.check_alive()?;
        let resolved = {
            let mut batch = self.batch.lock().unwrap();
            // Close the open pass so that its end timestamp is written before the resolve.
            batch.pass = None;
            let Some(timer) = batch.timer.take() else { return Ok(None) };
            if timer.used == 0 || timer.overflowed {
                return Ok(None);
            }
            let bytes = timer.used as u64 * wgpu::QUERY_SIZE as u64;
            let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kiln timer resolve"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let enc = batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
            enc.resolve_query_set(&timer.set, 0..timer.used, &buf, 0);
            (buf, bytes)
        };
        let (buf, bytes) = resolved;
        let mut raw = vec![0u8; bytes as usize];
        self.read(&buf, bytes, &mut raw)?;
        let ticks: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        Ok(summarize(&ticks, self.queue.get_timestamp_period() as f64))
    }

    /// Copies `bytes` bytes of `src` back to the host (submits the batch first).
    pub(crate) fn read(self: &Arc<Device>, src: &wgpu::Buffer, bytes: u64, out: &mut [u8]) -> Result<()> {
        self.check_alive()?;
        if bytes == 0 {
            return Ok(());
        }
        let padded = bytes.next_multiple_of(4);
        let class = size_class(padded);
        let staging = match self.pool.take(class, STAGING_USAGE) {
            Some(b) => b,
            None => {
                self.mem.allocated.fetch_add(class, Ordering::Relaxed);
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("kiln staging"),
                    size: class,
                    usage: STAGING_USAGE,
                    mapped_at_creation: false,
                })
            }
        };
        {
            let mut batch = self.batch.lock().unwrap();
            batch.pass = None;
            let enc = batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
            enc.copy_buffer_to_buffer(src, 0, &staging, 0, padded);
            self.submit_locked(&mut batch)?;
        }
        let (tx, rx) = mpsc::channel();
        staging.slice(..padded).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let mapped = self.wait(rx)?;
        mapped.map_err(|e| Error::Internal(format!("mapping the staging buffer failed: {e}")))?;
        {
            let view = staging
                .slice(..padded)
                .get_mapped_range()
                .map_err(|e| Error::Internal(format!("reading the staging buffer failed: {e}")))?;
            copy_parallel(&mut out[..bytes as usize], &view[..bytes as usize]);
        }
        staging.unmap();
        let destroyed = self.pool.release_idle(class, STAGING_USAGE, staging);
        self.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
        self.take_uncaptured()
    }
}

/// Splits `groups` workgroups over x and y so that neither exceeds the per-dimension limit.
/// Kernels rebuild the linear index as `gid.x + gid.y * num_workgroups.x * WG`.
pub(crate) fn grid(groups: u64, max_per_dim: u32) -> Result<[u32; 3]> {
    let max = max_per_dim as u64;
    if groups <= max {
        return Ok([groups as u32, 1, 1]);
    }
    let y = groups.div_ceil(max);
    if y > max {
        return Err(Error::InvalidArgument(format!("{groups} workgroups are more than this device can dispatch")));
    }
    let x = groups.div_ceil(y);
    Ok([x as u32, y as u32, 1])
}

/// `dst.copy_from_slice(src)`, by up to four threads for big copies: one thread's copy out of
/// mapped staging memory (and into freshly faulted pages) tops out far below the bus.
fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    const PIECE: usize = 8 << 20;
    const THREADS: usize = 4;
    if dst.len() < 2 * THREADS * PIECE {
        dst.copy_from_slice(src);
        return;
    }
    let share = dst.len().div_ceil(THREADS);
    std::thread::scope(|scope| {
        for (d, s) in dst.chunks_mut(share).zip(src.chunks(share)) {
            scope.spawn(move || d.copy_from_slice(s));
        }
    });
}

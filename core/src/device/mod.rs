//! One device: its queue, the open command batch, the poller, the buffer pool, the pipeline
//! cache and the memory accounting. Everything that talks to wgpu for execution lives in this
//! module, one concept per file: `batch` (recording, submits and the flush policy), `wait` (the
//! poller, waits, timeouts), `memory` (allocation and accounting), `transfer` (upload and
//! readback), `readback` (readbacks collected later), `timing` (GPU timers).

mod batch;
mod bind_cache;
pub(crate) mod capture;
mod counters;
mod memory;
mod op_timing;
mod param_ring;
mod readback;
mod timing;
mod transfer;
mod wait;
#[cfg(target_arch = "wasm32")]
mod wait_web;

pub use batch::SubmitPhases;
pub use bind_cache::{BindGroupStats, BIND_GROUP_CACHE_ENTRIES};
pub use memory::MemoryStats;
pub(crate) use memory::{GpuBuffer, Verdict};
pub use readback::PendingRead;
pub use wait::DEFAULT_TIMEOUT_MS;

use crate::adapter::AdapterInfo;
use crate::env::env_or;
use crate::pipeline::{Checks, Pipeline, PipelineCache, PipelineStats};
use crate::pool::Pool;
use crate::{Error, Result};
use batch::{Batch, PhaseClock, FLUSH_BYTES};
use memory::Mem;
use param_ring::{ParamRing, RING_BUFFERS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use wait::{Poller, SPIN};

/// Largest parameter block one dispatch may carry.
/// Dispatches recorded before the batch is submitted on its own.
pub(crate) const MAX_BATCH_DISPATCHES: usize = 1024;
pub(crate) const MAX_PARAMS_BYTES: usize = 1024;

/// One buffer bound to a dispatch at `slot`: the whole buffer, or its first `size` bytes.
pub(crate) struct Binding<'a> {
    pub(crate) slot: u32,
    pub(crate) buffer: &'a wgpu::Buffer,
    pub(crate) size: Option<u64>,
}

// The poller's and the blocking wait's fields are unused in the page (`wait_web`).
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
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
    /// What the native kernel tier may use here (`crate::native`).
    pub(crate) native: crate::native::NativeCaps,
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
    /// This device's own Arc, for `abandon`.
    me: std::sync::Weak<Device>,
    /// Buffers of closed sessions whose handles callers still hold (see `BufferHome::revoke`),
    /// and how many (read without the lock on every dispatch).
    revoked: Mutex<std::collections::HashSet<wgpu::Buffer>>,
    revoked_count: std::sync::atomic::AtomicUsize,
    /// Per-op timestamps submitted but not yet read (`op_timing`).
    pending_times: op_timing::PendingTimes,
    /// Mapped uniform buffers for short batches' parameter blocks (`param_ring`).
    param_ring: ParamRing,
    ring_dispatches: std::sync::atomic::AtomicU64,
    phases: PhaseClock,
    /// Zeroed counters for kernels that reset them themselves (`counters`).
    counters: counters::Counters,
    /// Native modules whose pipeline the driver refused on this device (`native_kernels`): the
    /// ops' automatic choice skips them from then on instead of failing every call.
    pub(crate) native_refused: Mutex<Vec<&'static str>>,
}

/// Every device created and not yet dropped, for the metrics (which must not create one).
static DEVICES: Mutex<Vec<std::sync::Weak<Device>>> = Mutex::new(Vec::new());

/// The devices this process has open (not lost), oldest first.
pub fn live_devices() -> Vec<Arc<Device>> {
    let mut all = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|w| w.strong_count() > 0);
    all.iter().filter_map(|w| w.upgrade()).filter(|d| !d.is_lost()).collect()
}

impl Device {
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn create(adapter: &wgpu::Adapter, info: AdapterInfo) -> Result<Arc<Device>> {
        crate::platform::block_on(Self::create_async(adapter, info))
    }

    /// Opens a device on `adapter` (awaited in the browser, blocked on natively by `create`).
    pub(crate) async fn create_async(adapter: &wgpu::Adapter, info: AdapterInfo) -> Result<Arc<Device>> {
        let _creation = crate::startup::span("device creation");
        let mut wanted = wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP;
        // Native only (the web has no such feature): host-written parameter buffers. wgpu logs a
        // warning for it on discrete GPUs (mapped primary buffers live in host-visible memory);
        // only the ring's small uniform buffers are created mappable.
        let ring_buffers = env_or("KILN_PARAM_RING", RING_BUFFERS);
        if ring_buffers > 0 {
            wanted |= wgpu::Features::MAPPABLE_PRIMARY_BUFFERS;
        }
        // The driver's pipeline cache, kept on disk between processes (`persistent_cache`).
        #[cfg(not(target_arch = "wasm32"))]
        if !crate::persistent_cache::disabled() {
            wanted |= wgpu::Features::PIPELINE_CACHE;
        }
        let mut features = adapter.features() & wanted;
        // Lets the wall-clock fallbacks of profiles and GPU budgets be tried on any adapter.
        if crate::platform::env_var("KILN_NO_TIMESTAMPS").is_some() {
            features.remove(wgpu::Features::TIMESTAMP_QUERY);
        }
        // Cooperative matrices (tensor cores) only where the adapter offers them; the feature is
        // experimental in wgpu 30, so it needs the opt-in token, asked for only in that case.
        // Only the f16 matmul uses it (ops/matmul.rs), behind its own checks and tests.
        let coop = adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && crate::platform::env_var("KILN_NO_COOP").is_none();
        let coop_props = if coop {
            crate::startup::time("cooperative-matrix properties", || adapter.cooperative_matrix_properties())
        } else {
            Vec::new()
        };
        let experimental = if coop && !coop_props.is_empty() {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            // SAFETY: opting in to wgpu's experimental cooperative-matrix API, used only by the
            // f16 matmul kernel, whose results the test-suite checks against a CPU reference.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        features |= crate::native::wanted_features(adapter.features());
        let ainfo = adapter.get_info();
        let subgroup_size = (ainfo.subgroup_min_size == ainfo.subgroup_max_size).then_some(ainfo.subgroup_min_size);
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("kiln"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        // NV cooperative matrix 2 for the native tier where the Vulkan driver has it (a device
        // opened through wgpu-hal, crate::native_cm2); any failure there opens the device below,
        // as on every other adapter.
        #[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
        let cm2 = crate::startup::time("device open through wgpu-hal (VK_NV_cooperative_matrix2)", || {
            crate::native_cm2::open(adapter, &desc)
        });
        #[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
        let cm2: std::result::Result<
            (wgpu::Device, wgpu::Queue, Option<crate::native::Cm2Caps>, String),
            String,
        > = Err("no Vulkan backend on this target".into());
        let (device, queue, cm2_caps, cm2_note) = match cm2 {
            Ok(opened) => opened,
            Err(why) => {
                let _open = crate::startup::span("request_device");
                let (device, queue) = adapter
                    .request_device(&desc)
                    .await
                    .map_err(|e| Error::NoAdapter(format!("cannot open a device on {}: {e}", info.name)))?;
                (device, queue, None, format!("off: {why}"))
            }
        };

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
        let flush_bytes = env_or("KILN_FLUSH_BYTES", FLUSH_BYTES);
        // 0 would time every wait out at once and give the device up: it means the default.
        let timeout_ms = match env_or("KILN_TIMEOUT_MS", DEFAULT_TIMEOUT_MS) {
            0 => DEFAULT_TIMEOUT_MS,
            ms => ms,
        };
        // Keep at most a quarter of the largest buffer's worth (and at most 4 GiB) in the pool.
        let pool_cap = (limits.max_buffer_size / 4).clamp(64 << 20, 4 << 30);
        #[cfg(not(target_arch = "wasm32"))]
        let persistent = crate::persistent_cache::PersistentCache::open(&device, &ainfo);
        let native = crate::startup::time("native tier probe", || {
            crate::native::probe(features, &coop_props, subgroup_size, cm2_caps, cm2_note)
        });
        let dev = Arc::new_cyclic(|me| Device {
            me: me.clone(),
            info,
            device,
            queue,
            limits,
            features,
            native,
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
                op_times: None,
                ring: None,
                ring_ok: true,
                recorded: 0,
                binds: Default::default(),
            }),
            params_buffer,
            params_capacity,
            pool: Pool::new(pool_cap),
            #[cfg(not(target_arch = "wasm32"))]
            pipelines: PipelineCache::with_persistent(persistent),
            #[cfg(target_arch = "wasm32")]
            pipelines: PipelineCache::default(),
            mem: Mem::default(),
            lost,
            lost_reason,
            uncaptured,
            poller,
            timeout: Duration::from_millis(timeout_ms),
            poison: AtomicBool::new(crate::platform::env_var("KILN_POISON").is_some()),
            flush_bytes,
            wait_spin: Duration::from_micros(env_or("KILN_WAIT_SPIN_US", SPIN.as_micros() as u64)),
            poll_lock: Mutex::new(()),
            revoked: Mutex::new(Default::default()),
            revoked_count: Default::default(),
            pending_times: Default::default(),
            param_ring: ParamRing::new(if features.contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS) {
                ring_buffers
            } else {
                0
            }),
            ring_dispatches: Default::default(),
            phases: Default::default(),
            counters: Default::default(),
            native_refused: Mutex::new(Vec::new()),
        });
        DEVICES.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(&dev));
        crate::startup::time("poller start", || Self::start_poller(&dev));
        Ok(dev)
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

    /// What the native kernel tier may use on this device (probed at creation, `crate::native`).
    pub fn native_caps(&self) -> &crate::native::NativeCaps {
        &self.native
    }

    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Destroys this device now and gives its memory back: every later call on it or on its
    /// tensors returns DeviceLost, and the next `kiln_core::device()` creates a fresh device.
    /// For releasing the GPU early, and for fault drills (the same path as a real loss).
    pub fn destroy(&self) {
        // What this device compiled is kept for the next process before the device goes.
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(p) = &self.pipelines.persistent {
            p.close();
        }
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

    /// A failure of work on this device: DEVICE_LOST once the device is lost (a device destroyed
    /// or abandoned by the timeout watchdog fails the map callbacks and commands of every owner
    /// of what was on it, who must be told the device is gone, never INTERNAL), else INTERNAL.
    pub(crate) fn fault(&self, text: String) -> Error {
        match self.check_alive() {
            Err(lost) => lost,
            Ok(()) => Error::Internal(text),
        }
    }

    /// Errors wgpu reported outside any scope since the last check.
    pub(super) fn take_uncaptured(&self) -> Result<()> {
        let errs = std::mem::take(&mut *self.uncaptured.lock().unwrap());
        if errs.is_empty() {
            Ok(())
        } else {
            Err(self.fault(errs.join("; ")))
        }
    }

    /// Builds, on other threads, the built-in pipelines `workload` built on this adapter in
    /// earlier processes (its record in the persistent pipeline cache, `pipeline_record`), and
    /// records from now on what this process builds, for the next one. Returns at once; a kernel
    /// that asks for a pipeline built ahead takes it instead of building its own. Nothing where
    /// the persistent cache is off (`KILN_CACHE=0`) or the adapter has no pipeline cache.
    ///
    /// On by default on GPUs, off on CPU adapters; `KILN_PIPELINE_WARMUP=1` / `0` forces it
    /// (off: nothing is recorded or built). Measured (BENCHMARKS.md, cold start): on the H200 a
    /// warm MiniLM process 0.42-0.46 -> 0.36-0.39 s, SmolLM2's 0.43-0.49 -> 0.41-0.43 s; on
    /// lavapipe (2 cores that also run the model) slower, the first dispatch growing by what the
    /// pipelines built ahead had saved.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn warm_pipelines(&self, workload: &str) -> crate::pipeline::Warmup {
        let on = match crate::platform::env_var("KILN_PIPELINE_WARMUP").as_deref().map(str::trim) {
            Some("1") => true,
            Some("0") => false,
            _ => self.info().device_type != "Cpu",
        };
        if !on || self.check_alive().is_err() {
            return Default::default();
        }
        self.pipelines.warm_up(&self.device, workload)
    }

    pub fn pipeline_stats(&self) -> PipelineStats {
        self.pipelines.stats()
    }

    /// The persistent pipeline cache's state in this process (None: off, `KILN_CACHE=0`, or the
    /// adapter has no pipeline cache).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn persistent_cache(&self) -> Option<crate::persistent_cache::PersistentCacheStats> {
        self.pipelines.persistent.as_ref().map(|p| p.stats())
    }

    /// Writes the persistent pipeline cache now if anything compiled since it was last written
    /// (it is also written on its own: see `persistent_cache`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn save_pipeline_cache(&self) {
        if let Some(p) = &self.pipelines.persistent {
            p.save_if_dirty();
        }
    }

    pub(crate) fn pipeline(&self, key: &str, checks: Checks, source: impl FnOnce() -> String) -> Result<Arc<Pipeline>> {
        self.check_alive()?;
        self.pipelines.get_or_compile(&self.device, key, "main", checks, source)
    }

    /// [`pipeline`](Self::pipeline) for a built-in kernel's typed key.
    pub(crate) fn pipeline_typed(
        &self,
        key: crate::pipeline::PipelineKey,
        checks: Checks,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<Pipeline>> {
        self.check_alive()?;
        self.pipelines.get_or_compile_typed(&self.device, key, "main", checks, source)
    }
}

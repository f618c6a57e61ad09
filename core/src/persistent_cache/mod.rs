//! The persistent pipeline cache: the driver's compiled pipelines (wgpu's `PipelineCache`, a
//! `VkPipelineCache` on Vulkan) kept on disk between processes, so a new process does not pay
//! for compiling every built-in kernel again. Native only, and only where the adapter has
//! `Features::PIPELINE_CACHE` (Vulkan).
//!
//! - Where: `$KILN_CACHE_DIR`, else `$XDG_CACHE_HOME/kiln/pipelines`, else
//!   `~/.cache/kiln/pipelines`; one file per adapter (`pipelines-<hash of the adapter>.bin`).
//!   `KILN_CACHE=0` turns the whole thing off.
//! - Keyed: the file's header holds the full key (Kiln's and wgpu's versions, wgpu's own cache
//!   key, the adapter's name, ids and driver); a file made for another key is ignored and
//!   overwritten. wgpu checks its own header again (driver UUID), and the driver its own.
//! - Never trusted blindly: the header carries the data's length and a checksum; a file that is
//!   too big, truncated, of another format or key, or whose checksum fails, is ignored (the
//!   process starts with an empty cache) and rewritten at the next save. The checksum catches
//!   corruption (a crash mid-write, a disk error, a truncated copy), not a forger: the file lives
//!   in the user's own cache directory (created 0700), which whoever can write can also change
//!   the user's shell startup files.
//! - Written atomically: to a temporary file of this process, then renamed over the old one, so
//!   a reader (or a concurrent writer: the last rename wins) sees a whole file or the old one.
//! - When: a quiet period after the last compile (`QUIET`) on a saver thread, so a burst of
//!   compiles (a model's first forward pass) is written once and off the caller's path; at
//!   process exit (atexit: a short-lived process, the CLI or a script, ends before any quiet
//!   period); and before a device is destroyed. A process killed by a signal loses only what it
//!   compiled since the last save. Bytes the file already holds are not written again (a
//!   process whose pipelines all came from the file leaves it as it was).
//! - Bounded: data over `MAX_BYTES` is not written (the old file is removed, so the next process
//!   starts a fresh cache holding only what it compiles), and a bigger file is not read.
//! - Next to it, Kiln's records of named workloads' pipelines (`pipeline_record`), at most
//!   `MAX_RECORDS` per adapter (the least recently used go).
//! - Only built-in kernels (WGSL and native) go into it: user kernels are callers' code, and a
//!   tenant compiling thousands would grow every later process's cache.
//!
//! Its rooms: `file` (the file format: header, checksum, atomic writes), `records` (the
//! workload records' files kept next to the driver's cache) and `saver` (the saver thread and
//! the exit-time save).

mod file;
mod records;
mod saver;

pub use file::{decode, encode};

use crate::pipeline_record as record;
use file::{checksum, data_sum, read_valid, write_file};
use saver::saver;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The most cache data kept on disk for one adapter.
pub const MAX_BYTES: usize = 256 << 20;
/// The most workload records (`pipeline_record`) kept per adapter.
pub const MAX_RECORDS: usize = 32;

/// What the cache did in this process (`Device::persistent_cache`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistentCacheStats {
    /// The file this device's cache is read from and written to.
    pub path: PathBuf,
    /// Bytes of cache data found valid and handed to the driver when the device opened (0: none).
    pub loaded_bytes: u64,
    /// Why a file that was there was not used (None: there was none, or it was used).
    pub rejected: Option<String>,
    /// Saves written by this process, and the size of the last.
    pub saves: u64,
    pub saved_bytes: u64,
    /// Pipelines built ahead from a workload's record (`Device::warm_pipelines`), and how many
    /// of them a kernel took.
    pub built_ahead: u64,
    pub taken_ahead: u64,
}

pub(crate) struct PersistentCache {
    cache: wgpu::PipelineCache,
    path: PathBuf,
    key: String,
    /// Compiles since the last save (0: nothing to write).
    dirty: AtomicU64,
    /// The checksum of the data the file holds as far as this process knows (what it loaded or
    /// last wrote; 0: none): a save that would write the same bytes again is skipped, so a
    /// process whose pipelines were all in the cache does not rewrite (and sync) it at exit.
    on_disk: AtomicU64,
    /// Set when the device is destroyed: nothing is read from the cache after that.
    closed: AtomicBool,
    /// Held while saving: the saver thread, atexit and `destroy` may save at once.
    save_lock: Mutex<()>,
    stats: Mutex<PersistentCacheStats>,
    /// Kiln's record of a workload's pipelines (`pipeline_record`).
    pub(crate) record: record::Record,
}

/// Whether `KILN_CACHE` turns the cache off ("0", "off", "false", "no").
pub(crate) fn disabled() -> bool {
    crate::platform::env_var("KILN_CACHE")
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "off" | "false" | "no"))
}

/// The cache directory: `$KILN_CACHE_DIR`, `$XDG_CACHE_HOME/kiln/pipelines` or
/// `$HOME/.cache/kiln/pipelines` (None without any of them).
pub(crate) fn directory() -> Option<PathBuf> {
    let set = |v: Option<String>| v.filter(|v| !v.trim().is_empty()).map(PathBuf::from);
    if let Some(d) = set(crate::platform::env_var("KILN_CACHE_DIR")) {
        return Some(d);
    }
    let base = set(crate::platform::env_var("XDG_CACHE_HOME"))
        .or_else(|| set(crate::platform::env_var("HOME")).map(|h| h.join(".cache")))?;
    Some(base.join("kiln").join("pipelines"))
}

/// Everything a cache's data depends on, as one string (stored whole in the file's header).
fn cache_key(info: &wgpu::AdapterInfo) -> Option<String> {
    let wgpu_key = wgpu::util::pipeline_cache_key(info)?;
    Some(format!(
        "kiln {} wgpu 30 | {wgpu_key} | {:?} {} {:#x}:{:#x} | driver {} {}",
        env!("CARGO_PKG_VERSION"),
        info.backend,
        info.name,
        info.vendor,
        info.device,
        info.driver,
        info.driver_info
    ))
}

impl PersistentCache {
    /// The device's cache, filled from its file where a valid one is there; None where the
    /// cache is off, the device lacks `PIPELINE_CACHE`, or there is no cache directory.
    pub(crate) fn open(device: &wgpu::Device, info: &wgpu::AdapterInfo) -> Option<Arc<PersistentCache>> {
        if disabled() || !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let key = cache_key(info)?;
        let dir = directory()?;
        // The file is named by the adapter alone: a new Kiln or driver version overwrites its
        // adapter's old file instead of leaving it behind (the key in the header tells them apart).
        let adapter = format!("{:?} {} {:#x}:{:#x}", info.backend, info.name, info.vendor, info.device);
        let path = dir.join(format!("pipelines-{:016x}.bin", checksum(&[adapter.as_bytes()])));
        let (data, rejected) =
            match crate::startup::time("pipeline-cache file read + check", || read_valid(&path, &key)) {
                Ok(d) => (d, None),
                Err(why) => (None, Some(why)),
            };
        let handing = crate::startup::span("pipeline cache handed to the driver");
        // SAFETY: `data` came from `PipelineCache::get_data` on an adapter with this very key
        // (wgpu's pipeline_cache_key, the driver and versions: checked in `decode` along with the
        // checksum), which is what create_pipeline_cache asks; wgpu validates its own header
        // again and with `fallback` starts empty where it would not use the data, and the driver
        // checks its own (VkPipelineCacheHeaderVersionOne). What no check here can rule out is a
        // forged file with a valid checksum: it needs write access to the user's own cache
        // directory (see the module comment; core/tests/persistent_cache.rs feeds one to the
        // driver and checks the process still computes right on lavapipe).
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("kiln persistent pipeline cache"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        drop(handing);
        let stats = PersistentCacheStats {
            path: path.clone(),
            loaded_bytes: data.as_ref().map_or(0, |d| d.len() as u64),
            rejected,
            ..Default::default()
        };
        let me = Arc::new(PersistentCache {
            cache,
            path,
            key,
            // A rejected file is rewritten at the next save even if nothing new compiles.
            dirty: AtomicU64::new(stats.rejected.is_some() as u64),
            on_disk: AtomicU64::new(data.as_deref().map_or(0, data_sum)),
            closed: AtomicBool::new(false),
            save_lock: Mutex::new(()),
            stats: Mutex::new(stats),
            record: Default::default(),
        });
        saver().register(&me);
        Some(me)
    }

    pub(crate) fn cache(&self) -> &wgpu::PipelineCache {
        &self.cache
    }

    /// A pipeline was compiled with this cache: schedule a save.
    pub(crate) fn note_compile(&self) {
        self.dirty.fetch_add(1, Ordering::Relaxed);
        saver().poke();
    }

    pub(crate) fn stats(&self) -> PersistentCacheStats {
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        s.built_ahead = self.record.built.load(Ordering::Relaxed);
        s.taken_ahead = self.record.taken.load(Ordering::Relaxed);
        s
    }

    /// Writes the cache if anything compiled since the last save (errors are not the caller's:
    /// a cache that cannot be written is only slower next time).
    pub(crate) fn save_if_dirty(&self) {
        let _g = self.save_lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let dirty = self.dirty.swap(0, Ordering::SeqCst);
        if dirty == 0 {
            return;
        }
        self.record.save(|path, key, data| {
            write_file(path, &encode(key, data))?;
            self.prune_records();
            Ok(())
        });
        let Some(data) = self.cache.get_data() else { return };
        let sum = data_sum(&data);
        if sum == self.on_disk.load(Ordering::SeqCst) {
            return;
        }
        if data.len() > MAX_BYTES {
            // Start over next time: the next process's cache holds only what it compiles.
            let _ = std::fs::remove_file(&self.path);
            self.on_disk.store(0, Ordering::SeqCst);
            return;
        }
        if write_file(&self.path, &encode(&self.key, &data)).is_ok() {
            self.on_disk.store(sum, Ordering::SeqCst);
            let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
            s.saves += 1;
            s.saved_bytes = data.len() as u64;
        }
    }

    /// Saves, then stops using the file (the device is about to be destroyed).
    pub(crate) fn close(&self) {
        self.save_if_dirty();
        self.closed.store(true, Ordering::SeqCst);
    }
}

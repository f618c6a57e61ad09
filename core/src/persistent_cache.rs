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

use crate::pipeline_record as record;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// The most cache data kept on disk for one adapter.
pub const MAX_BYTES: usize = 256 << 20;
/// The most workload records (`pipeline_record`) kept per adapter.
pub const MAX_RECORDS: usize = 32;
/// How long after the last compile the saver thread writes the cache.
const QUIET: Duration = Duration::from_millis(1500);
const MAGIC: &[u8; 8] = b"KILNPLC1";
/// magic, key length (u32), data length (u64), checksum (u64).
const FIXED_HEADER: usize = 8 + 4 + 8 + 8;
/// Longest key a file may claim (a real one is a few hundred bytes).
const MAX_KEY: usize = 4096;

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

/// A stable 64-bit checksum (FNV-1a over 8-byte words, then a final mix): catches truncation,
/// bit flips and torn writes; not a MAC (see the module comment).
fn checksum(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        h ^= part.len() as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        let mut chunks = part.chunks_exact(8);
        for c in &mut chunks {
            h ^= u64::from_le_bytes(c.try_into().unwrap());
            h = h.wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
        }
        for &b in chunks.remainder() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // splitmix64's finaliser: every input bit reaches every output bit.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The checksum `PersistentCache::on_disk` compares (never 0, which means "none").
fn data_sum(data: &[u8]) -> u64 {
    checksum(&[data]).max(1)
}

/// The file's bytes for `data` under `key` (public for the tests that forge files).
pub fn encode(key: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_HEADER + key.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(&[key.as_bytes(), data]).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The cache data in `file` if it is a whole, intact file made under `key`; else why not.
pub fn decode<'a>(file: &'a [u8], key: &str) -> Result<&'a [u8], String> {
    if file.len() < FIXED_HEADER {
        return Err(format!("truncated: {} bytes, shorter than the header", file.len()));
    }
    if &file[..8] != MAGIC {
        return Err("not a Kiln pipeline cache (or another version of the format)".into());
    }
    let key_len = u32::from_le_bytes(file[8..12].try_into().unwrap()) as usize;
    let data_len = u64::from_le_bytes(file[12..20].try_into().unwrap());
    let sum = u64::from_le_bytes(file[20..28].try_into().unwrap());
    if key_len > MAX_KEY {
        return Err(format!("corrupt: a key of {key_len} bytes"));
    }
    let body = &file[FIXED_HEADER..];
    if (body.len() as u64) < key_len as u64 + data_len {
        return Err(format!(
            "truncated: {} bytes where the header says {}",
            file.len(),
            FIXED_HEADER as u64 + key_len as u64 + data_len
        ));
    }
    if body.len() as u64 > key_len as u64 + data_len {
        return Err("corrupt: longer than the header says".into());
    }
    let (file_key, data) = body.split_at(key_len);
    if checksum(&[file_key, data]) != sum {
        return Err("corrupt: checksum mismatch".into());
    }
    if file_key != key.as_bytes() {
        return Err(format!("made for another adapter, driver or version ({})", String::from_utf8_lossy(file_key)));
    }
    Ok(data)
}

/// Reads the cache file at `path` if it is a valid one for `key`: Ok(None) when there is none.
fn read_valid(path: &Path, key: &str) -> Result<Option<Vec<u8>>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > (FIXED_HEADER + MAX_KEY + MAX_BYTES) as u64 {
        return Err(format!("{} bytes, over the {} MiB bound", meta.len(), MAX_BYTES >> 20));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("unreadable: {e}"))?;
    decode(&bytes, key).map(|d| Some(d.to_vec()))
}

/// Creates the directory for the cache, private to the user (0700) where it is new.
fn make_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
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

    /// Starts recording `workload`'s pipelines (`pipeline_record`): its record's file is next to
    /// the driver's cache, under the same key plus the workload's name. The recipes it holds.
    pub(crate) fn start_warm_record(&self, workload: &str) -> Vec<record::Recipe> {
        let stem = self.path.file_stem().and_then(|s| s.to_str()).unwrap_or("pipelines");
        let path = self.path.with_file_name(format!("{stem}-{:016x}.warm", checksum(&[workload.as_bytes()])));
        // A long name (a deep model path) is keyed by its checksum: the key must stay under
        // MAX_KEY for the file to read back.
        let name = match workload.len() {
            0..=1024 => workload.to_string(),
            _ => format!("#{:016x}", checksum(&[workload.as_bytes()])),
        };
        let key = format!("{} | workload {name}", self.key);
        let recipes = std::fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file() && m.len() <= (FIXED_HEADER + MAX_KEY + record::MAX_RECORD_BYTES) as u64)
            .and_then(|_| std::fs::read(&path).ok())
            .and_then(|bytes| decode(&bytes, &key).ok().and_then(record::decode_recipes))
            .unwrap_or_default();
        // A record in use counts as new for `prune_records` (it is rewritten only when it changes).
        if !recipes.is_empty() {
            let now = std::time::SystemTime::now();
            let _ = std::fs::File::options().append(true).open(&path).and_then(|f| f.set_modified(now));
        }
        self.record.start(path, key, recipes.clone());
        recipes
    }

    /// Keeps at most `MAX_RECORDS` workload records for this adapter, the most recently used:
    /// one per model file a user ran, which would otherwise only grow.
    fn prune_records(&self) {
        let (Some(dir), Some(stem)) = (self.path.parent(), self.path.file_stem().and_then(|s| s.to_str())) else {
            return;
        };
        let prefix = format!("{stem}-");
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut records: Vec<(std::time::SystemTime, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with(&prefix) && n.ends_with(".warm")
            })
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if records.len() <= MAX_RECORDS {
            return;
        }
        records.sort();
        for (_, p) in &records[..records.len() - MAX_RECORDS] {
            let _ = std::fs::remove_file(p);
        }
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

/// Writes `bytes` to `path` atomically: a temporary file of this process, synced, then renamed
/// over the old one (a reader sees the whole old file or the whole new one).
fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    make_dir(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("pipelines"),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The one saver thread of the process and the caches it looks after.
struct Saver {
    caches: Mutex<Vec<Weak<PersistentCache>>>,
    /// Bumped by every compile; the thread saves once it stops moving for `QUIET`.
    generation: Mutex<u64>,
    wake: Condvar,
}

fn saver() -> &'static Saver {
    static SAVER: once_cell::sync::OnceCell<&'static Saver> = once_cell::sync::OnceCell::new();
    SAVER.get_or_init(|| {
        let s: &'static Saver = Box::leak(Box::new(Saver {
            caches: Mutex::new(Vec::new()),
            generation: Mutex::new(0),
            wake: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new().name("kiln-cache-saver".into()).spawn(move || s.run());
        if spawned.is_ok() {
            register_at_exit();
        }
        s
    })
}

impl Saver {
    fn register(&self, c: &Arc<PersistentCache>) {
        let mut all = self.caches.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(c));
    }

    fn poke(&self) {
        *self.generation.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.wake.notify_one();
    }

    fn save_all(&self) {
        let live: Vec<_> =
            self.caches.lock().unwrap_or_else(|p| p.into_inner()).iter().filter_map(Weak::upgrade).collect();
        for c in live {
            c.save_if_dirty();
        }
    }

    fn run(&self) {
        let mut seen = 0;
        loop {
            let mut g = self.generation.lock().unwrap_or_else(|p| p.into_inner());
            while *g == seen {
                g = self.wake.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            // Wait until no compile has come for QUIET.
            loop {
                seen = *g;
                g = self.wake.wait_timeout(g, QUIET).unwrap_or_else(|p| p.into_inner()).0;
                if *g == seen {
                    break;
                }
            }
            drop(g);
            self.save_all();
        }
    }
}

/// The process that registered the handler: a forked child inherits it, and must not touch the
/// parent's Vulkan device (unsupported after fork).
static REGISTERED_BY: AtomicU64 = AtomicU64::new(0);

extern "C" fn save_at_exit() {
    if REGISTERED_BY.load(Ordering::SeqCst) != std::process::id() as u64 {
        return;
    }
    // Nothing may unwind out of an atexit handler.
    let _ = std::panic::catch_unwind(|| saver().save_all());
}

/// Saves every dirty cache when the process exits normally (`exit`, returning from main, Python's
/// and the BEAM's shutdown). Registered after the Vulkan driver was loaded, so it runs before the
/// driver's own exit-time destructors (atexit handlers run in reverse order of registration).
fn register_at_exit() {
    extern "C" {
        fn atexit(f: extern "C" fn()) -> std::os::raw::c_int;
    }
    REGISTERED_BY.store(std::process::id() as u64, Ordering::SeqCst);
    // SAFETY: registering a plain function with the C library's atexit.
    unsafe {
        atexit(save_at_exit);
    }
}

#[cfg(test)]
mod tests {
    use super::{checksum, decode, encode, FIXED_HEADER};

    #[test]
    fn a_whole_file_decodes_to_its_data() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let f = encode("key A", &data);
        assert_eq!(decode(&f, "key A").unwrap(), &data[..]);
        assert_eq!(decode(&encode("k", &[]), "k").unwrap(), &[] as &[u8]);
    }

    #[test]
    fn every_damaged_file_is_refused() {
        let data: Vec<u8> = (0..333u32).map(|i| (i * 13 % 256) as u8).collect();
        let f = encode("key A", &data);
        // Every truncation, including to nothing.
        for n in 0..f.len() {
            assert!(decode(&f[..n], "key A").is_err(), "truncated to {n}");
        }
        // Every single-bit flip anywhere.
        for i in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[i] ^= 1 << bit;
                assert!(decode(&g, "key A").is_err(), "byte {i} bit {bit}");
            }
        }
        // Extra bytes at the end, another key, another format.
        let mut longer = f.clone();
        longer.push(0);
        assert!(decode(&longer, "key A").unwrap_err().contains("longer"));
        assert!(decode(&f, "key B").unwrap_err().contains("another adapter"));
        assert!(decode(b"WGPUPLCH and then some bytes.....", "key A").unwrap_err().contains("not a Kiln"));
        // Lengths that claim more than the file or than any key may be.
        let mut huge = f.clone();
        huge[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge, "key A").is_err());
        let mut long_key = f.clone();
        long_key[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&long_key, "key A").unwrap_err().contains("key of"));
        assert_eq!(f.len(), FIXED_HEADER + 5 + data.len());
    }

    #[test]
    fn the_checksum_sees_where_the_bytes_are() {
        // Moving bytes between the key and the data changes it.
        assert_ne!(checksum(&[b"ab", b"c"]), checksum(&[b"a", b"bc"]));
        assert_ne!(checksum(&[&[0u8; 16]]), checksum(&[&[0u8; 17]]));
        assert_eq!(checksum(&[b"stable"]), checksum(&[b"stable"]));
    }
}

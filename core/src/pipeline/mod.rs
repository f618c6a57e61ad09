//! Compiled compute pipelines, cached by kernel name and specialization. User kernels' entries
//! are bounded (least recently used out first, `KILN_PIPELINE_CACHE_ENTRIES`) and dropped by
//! `Device::empty_cache` when no live `Kernel` holds them; built-in ones stay.
//! `compile` builds one pipeline, `template` fills the built-in kernels' WGSL templates, `warm`
//! builds a workload's recorded pipelines ahead (`pipeline_record`).

mod compile;
mod template;
#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod warm;

use crate::{Error, Result};
pub use compile::Pipeline;
pub(crate) use compile::{compile_with, Checks};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
pub(crate) use template::render;
#[cfg(not(target_arch = "wasm32"))]
pub use warm::Warmup;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PipelineStats {
    /// Pipelines in the cache, built-in and user.
    pub pipelines: u64,
    /// Of those, user kernels' (bounded by `KILN_PIPELINE_CACHE_ENTRIES`).
    pub user_pipelines: u64,
    /// Of those, shape-specialized built-ins' (bounded by `SHAPED_CACHE_ENTRIES`).
    pub shaped_pipelines: u64,
    pub hits: u64,
    pub misses: u64,
    pub compile_seconds: f64,
}

/// Cache keys of user kernels start with this; they are evicted past
/// `KILN_PIPELINE_CACHE_ENTRIES`.
pub(crate) const USER_KEY_PREFIX: &str = "user:";

/// Built-in kernels specialized on a caller-chosen geometry (kernel size, stride, dilation baked
/// into unrolled code): a small set for any one model, but a caller could ask for thousands, so
/// they are evicted past `SHAPED_CACHE_ENTRIES` like user kernels. Every other built-in kernel
/// is keyed by dtype, flags and tiling only: a fixed, small set per device.
const SHAPED_KEY_PREFIXES: [&str; 1] = ["conv_depthwise:"];
/// Shape-specialized built-in pipelines kept per device.
pub const SHAPED_CACHE_ENTRIES: usize = 64;

/// The pipelines evicted past a cap, each class against its own.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Evictable {
    User,
    Shaped,
}

/// Which eviction class a key is in (None: never evicted).
fn evictable(key: &str) -> Option<Evictable> {
    if key.starts_with(USER_KEY_PREFIX) {
        Some(Evictable::User)
    } else if SHAPED_KEY_PREFIXES.iter().any(|p| key.starts_with(p)) {
        Some(Evictable::Shaped)
    } else {
        None
    }
}

struct Entry {
    pipeline: Arc<Pipeline>,
    last_used: u64,
}

/// Values a [`PipelineKey`] holds besides its op's name (the most any built-in kernel's
/// specialization takes; more is a bug in the op, refused when the key is made).
pub(crate) const KEY_SPEC_WORDS: usize = 12;

/// A built-in kernel's cache key as data: its op's name and the values that change its rendered
/// source (formats, dtypes, flags and tile sizes, each as a u32). Made and looked up with no
/// allocation and no formatting: a decode token looks up ~150 pipelines, and building and
/// hashing a `format!`ed key string was a large share of its host recording (issue 29). The op's
/// name is the pipeline's metrics label as it is (no `op_label` parsing); the text form (the
/// wgpu label, error messages) is made only when the pipeline is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineKey {
    op: &'static str,
    len: u8,
    spec: [u32; KEY_SPEC_WORDS],
}

impl PipelineKey {
    /// The key of op `op` specialized on `spec` (at most `KEY_SPEC_WORDS` values: a built-in
    /// op's constant, so more is a bug, and the panic becomes a PANIC error at the boundary).
    pub(crate) fn new(op: &'static str, spec: &[u32]) -> PipelineKey {
        assert!(spec.len() <= KEY_SPEC_WORDS, "pipeline key {op}: {} values, at most {KEY_SPEC_WORDS}", spec.len());
        let mut words = [0u32; KEY_SPEC_WORDS];
        words[..spec.len()].copy_from_slice(spec);
        PipelineKey { op, len: spec.len() as u8, spec: words }
    }

    /// The op's name: the pipeline's metrics label.
    pub(crate) fn op(&self) -> &'static str {
        self.op
    }
}

/// `op:v0:v1:...`: the wgpu label and the name in compile errors.
impl std::fmt::Display for PipelineKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.op)?;
        for v in &self.spec[..self.len as usize] {
            write!(f, ":{v}")?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Entries {
    map: HashMap<String, Entry, std::hash::BuildHasherDefault<crate::id_hash::IdHasher>>,
    /// Built-in kernels keyed by [`PipelineKey`]: a fixed, small set per device, never evicted.
    typed: HashMap<PipelineKey, Arc<Pipeline>, std::hash::BuildHasherDefault<crate::id_hash::IdHasher>>,
    clock: u64,
    user: usize,
    /// Shape-specialized built-in pipelines (see `SHAPED_KEY_PREFIXES`).
    shaped: usize,
    /// Evicted since `take_evicted` last looked (see there).
    evicted: usize,
}

impl Entries {
    fn count(&mut self, class: Evictable) -> &mut usize {
        match class {
            Evictable::User => &mut self.user,
            Evictable::Shaped => &mut self.shaped,
        }
    }

    fn get(&mut self, key: &str) -> Option<Arc<Pipeline>> {
        self.clock += 1;
        let clock = self.clock;
        self.map.get_mut(key).map(|e| {
            e.last_used = clock;
            e.pipeline.clone()
        })
    }

    /// Stores `p` unless another thread stored `key` first, and evicts the least recently used
    /// user (or shape-specialized) pipelines past their cap (a live `Kernel` keeps its own `Arc`, so eviction never
    /// breaks one; it only stops sharing).
    fn insert(&mut self, key: &str, p: Arc<Pipeline>) -> Arc<Pipeline> {
        if let Some(existing) = self.get(key) {
            return existing;
        }
        self.map.insert(key.to_string(), Entry { pipeline: p.clone(), last_used: self.clock });
        let Some(class) = evictable(key) else { return p };
        let cap = match class {
            Evictable::User => crate::kernel_limits::pipeline_cache_entries(),
            Evictable::Shaped => SHAPED_CACHE_ENTRIES,
        };
        *self.count(class) += 1;
        while *self.count(class) > cap {
            let oldest = self
                .map
                .iter()
                .filter(|(k, _)| evictable(k) == Some(class) && k.as_str() != key)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            let Some(oldest) = oldest else { break };
            self.map.remove(&oldest);
            *self.count(class) -= 1;
            self.evicted += 1;
        }
        p
    }
}

#[derive(Default)]
pub(crate) struct PipelineCache {
    entries: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
    compile_nanos: AtomicU64,
    /// The driver's compiled pipelines kept between processes, built-in kernels only (None: off,
    /// or the adapter has no pipeline cache; `persistent_cache`).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) persistent: Option<Arc<crate::persistent_cache::PersistentCache>>,
    /// Pipelines built ahead from a workload's record (`warm`).
    #[cfg(not(target_arch = "wasm32"))]
    ready: Arc<warm::Ready>,
}

impl PipelineCache {
    /// An empty cache whose built-in kernels compile with `persistent`'s driver cache.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn with_persistent(persistent: Option<Arc<crate::persistent_cache::PersistentCache>>) -> PipelineCache {
        PipelineCache { persistent, ..Default::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The driver-level cache a built-in kernel compiles with (None on the web and where off).
    pub(crate) fn driver_cache(&self) -> Option<&wgpu::PipelineCache> {
        #[cfg(not(target_arch = "wasm32"))]
        return self.persistent.as_ref().map(|p| p.cache());
        #[cfg(target_arch = "wasm32")]
        None
    }

    /// A built-in kernel was compiled with `driver_cache`: the persistent cache has news.
    pub(crate) fn note_builtin_compile(&self) {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(p) = &self.persistent {
            p.note_compile();
        }
    }

    pub(crate) fn get_or_compile(
        &self,
        device: &wgpu::Device,
        key: &str,
        entry: &str,
        checks: Checks,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.lock().get(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(p);
        }
        let p = self.compile_builtin(device, key, None, entry, checks, source)?;
        // Two threads may compile the same key at once; the first one stored wins.
        Ok(self.lock().insert(key, p))
    }

    /// [`get_or_compile`](Self::get_or_compile) for a built-in kernel's typed key.
    pub(crate) fn get_or_compile_typed(
        &self,
        device: &wgpu::Device,
        key: PipelineKey,
        entry: &str,
        checks: Checks,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.lock().typed.get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(p.clone());
        }
        let p = self.compile_builtin(device, &key.to_string(), Some(key.op()), entry, checks, source)?;
        // Two threads may compile the same key at once; the first one stored wins.
        Ok(self.lock().typed.entry(key).or_insert(p).clone())
    }

    /// Compiles a built-in kernel after a cache miss (`op`: its metrics label where the key
    /// names it, else `op_label(label)`).
    fn compile_builtin(
        &self,
        device: &wgpu::Device,
        label: &str,
        op: Option<&str>,
        entry: &str,
        checks: Checks,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<Pipeline>> {
        self.misses.fetch_add(1, Ordering::Relaxed);
        let _creation = crate::startup::span("pipeline creation (built-in WGSL kernel)");
        let start = crate::platform::Instant::now();
        let src = crate::startup::time("kernel source (WGSL text)", source);
        // Built ahead from the workload's record (`warm`), if it is this very recipe; and
        // recorded for the next process either way.
        #[cfg(not(target_arch = "wasm32"))]
        let recipe = self.persistent.as_ref().map(|p| {
            let recipe = crate::pipeline_record::Recipe {
                label: label.to_string(),
                op: op.map(str::to_string),
                entry: entry.to_string(),
                unchecked: checks == Checks::Unchecked,
                source: src.clone(),
            };
            (p, recipe)
        });
        #[cfg(not(target_arch = "wasm32"))]
        if let Some((p, r)) = &recipe {
            if let Some(built) = self.take_ahead(r) {
                if p.record.note(r) {
                    p.note_compile();
                }
                self.record_compile(start.elapsed());
                return Ok(built);
            }
        }
        // Built-in kernels compile on the caller's thread, as they always did: they are trusted,
        // small and shallow (a BEAM dirty scheduler's stack suffices), and moving them to the
        // compile thread changed the timing of every op's first call for no gain.
        let p =
            compile_with(device, label, &src, entry, checks, true, None, op, self.driver_cache()).map_err(
                |e| match e {
                    Error::Shader(m) => Error::Internal(format!("built-in kernel {label} failed to compile: {m}")),
                    e => e,
                },
            )?;
        self.record_compile(start.elapsed());
        self.note_builtin_compile();
        #[cfg(not(target_arch = "wasm32"))]
        if let Some((p, r)) = &recipe {
            // The compile above already scheduled a save.
            let _ = p.record.note(r);
        }
        Ok(Arc::new(p))
    }

    pub(crate) fn get_cached(&self, key: &str) -> Option<Arc<Pipeline>> {
        let p = self.lock().get(key);
        if p.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    pub(crate) fn insert(&self, key: &str, p: Arc<Pipeline>) -> Arc<Pipeline> {
        self.lock().insert(key, p)
    }

    /// Forgets a user pipeline the driver turned out to reject (the browser answers late).
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn forget_user(&self, key: &str) {
        let mut e = self.lock();
        if key.starts_with(USER_KEY_PREFIX) && e.map.remove(key).is_some() {
            e.user -= 1;
        }
    }

    pub(crate) fn record_compile(&self, took: std::time::Duration) {
        self.compile_nanos.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Drops the user pipelines no live `Kernel` holds (`Device::empty_cache`).
    pub(crate) fn evict_unused_user(&self) {
        let mut e = self.lock();
        let before = e.map.len();
        e.map.retain(|k, v| !k.starts_with(USER_KEY_PREFIX) || Arc::strong_count(&v.pipeline) > 1);
        let removed = before - e.map.len();
        e.user -= removed;
    }

    /// Whether `at_least` pipelines were evicted since this last said so. Drivers may free a
    /// destroyed pipeline only at the next queue submission (lavapipe, Mesa 22.3: ~62 KiB each;
    /// 3,000 created and dropped without a submit held 190 MiB, with one every 100 held 17 MiB),
    /// so whoever compiles without dispatching submits an empty batch now and then.
    pub(crate) fn evicted_at_least(&self, at_least: usize) -> bool {
        let mut e = self.lock();
        let due = e.evicted >= at_least;
        if due {
            e.evicted = 0;
        }
        due
    }

    pub(crate) fn stats(&self) -> PipelineStats {
        let e = self.lock();
        PipelineStats {
            pipelines: (e.map.len() + e.typed.len()) as u64,
            user_pipelines: e.user as u64,
            shaped_pipelines: e.shaped as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            compile_seconds: self.compile_nanos.load(Ordering::Relaxed) as f64 * 1e-9,
        }
    }
}

/// The op a pipeline key belongs to: the key's leading name segments, without the
/// specialization (dtypes, tile sizes, flags). `elementwise:add:f32,f32:...` is
/// `elementwise:add`, `matmul:f32:64x64x8:...` is `matmul`, `reduce:sum:f32:...` is
/// `reduce:sum`. Every user kernel is `user_kernel`: their names are the caller's, and a label
/// per caller-chosen string would let one tenant grow the metrics without bound.
pub(crate) fn op_label(key: &str) -> String {
    if key.starts_with(USER_KEY_PREFIX) {
        return "user_kernel".into();
    }
    let is_name = |s: &str| {
        !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            && crate::DType::parse(s).is_err()
            && !matches!(s, "true" | "false" | "row" | "col")
    };
    let mut parts = key.split(':');
    let first = parts.next().unwrap_or_default();
    let mut name = if first.is_empty() { "unnamed".to_string() } else { first.to_string() };
    if let Some(second) = parts.next().filter(|s| is_name(s)) {
        name.push(':');
        name.push_str(second);
    }
    name
}

#[cfg(test)]
mod tests {
    use super::{op_label, PipelineKey, KEY_SPEC_WORDS};

    #[test]
    fn typed_keys_differ_by_every_value_and_label_their_op() {
        let k = PipelineKey::new("quant_matvec", &[1, 0, 64, 4, 1, 0, 0, 1]);
        assert_eq!(k.to_string(), "quant_matvec:1:0:64:4:1:0:0:1");
        // The op's name is the label op_label would have parsed from the text form.
        assert_eq!(op_label(&k.to_string()), k.op());
        assert_eq!(op_label(&PipelineKey::new("sort_bitonic:block", &[]).to_string()), "sort_bitonic:block");
        for i in 0..8 {
            let mut spec = [1, 0, 64, 4, 1, 0, 0, 1];
            spec[i] += 1;
            assert_ne!(PipelineKey::new("quant_matvec", &spec), k, "value {i}");
        }
        // A shorter spec is another key even where the missing values would be zeros.
        assert_ne!(PipelineKey::new("a", &[0]), PipelineKey::new("a", &[]));
        assert_ne!(PipelineKey::new("a", &[1]), PipelineKey::new("b", &[1]));
        assert!(std::panic::catch_unwind(|| PipelineKey::new("a", &[0; KEY_SPEC_WORDS + 1])).is_err());
        assert_eq!(PipelineKey::new("a", &[7; KEY_SPEC_WORDS]).to_string().matches(":7").count(), KEY_SPEC_WORDS);
    }

    #[test]
    fn op_labels_drop_the_specialization() {
        assert_eq!(op_label("elementwise:add:f32,f32:f32:true:true:a + b"), "elementwise:add");
        assert_eq!(op_label("matmul:f32:64x64x8:4x4:true:true"), "matmul");
        assert_eq!(op_label("reduce:sum:f32:f32:row:true"), "reduce:sum");
        assert_eq!(op_label("norm:layer_norm:f32:row:true:true:false"), "norm:layer_norm");
        assert_eq!(op_label("conv2d:f32:true"), "conv2d");
        assert_eq!(op_label("searchsorted:bool"), "searchsorted");
        assert_eq!(op_label("attention_softmax"), "attention_softmax");
        assert_eq!(op_label("user:0123456789abcdef:main:bounded"), "user_kernel");
        assert_eq!(op_label(""), "unnamed");
    }
}

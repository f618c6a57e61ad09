//! Kiln's own record of the built-in pipelines a workload builds, so that the next process of
//! the same workload builds them ahead, on other threads, while its weights upload (issue 34's
//! cold start: `kiln embed --timings` showed every pipeline built one after another on the
//! first forward pass, driver-cache hits included). Native only; part of the persistent
//! pipeline cache (off with it, `KILN_CACHE=0`).
//!
//! - A workload is named by its caller (kiln-models: the model file and precision):
//!   [`Device::warm_pipelines`] reads that workload's record, starts the threads, and records
//!   from then on what the process builds; the record is written with the driver's cache (same
//!   directory, same key plus the workload's name, same checksummed format) when it differs from
//!   the file: it holds the last process's pipelines (at most `MAX_RECIPES`), so what a workload
//!   stopped using is not built ahead again.
//! - A recipe is what `compile_with` was given (label, op, entry point, checks, WGSL). A pipeline
//!   built ahead is used only when the kernel asks for the same label with the same recipe,
//!   source included, so a stale, damaged or forged record costs time, never a wrong kernel.

use super::compile::{compile_with, Checks, Pipeline};
use crate::device::Device;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most recipes one workload's record keeps.
pub(crate) const MAX_RECIPES: usize = 512;
/// The most bytes a record may hold (a recipe is a few KiB of WGSL).
const MAX_RECORD_BYTES: usize = 32 << 20;

/// What one built-in pipeline was built from.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Recipe {
    pub(crate) label: String,
    pub(crate) op: Option<String>,
    pub(crate) entry: String,
    pub(crate) checks: Checks,
    pub(crate) source: String,
}

impl Recipe {
    fn build(&self, device: &wgpu::Device, cache: Option<&wgpu::PipelineCache>) -> crate::Result<Pipeline> {
        let r = self;
        compile_with(device, &r.label, &r.source, &r.entry, r.checks, true, None, r.op.as_deref(), cache)
    }
}

/// Recipes as bytes: a count, then per recipe its checks byte, whether it has an op, and its
/// strings, each length-prefixed (u32 LE).
pub(crate) fn encode_recipes(recipes: &[Recipe]) -> Vec<u8> {
    let mut out = (recipes.len() as u32).to_le_bytes().to_vec();
    let s = |out: &mut Vec<u8>, t: &str| {
        out.extend_from_slice(&(t.len() as u32).to_le_bytes());
        out.extend_from_slice(t.as_bytes());
    };
    for r in recipes {
        out.push(matches!(r.checks, Checks::Unchecked) as u8);
        out.push(r.op.is_some() as u8);
        s(&mut out, &r.label);
        s(&mut out, r.op.as_deref().unwrap_or(""));
        s(&mut out, &r.entry);
        s(&mut out, &r.source);
    }
    out
}

/// [`encode_recipes`]' bytes back; None for anything else (every length checked against what
/// is left, every string UTF-8, nothing left over).
pub(crate) fn decode_recipes(mut b: &[u8]) -> Option<Vec<Recipe>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    fn u32_of(b: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize)
    }
    fn string(b: &mut &[u8]) -> Option<String> {
        let n = u32_of(b)?;
        String::from_utf8(take(b, n)?.to_vec()).ok()
    }
    let n = u32_of(&mut b)?;
    if n > MAX_RECIPES {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let flags = take(&mut b, 2)?;
        let checks = match flags[0] {
            0 => Checks::Bounded,
            1 => Checks::Unchecked,
            _ => return None,
        };
        let has_op = match flags[1] {
            0 => false,
            1 => true,
            _ => return None,
        };
        let label = string(&mut b)?;
        let op = string(&mut b)?;
        let entry = string(&mut b)?;
        let source = string(&mut b)?;
        out.push(Recipe { label, op: has_op.then_some(op), entry, checks, source });
    }
    b.is_empty().then_some(out)
}

/// A workload being recorded.
struct Recording {
    path: std::path::PathBuf,
    key: String,
    /// What the file holds (as read, or as last written).
    on_disk: Vec<Recipe>,
    /// What this process has built or taken, in that order: the next record.
    used: Vec<Recipe>,
}

/// Whether two lists hold the same recipes, whatever their order.
fn same_set(a: &[Recipe], b: &[Recipe]) -> bool {
    a.len() == b.len() && a.iter().all(|r| b.contains(r))
}

/// The warm-up state of one device's persistent cache.
#[derive(Default)]
pub(crate) struct WarmStore {
    /// Pipelines built ahead, by label, with what they were built from.
    ready: Mutex<HashMap<String, (Arc<Pipeline>, Recipe)>>,
    recording: Mutex<Option<Recording>>,
    /// Built ahead, and taken by a kernel that asked for them.
    pub(crate) built: std::sync::atomic::AtomicU64,
    pub(crate) taken: std::sync::atomic::AtomicU64,
}

impl WarmStore {
    /// Starts recording into `path` under `key`; the recipes the file holds (none when it is
    /// missing, damaged or made for another key).
    pub(crate) fn start(&self, path: std::path::PathBuf, key: String) -> Vec<Recipe> {
        let recipes = std::fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file() && m.len() <= MAX_RECORD_BYTES as u64)
            .and_then(|_| std::fs::read(&path).ok())
            .and_then(|bytes| crate::persistent_cache::decode(&bytes, &key).ok().and_then(decode_recipes))
            .unwrap_or_default();
        let mut r = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        *r = Some(Recording { path, key, on_disk: recipes.clone(), used: Vec::new() });
        recipes
    }

    /// The pipeline built ahead for exactly `recipe`, if any (taken: it is the caller's now).
    pub(crate) fn take(&self, recipe: &Recipe) -> Option<Arc<Pipeline>> {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        match ready.get(&recipe.label) {
            Some((_, r)) if r == recipe => {}
            _ => return None,
        }
        self.taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ready.remove(&recipe.label).map(|(p, _)| p)
    }

    /// A kernel was built (or taken) from `recipe`: recorded, where a workload is. Whether the
    /// file lacks it (a save is due).
    pub(crate) fn note(&self, recipe: &Recipe) -> bool {
        let mut guard = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        let Some(rec) = guard.as_mut() else { return false };
        if rec.used.len() < MAX_RECIPES && !rec.used.iter().any(|r| r == recipe) {
            rec.used.push(recipe.clone());
            return !rec.on_disk.contains(recipe);
        }
        false
    }

    /// Writes the record when what this process used differs from what the file holds (the
    /// record is the last process's pipelines: what it did not use is not built ahead again).
    pub(crate) fn save(&self, write: impl Fn(&std::path::Path, &[u8]) -> std::io::Result<()>) {
        let mut guard = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        let Some(rec) = guard.as_mut() else { return };
        if rec.used.is_empty() || same_set(&rec.used, &rec.on_disk) {
            return;
        }
        let mut used = rec.used.clone();
        let mut data = encode_recipes(&used);
        while data.len() > MAX_RECORD_BYTES && !used.is_empty() {
            used.pop();
            data = encode_recipes(&used);
        }
        if write(&rec.path, &crate::persistent_cache::encode(&rec.key, &data)).is_ok() {
            rec.on_disk = used;
        }
    }
}

/// The threads building a workload's recorded pipelines ([`Device::warm_pipelines`]): joined
/// by [`wait`](Warmup::wait), or when dropped, so none outlives its caller.
#[derive(Default)]
#[must_use = "dropping the warm-up waits for it"]
pub struct Warmup {
    threads: Vec<std::thread::JoinHandle<()>>,
    recipes: usize,
}

impl Warmup {
    /// How many recorded pipelines are being built.
    pub fn recipes(&self) -> usize {
        self.recipes
    }

    /// Waits until every recorded pipeline is built (or failed: a recipe that no longer builds
    /// is left to the kernel that asks for it, which then reports the error itself).
    pub fn wait(mut self) {
        self.join();
    }

    fn join(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Warmup {
    fn drop(&mut self) {
        self.join();
    }
}

impl Device {
    /// Builds, on other threads, the built-in pipelines `workload` built on this adapter in
    /// earlier processes (its record in the persistent pipeline cache), and records from now on
    /// what this process builds for the next one. Returns at once; a kernel that asks for a
    /// pipeline built ahead takes it instead of building its own. Nothing where the persistent
    /// cache is off (`KILN_CACHE=0`) or the adapter has no pipeline cache.
    pub fn warm_pipelines(self: &Arc<Device>, workload: &str) -> Warmup {
        let Some(persistent) = self.pipelines.persistent.clone() else { return Warmup::default() };
        let recipes = persistent.start_warm_record(workload);
        if recipes.is_empty() || self.check_alive().is_err() {
            return Warmup::default();
        }
        let n = recipes.len();
        // One thread per core left to the caller, at most four: the driver's compiler (or cache
        // look-up) and naga's translation are each single-threaded per pipeline.
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let threads = (cores.saturating_sub(1)).clamp(1, 4).min(n);
        let recipes = Arc::new(recipes);
        let mut out = Warmup { threads: Vec::new(), recipes: n };
        for t in 0..threads {
            let (dev, recipes, persistent) = (self.clone(), recipes.clone(), persistent.clone());
            let spawned = std::thread::Builder::new().name("kiln-pipeline-warmup".into()).spawn(move || {
                let _s = crate::startup::span("pipelines built ahead (recorded workload)");
                for r in recipes.iter().skip(t).step_by(threads) {
                    if dev.is_lost() {
                        return;
                    }
                    let _one = crate::startup::span("pipeline built ahead");
                    if let Ok(p) = r.build(&dev.device, Some(persistent.cache())) {
                        persistent.warm.built.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        persistent
                            .warm
                            .ready
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(r.label.clone(), (Arc::new(p), r.clone()));
                        persistent.note_compile();
                    }
                }
            });
            if let Ok(h) = spawned {
                out.threads.push(h);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Recipe> {
        vec![
            Recipe {
                label: "add f32".into(),
                op: Some("add".into()),
                entry: "main".into(),
                checks: Checks::Unchecked,
                source: "@compute @workgroup_size(64) fn main() {}".into(),
            },
            Recipe {
                label: "ünïcode".into(),
                op: None,
                entry: "main".into(),
                checks: Checks::Bounded,
                source: String::new(),
            },
        ]
    }

    #[test]
    fn recipes_round_trip_and_damage_is_refused() {
        let r = sample();
        let b = encode_recipes(&r);
        assert_eq!(decode_recipes(&b).unwrap(), r);
        assert_eq!(decode_recipes(&encode_recipes(&[])).unwrap(), vec![]);
        for n in 0..b.len() {
            assert!(decode_recipes(&b[..n]).is_none(), "truncated to {n}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode_recipes(&longer).is_none());
        // A count past the bound, a bad flag byte, a length past the end.
        let mut many = b.clone();
        many[..4].copy_from_slice(&(MAX_RECIPES as u32 + 1).to_le_bytes());
        assert!(decode_recipes(&many).is_none());
        let mut flag = b.clone();
        flag[4] = 7;
        assert!(decode_recipes(&flag).is_none());
        let mut len = b.clone();
        len[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_recipes(&len).is_none());
    }
}

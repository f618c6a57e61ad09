//! Building a workload's recorded pipelines ahead (`pipeline_record` keeps the record): on a
//! few threads, into a map the pipeline cache looks in on a miss before it compiles. A kernel
//! takes a pipeline built ahead only for its very recipe (source included).

use super::compile::{compile_with, Checks, Pipeline};
use super::PipelineCache;
use crate::pipeline_record::Recipe;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

/// Pipelines built ahead, by label, with the recipe each was built from, and the labels still
/// being built (a kernel asking for one waits for it rather than building it a second time).
#[derive(Default)]
pub(crate) struct Ready {
    state: Mutex<ReadyState>,
    done: Condvar,
}

#[derive(Default)]
struct ReadyState {
    built: HashMap<String, (Arc<Pipeline>, Recipe)>,
    pending: HashSet<String>,
}

impl Ready {
    fn lock(&self) -> std::sync::MutexGuard<'_, ReadyState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `label` is no longer being built (with its pipeline, where it built).
    fn finish(&self, label: &str, built: Option<(Arc<Pipeline>, Recipe)>) {
        let mut s = self.lock();
        s.pending.remove(label);
        if let Some(b) = built {
            s.built.insert(label.to_string(), b);
        }
        self.done.notify_all();
    }
}

/// Clears a warm-up thread's labels from `pending` however it ends (a panic included), so no
/// kernel waits for a pipeline nobody builds.
struct PendingGuard<'a> {
    ready: &'a Ready,
    labels: Vec<String>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        for l in self.labels.drain(..) {
            self.ready.finish(&l, None);
        }
    }
}

fn build(device: &wgpu::Device, r: &Recipe, cache: Option<&wgpu::PipelineCache>) -> crate::Result<Pipeline> {
    let checks = if r.unchecked { Checks::Unchecked } else { Checks::Bounded };
    compile_with(device, &r.label, &r.source, &r.entry, checks, true, None, r.op.as_deref(), cache)
}

/// The threads building a workload's recorded pipelines (`Device::warm_pipelines`): joined by
/// [`wait`](Warmup::wait), or when dropped, so none outlives its caller.
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

impl PipelineCache {
    /// Starts recording `workload` and building its recorded pipelines on other threads.
    pub(crate) fn warm_up(&self, device: &wgpu::Device, workload: &str) -> Warmup {
        let Some(persistent) = self.persistent.clone() else { return Warmup::default() };
        let recipes = persistent.start_warm_record(workload);
        if recipes.is_empty() {
            return Warmup::default();
        }
        let n = recipes.len();
        // One thread per core left to the caller, at most four: the driver's compiler (or cache
        // look-up) and naga's translation each take one pipeline at a time.
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let threads = cores.saturating_sub(1).clamp(1, 4).min(n);
        let recipes = Arc::new(recipes);
        let mut out = Warmup { threads: Vec::new(), recipes: n };
        for t in 0..threads {
            let mine: Vec<String> = recipes.iter().skip(t).step_by(threads).map(|r| r.label.clone()).collect();
            self.ready.lock().pending.extend(mine.iter().cloned());
            let (device, recipes, persistent, ready) =
                (device.clone(), recipes.clone(), persistent.clone(), self.ready.clone());
            let labels = mine.clone();
            let spawned = std::thread::Builder::new().name("kiln-pipeline-warmup".into()).spawn(move || {
                let mut guard = PendingGuard { ready: &ready, labels };
                let _s = crate::startup::span("pipelines built ahead (recorded workload)");
                for r in recipes.iter().skip(t).step_by(threads) {
                    let _one = crate::startup::span("pipeline built ahead");
                    let built = build(&device, r, Some(persistent.cache())).ok().map(|p| (Arc::new(p), r.clone()));
                    if built.is_some() {
                        persistent.record.built.fetch_add(1, Ordering::Relaxed);
                        persistent.note_compile();
                    }
                    guard.labels.retain(|l| *l != r.label);
                    ready.finish(&r.label, built);
                }
            });
            match spawned {
                Ok(h) => out.threads.push(h),
                // Nobody will build these: the kernels build their own.
                Err(_) => drop(PendingGuard { ready: &self.ready, labels: mine }),
            }
        }
        out
    }

    /// The pipeline built ahead for exactly `recipe`, if any (taken: it is the caller's now).
    /// Waits for it where it is still being built.
    pub(crate) fn take_ahead(&self, recipe: &Recipe) -> Option<Arc<Pipeline>> {
        let mut s = self.ready.lock();
        while s.pending.contains(&recipe.label) && !s.built.contains_key(&recipe.label) {
            let _wait = crate::startup::span("waited for a pipeline being built ahead");
            s = self.ready.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        match s.built.get(&recipe.label) {
            Some((_, r)) if r == recipe => {}
            _ => return None,
        }
        if let Some(p) = &self.persistent {
            p.record.taken.fetch_add(1, Ordering::Relaxed);
        }
        s.built.remove(&recipe.label).map(|(p, _)| p)
    }
}

//! Data parallel work over several GPUs (issue 35): one copy of a model per device, loaded from
//! the same files; a call's work dealt to the devices in proportion to each device's share
//! (equal by default) and run at once, one thread per device (each device has its own queue, so
//! the GPUs work side by side); the results joined in input order.
//!
//! - [`SentenceEmbedder`](crate::SentenceEmbedder): the one-device call's batches (length-sorted,
//!   `batch_size` each) dealt whole ([`assign`]), so a row's bits are those the one-device call
//!   gives it on the device that ran its batch: on GPUs of one model and driver, the one-device
//!   result bit for bit. Fewer batches than devices: the sorted texts cut into one part per
//!   device ([`split`]).
//! - [`CausalLM`](crate::CausalLM) batched generation: the prompts cut into contiguous parts
//!   ([`split`]), one batch per device; each sequence's tokens are those it gets on one device.
//!
//! How a copy lands on its device: kiln-models names no device (its loaders make tensors on
//! kiln-core's default device), so each copy is loaded on a thread inside
//! [`kiln_core::with_device`] for its device, and runs where its weights are.
//! `models/tests/replicas.rs` checks all of this on two adapters.
//!
//! ```no_run
//! use kiln_models::{EncodeOptions, LoadOptions, SentenceEmbedder, replicas};
//! let model = SentenceEmbedder::load_replicated("build/models/all-MiniLM-L6-v2", &replicas::all_devices()?, LoadOptions::default())?;
//! let e = model.encode_with(&["Hello world", "GPUs everywhere"], EncodeOptions::default())?;
//! assert_eq!(e.rows, 2);
//! # Ok::<(), kiln_models::ModelError>(())
//! ```

use crate::error::{ModelError, Result};
use kiln_core::device::Device;
#[cfg(not(target_arch = "wasm32"))]
use std::borrow::Borrow;
use std::ops::Range;
use std::sync::Arc;

/// One copy of a model per device (see the module's doc). `T` is the one-device model:
/// [`SentenceEmbedder`](crate::SentenceEmbedder) or [`CausalLM`](crate::CausalLM).
pub struct Replicas<T> {
    copies: Vec<(Arc<Device>, T)>,
    /// Each device's share of a call's inputs (positive, normalised to sum to 1).
    shares: Vec<f64>,
}

/// The devices of adapters `indices` (as `kiln devices` lists them), each once and in the
/// order given; an index past the adapters is an error naming how many there are.
pub fn devices(indices: &[usize]) -> Result<Vec<Arc<Device>>> {
    let rt = kiln_core::runtime();
    let n = rt.adapters().len();
    let mut seen = Vec::new();
    for &i in indices {
        if i >= n {
            return Err(invalid(format!("device {i}: this machine has {n} adapter(s) (`kiln devices` lists them)")));
        }
        if seen.contains(&i) {
            return Err(invalid(format!(
                "device {i} named twice (one copy per device: a second copy on one GPU shares its queue)"
            )));
        }
        seen.push(i);
    }
    Ok(indices.iter().map(|&i| rt.device_at(i)).collect::<kiln_core::Result<Vec<_>>>()?)
}

/// Every GPU of this machine: the adapters of the best kind through the best backend
/// ([`kiln_core::AdapterInfo`]'s list is sorted best first), so that one GPU seen through two
/// backends (Vulkan and GL) or a software fallback beside the GPUs is not counted twice.
pub fn all_devices() -> Result<Vec<Arc<Device>>> {
    devices(&kiln_core::adapter::same_kind_as_best(&kiln_core::adapters()))
}

/// `n` items cut into contiguous ranges, one per share, sized in proportion (largest
/// remainders get the leftover items; ties to the earlier share). Empty ranges where `n` is
/// smaller than the number of shares.
pub fn split(n: usize, shares: &[f64]) -> Vec<Range<usize>> {
    let total: f64 = shares.iter().sum();
    if shares.is_empty() || !(total.is_finite() && total > 0.0) {
        // Not shares `set_shares` lets through: equal parts rather than lost items.
        return split(n, &vec![1.0; shares.len().max(1)])[..shares.len()].to_vec();
    }
    let exact: Vec<f64> = shares.iter().map(|s| n as f64 * s / total).collect();
    let mut sizes: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = n - sizes.iter().sum::<usize>().min(n);
    let mut by_remainder: Vec<usize> = (0..shares.len()).collect();
    by_remainder
        .sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    // Fewer than shares.len() items are left (each floor lost less than one).
    for &k in by_remainder.iter().cycle() {
        if left == 0 {
            break;
        }
        sizes[k] += 1;
        left -= 1;
    }
    let mut start = 0;
    sizes
        .into_iter()
        .map(|s| {
            let r = start..start + s;
            start += s;
            r
        })
        .collect()
}

impl<T: Send + Sync> Replicas<T> {
    /// Loads one copy per device with `load` (called on a thread of its own per device, inside
    /// [`kiln_core::with_device`], so that the copies load at once and each onto its device).
    /// No device is an error; an error of any load is the call's, naming the device.
    pub fn load(devices: &[Arc<Device>], load: impl Fn() -> Result<T> + Sync) -> Result<Replicas<T>> {
        if devices.is_empty() {
            return Err(invalid("no device to load the model on (an empty device list)".into()));
        }
        for (i, d) in devices.iter().enumerate() {
            if devices[..i].iter().any(|e| Arc::ptr_eq(d, e)) {
                return Err(invalid(format!(
                    "device {} ({}) named twice (one copy per device)",
                    d.info().index,
                    d.info().name
                )));
            }
        }
        let loaded = on_each(devices, devices.len() > 1, |_| load())?;
        let equal = vec![1.0 / devices.len() as f64; devices.len()];
        Ok(Replicas { copies: devices.iter().cloned().zip(loaded).collect(), shares: equal })
    }

    /// Sets each device's share of a call's inputs, in the devices' order (default: equal;
    /// e.g. `[2.0, 1.0]` for a GPU twice as fast as the other). A share that is not a finite
    /// positive number, or a count other than the devices', is an error and changes nothing.
    pub fn set_shares(&mut self, shares: &[f64]) -> Result<()> {
        if shares.len() != self.copies.len() || shares.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(invalid(format!(
                "shares {shares:?}: one finite positive number per device ({} devices)",
                self.copies.len()
            )));
        }
        // Over the largest first: shares near f64::MAX would sum to infinity.
        let max = shares.iter().copied().fold(0.0, f64::max);
        let total: f64 = shares.iter().map(|s| s / max).sum();
        self.shares = shares.iter().map(|s| s / max / total).collect();
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.copies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// The devices, in the order their parts of an input are taken.
    pub fn devices(&self) -> Vec<Arc<Device>> {
        self.copies.iter().map(|(d, _)| d.clone()).collect()
    }

    /// The copy on the `k`-th device.
    pub fn get(&self, k: usize) -> Option<&T> {
        self.copies.get(k).map(|(_, m)| m)
    }

    /// The copy on the first device (every copy answers the same questions: dim, tokenizer, ...).
    pub fn first(&self) -> &T {
        &self.copies[0].1
    }

    pub fn shares(&self) -> &[f64] {
        &self.shares
    }

    /// How `n` inputs are split: one contiguous range per device, in the devices' order.
    pub fn split(&self, n: usize) -> Vec<Range<usize>> {
        split(n, &self.shares)
    }

    /// Runs `f(copy, range)` for each device's part of `n` inputs, at once (a thread per device
    /// with a non-empty part, each inside `with_device` for its device); the results in the
    /// devices' order, one per non-empty part, with its range. An error (or a panic) of any part
    /// is the call's: the first device's that failed, naming it, and how many others failed.
    pub fn map_parts<R: Send>(
        &self,
        n: usize,
        f: impl Fn(&T, Range<usize>) -> Result<R> + Sync,
    ) -> Result<Vec<(Range<usize>, R)>> {
        let parts: Vec<(usize, Range<usize>)> =
            self.split(n).into_iter().enumerate().filter(|(_, r)| !r.is_empty()).collect();
        let devices: Vec<Arc<Device>> = parts.iter().map(|(k, _)| self.copies[*k].0.clone()).collect();
        let out = on_each(&devices, self.len() > 1, |j| {
            let (k, r) = &parts[j];
            f(&self.copies[*k].1, r.clone())
        })?;
        Ok(parts.into_iter().map(|(_, r)| r).zip(out).collect())
    }
}

/// `f(j)` for each `devices[j]`, on a thread per device inside `with_device` (inline for one
/// device); results in order; the first failure (by device order) named (`name`: a model of
/// one device names none, its errors as they were), the others counted.
fn on_each<R: Send>(devices: &[Arc<Device>], name: bool, f: impl Fn(usize) -> Result<R> + Sync) -> Result<Vec<R>> {
    let results: Vec<Result<R>> = if devices.len() == 1 {
        vec![kiln_core::with_device(&devices[0], || catch(|| f(0)))]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = devices
                .iter()
                .enumerate()
                .map(|(j, d)| {
                    let f = &f;
                    std::thread::Builder::new()
                        .name(format!("kiln-replica-{}", d.info().index))
                        .spawn_scoped(s, move || kiln_core::with_device(d, || catch(|| f(j))))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|p| Err(ModelError::Kiln(kiln_core::Error::from_panic(p)))),
                    Err(e) => Err(ModelError::Kiln(kiln_core::Error::Internal(format!("no thread for a device: {e}")))),
                })
                .collect()
        })
    };
    let failed = results.iter().filter(|r| r.is_err()).count();
    let mut out = Vec::with_capacity(results.len());
    for (j, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => out.push(v),
            Err(e) if !name => return Err(e),
            Err(e) => {
                let d = devices[j].info();
                return Err(ModelError::OnDevice {
                    device: d.index,
                    name: format!("{}, {}", d.name, d.backend),
                    others_failed: failed - 1,
                    source: Box::new(e),
                });
            }
        }
    }
    Ok(out)
}

/// A bad device list or share: kiln-core's InvalidArgument (Python's ValueError).
fn invalid(message: String) -> ModelError {
    ModelError::Kiln(kiln_core::Error::InvalidArgument(message))
}

/// A panic of a part's work as an error, not a torn-down call.
fn catch<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(ModelError::Kiln(kiln_core::Error::from_panic(p))))
}

impl crate::SentenceEmbedder {
    /// One copy of the model in `dir` on each of `devices` (see [`Replicas`]), loaded at once.
    /// F16 on a device without SHADER_F16 is that device's `Unsupported` error.
    pub fn load_replicated(
        dir: impl AsRef<std::path::Path>,
        devices: &[Arc<Device>],
        options: crate::LoadOptions,
    ) -> Result<Replicas<crate::SentenceEmbedder>> {
        let dir = dir.as_ref();
        Replicas::load(devices, || crate::SentenceEmbedder::load_with(dir, options, |_, _| {}))
    }
}

impl Replicas<crate::SentenceEmbedder> {
    /// Embeddings of `texts` with the default options, spread over the devices.
    pub fn encode(&self, texts: &[&str]) -> Result<crate::Embeddings> {
        self.encode_with(texts, crate::EncodeOptions::default())
    }

    /// [`SentenceEmbedder::encode_with`](crate::SentenceEmbedder::encode_with) over the devices,
    /// with its batches: the texts tokenized, sorted by length and cut into batches of
    /// `opts.batch_size` as on one device, then the batches dealt to the devices (the costliest
    /// first, each to the device whose share is least used: [`assign`]), each device running
    /// its batches in turn; rows back in input order. So a row's bits are those of the one-device
    /// call on the device that ran its batch. Fewer batches than devices (one batch of 256 over 4
    /// GPUs): the sorted texts are cut into one part per device, in proportion to the shares,
    /// each part batched on its own (a row's bits then those of a one-device call on that
    /// part).
    pub fn encode_with(&self, texts: &[&str], opts: crate::EncodeOptions) -> Result<crate::Embeddings> {
        let first = self.first();
        let dim = first.dim();
        let plan = first.plan(texts, opts)?;
        let mut batches: Vec<&[usize]> = plan.chunks().collect();
        let per_device: Vec<Vec<usize>> = if batches.len() >= self.len() {
            let cost: Vec<f64> = batches.iter().map(|b| (b.len() * plan.tokens[b[0]].0.len().max(1)) as f64).collect();
            assign(&cost, &self.shares)
        } else {
            batches.clear();
            let mut per = vec![Vec::new(); self.len()];
            for (k, r) in self.split(texts.len()).into_iter().enumerate() {
                for chunk in plan.order[r].chunks(plan.batch_size) {
                    per[k].push(batches.len());
                    batches.push(chunk);
                }
            }
            per
        };
        let busy: Vec<usize> = (0..self.len()).filter(|&k| !per_device[k].is_empty()).collect();
        let devices: Vec<Arc<Device>> = busy.iter().map(|&k| self.copies[k].0.clone()).collect();
        let outs = on_each(&devices, self.len() > 1, |j| {
            let k = busy[j];
            let model = &self.copies[k].1;
            per_device[k]
                .iter()
                .map(|&b| {
                    Ok((
                        b,
                        model
                            .record_batch(&plan.batch(batches[b]), plan.normalize, &mut |_| Ok(()))?
                            .to_vec::<f32>()?,
                    ))
                })
                .collect::<Result<Vec<_>>>()
        })?;
        let mut data = vec![0f32; texts.len() * dim];
        for (b, out) in outs.into_iter().flatten() {
            plan.scatter(batches[b], &out, &mut data);
        }
        Ok(crate::Embeddings { data, rows: texts.len(), dim })
    }
}

/// Deals jobs of `cost` to devices of `shares`: the costliest job first (ties to the earlier
/// job), each to the device whose load after it, relative to its share, is least (ties to the
/// earlier device). Each device's jobs in increasing index. Deterministic: the same inputs
/// give the same split, so a call's bits repeat.
pub fn assign(cost: &[f64], shares: &[f64]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..cost.len()).collect();
    order.sort_by(|&a, &b| cost[b].total_cmp(&cost[a]).then(a.cmp(&b)));
    let mut load = vec![0f64; shares.len()];
    let mut jobs = vec![Vec::new(); shares.len()];
    for j in order {
        let k = (0..shares.len())
            .min_by(|&a, &b| {
                ((load[a] + cost[j]) / shares[a]).total_cmp(&((load[b] + cost[j]) / shares[b])).then(a.cmp(&b))
            })
            .unwrap_or(0);
        load[k] += cost[j];
        jobs[k].push(j);
    }
    for j in &mut jobs {
        j.sort_unstable();
    }
    jobs
}

#[cfg(not(target_arch = "wasm32"))]
impl crate::CausalLM {
    /// One copy of the GGUF model at `path` on each of `devices` (the GPU backend on each, also
    /// on a software adapter: the devices were named), loaded at once. (`Replicas::load(devices,
    /// || CausalLM::load_on(path, Backend::Gpu, |_, _| {}).map(Arc::new))` shares the copies.)
    pub fn load_replicated(
        path: impl AsRef<std::path::Path>,
        devices: &[Arc<Device>],
    ) -> Result<Replicas<crate::CausalLM>> {
        let path = path.as_ref();
        Replicas::load(devices, || crate::CausalLM::load_on(path, crate::Backend::Gpu, |_, _| {}))
    }
}

/// For copies held as `CausalLM` or shared as `Arc<CausalLM>` (a binding that also streams
/// from the first copy).
#[cfg(not(target_arch = "wasm32"))]
impl<M: Borrow<crate::CausalLM> + Send + Sync> Replicas<M> {
    /// [`CausalLM::generate_batch`](crate::CausalLM::generate_batch) and its `run` over the
    /// devices: each device generates its contiguous part of `prompts` as one batch; the outputs
    /// in prompt order. `opts`: one for all, or one per prompt (a sequence samples with its own
    /// seed, so its tokens do not depend on which device or batch it ran in).
    pub fn generate_batch(
        &self,
        prompts: &[&str],
        opts: &[crate::GenerateOptions],
    ) -> Result<(Vec<crate::BatchOutput>, crate::BatchStats)> {
        let tok = self.first().borrow().tokenizer();
        let ids = prompts.iter().map(|p| tok.encode(p)).collect::<Result<Vec<_>>>()?;
        self.generate_batch_from_ids(ids, opts, crate::BatchProducts::default())
    }

    /// [`generate_batch`](Self::generate_batch) from token ids, with the batches' weight-product
    /// kernel. The stats: tokens and sequences summed over the devices; times (prefill, decode)
    /// and steps the slowest device's (the parts run at once).
    pub fn generate_batch_from_ids(
        &self,
        prompts: Vec<Vec<u32>>,
        opts: &[crate::GenerateOptions],
        products: crate::BatchProducts,
    ) -> Result<(Vec<crate::BatchOutput>, crate::BatchStats)> {
        if opts.len() != 1 && opts.len() != prompts.len() {
            return Err(ModelError::Unsupported(format!(
                "{} generate options for {} prompts (one for all, or one each)",
                opts.len(),
                prompts.len()
            )));
        }
        let parts = self.map_parts(prompts.len(), |m, r| {
            let o = if opts.len() == 1 { opts } else { &opts[r.clone()] };
            m.borrow().generate_batch_from_ids(prompts[r].to_vec(), o)?.with_products(products).run()
        })?;
        let mut outputs = Vec::with_capacity(prompts.len());
        let mut stats = crate::BatchStats::default();
        for (_, (out, s)) in parts {
            outputs.extend(out);
            stats.sequences += s.sequences;
            stats.prompt_tokens += s.prompt_tokens;
            stats.generated_tokens += s.generated_tokens;
            stats.decode_tokens += s.decode_tokens;
            stats.steps = stats.steps.max(s.steps);
            stats.prefill = stats.prefill.max(s.prefill);
            stats.decode = stats.decode.max(s.decode);
        }
        Ok((outputs, stats))
    }
}

//! Custom WGSL kernels: validated by naga (errors carry line:column), reflected so that every
//! dispatch is checked against the kernel's bindings (count, element type, size) before wgpu
//! sees it. User kernels always keep naga's runtime bounds checks. Compilation runs on its own
//! thread, within the limits of `kernel_limits` (source size, stack, time, workgroup and private
//! memory), so that no kernel can crash, hang or exhaust the process that compiles it.

mod compile;

use crate::device::{Binding, Device, Verdict, MAX_PARAMS_BYTES};
use crate::dtype::DType;
use crate::kernel_limits;
use crate::pipeline::{Pipeline, USER_KEY_PREFIX};
use crate::session::SessionInner;
use crate::tensor::Tensor;
use crate::{runtime, Error, Result};
use compile::CompileJob;
pub use compile::{StorageBinding, UniformBinding};
use std::sync::Arc;

pub struct Kernel {
    device: Arc<Device>,
    /// The session it was compiled in (None: the default session): closing it retires the kernel.
    owner: Option<Arc<SessionInner>>,
    pipeline: Arc<Pipeline>,
    entry: String,
    storage: Vec<StorageBinding>,
    uniform: Option<UniformBinding>,
    workgroup_size: [u32; 3],
    /// Where the loop-budget buffer binds (a session's kernel with loops).
    guard_binding: Option<u32>,
    /// Operations one pass through the code counts (`session::kernel_cost`).
    ops_per_pass: u64,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("entry", &self.entry)
            .field("storage", &self.storage)
            .field("uniform", &self.uniform)
            .field("workgroup_size", &self.workgroup_size)
            .finish()
    }
}

/// The loop-budget verdict of one dispatch of a sandboxed kernel (see `session::loop_guard`):
/// read back, once, when a tensor it wrote is first read.
struct LoopVerdict {
    guard: Tensor,
    entry: String,
    owner: Arc<SessionInner>,
    seen: std::sync::OnceLock<Result<()>>,
}

impl Verdict for LoopVerdict {
    fn check(&self) -> Result<()> {
        if let Some(r) = self.seen.get() {
            return r.clone();
        }
        let words = self.guard.to_vec::<u32>()?;
        self.judge(&words)
    }

    #[cfg(target_arch = "wasm32")]
    fn unsettled(&self) -> Option<(Arc<Device>, wgpu::Buffer, usize)> {
        self.seen.get().is_none().then(|| (self.guard.device.clone(), self.guard.raw().clone(), self.guard.nbytes()))
    }

    #[cfg(target_arch = "wasm32")]
    fn settle(&self, words: &[u32]) {
        let _ = self.judge(words);
    }
}

impl LoopVerdict {
    /// The verdict of the guard's words (`[budget, exhausted]`), decided once.
    fn judge(&self, words: &[u32]) -> Result<()> {
        if let Some(r) = self.seen.get() {
            return r.clone();
        }
        let r = if words[1] != 0 {
            let e = Error::ComputeLimit(format!(
                "kernel {:?} ran out of its loop budget ({} iterations per invocation in session {}) and stopped \
                 early: what it wrote is invalid",
                self.entry,
                words[0],
                self.owner.id()
            ));
            self.owner.loop_budget_hit(&e);
            Err(e)
        } else {
            Ok(())
        };
        self.seen.get_or_init(|| r).clone()
    }
}

/// The pipeline cache's key of a user kernel.
fn user_key(source: &str, entry: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut h);
    format!("{USER_KEY_PREFIX}{:016x}:{entry}", h.finish())
}

/// The audit log's name for a source: FNV-1a 64, stable across processes and builds (unlike
/// the cache key's hasher), so that events of one kernel can be matched over time.
fn source_hash(source: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in source.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    format!("fnv1a64:{h:016x}")
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Some(s) = &self.owner {
            s.release_kernel();
        }
    }
}

impl Kernel {
    pub fn new(source: &str, entry: &str) -> Result<Kernel> {
        Self::new_on(&runtime::device()?, source, entry)
    }

    /// Compiles `source` on a compile thread with a stack sized for the largest accepted source,
    /// after checking it against the limits of `kernel_limits` (size, workgroup and private
    /// memory: `Error::Shader`); a compile past `KILN_COMPILE_TIMEOUT_MS` is `Error::Timeout`.
    pub fn new_on(device: &Arc<Device>, source: &str, entry: &str) -> Result<Kernel> {
        device.check_alive()?;
        let owner = crate::session::current_inner();
        if let Some(s) = &owner {
            s.check_open()?;
            // At its kernel limit a session compiles nothing: refused before any compile time.
            s.check_kernel_room()?;
        }
        let mut result = Self::compile(device, source, entry, owner.as_ref());
        if let (Some(s), Ok(k)) = (&owner, &mut result) {
            // Charged once compiled, so that a kernel the policy refuses says SHADER whatever
            // the quota; a kernel refused here is dropped uncharged.
            if let Err(e) = s.charge_kernel() {
                k.owner = None;
                result = Err(e);
            }
        }
        if let Some(s) = &owner {
            let refused = matches!(&result, Err(Error::Shader(m)) if m.contains("policy:"));
            if refused {
                s.policy_rejected();
            }
            crate::session::event("kernel_compiled", |m| {
                m.insert("session".into(), s.id().into());
                m.insert("source_hash".into(), source_hash(source).into());
                m.insert("source_bytes".into(), source.len().into());
                m.insert("entry".into(), entry.into());
                m.insert("policy".into(), if refused { "refused" } else { "allowed" }.into());
                match &result {
                    Ok(k) => {
                        m.insert("bounded_loops".into(), k.guard_binding.is_some().into());
                    }
                    Err(e) => crate::session::error_fields(m, e),
                }
            });
            if result.is_ok() {
                s.kernel_compiled();
            }
        }
        result
    }

    fn compile(device: &Arc<Device>, source: &str, entry: &str, owner: Option<&Arc<SessionInner>>) -> Result<Kernel> {
        kernel_limits::check_source_size(source)?;
        let sandbox = owner.map(|s| s.limits().policy.clone());
        let mut key = user_key(source, entry);
        if sandbox.is_some() {
            // The same source bounded is another pipeline.
            key += ":bounded";
        }
        let cached = device.pipelines.get_cached(&key);
        let job = CompileJob {
            device: device.device.clone(),
            has_f16: device.has_f16(),
            workgroup_limit: device.limits.max_compute_workgroup_storage_size,
            source: source.to_string(),
            entry: entry.to_string(),
            label: key.clone(),
            build_pipeline: cached.is_none(),
            sandbox,
        };
        let start = crate::platform::Instant::now();
        let compiled = kernel_limits::run_compile(&format!("kernel {entry:?}"), move || job.run())?;
        let pipeline = match (cached, compiled.pipeline) {
            (Some(p), _) => p,
            (None, Some(p)) => {
                device.pipelines.record_compile(start.elapsed());
                let p = device.pipelines.insert(&key, Arc::new(p));
                if device.pipelines.evicted_at_least(64) {
                    // Lets the driver free evicted pipelines even if nothing is dispatched.
                    device.submit_now();
                }
                p
            }
            (None, None) => return Err(Error::Internal("kernel compiled without a pipeline".into())),
        };
        Ok(Kernel {
            device: device.clone(),
            owner: owner.cloned(),
            guard_binding: compiled.guard_binding,
            ops_per_pass: compiled.ops_per_pass,
            pipeline,
            entry: entry.to_string(),
            storage: compiled.storage,
            uniform: compiled.uniform,
            workgroup_size: compiled.workgroup_size,
        })
    }

    /// `new`, then waits for the driver's verdict on the pipeline: in the browser the WGSL is
    /// compiled again by the browser's own compiler, whose errors arrive as a promise (natively
    /// `new` already waited for them).
    pub async fn new_async(source: &str, entry: &str) -> Result<Kernel> {
        let k = Self::new(source, entry)?;
        #[cfg(target_arch = "wasm32")]
        if let Err(e) = crate::platform::settle_scopes().await {
            k.device.pipelines.forget_user(&user_key(source, entry));
            return Err(e);
        }
        Ok(k)
    }

    pub fn entry(&self) -> &str {
        &self.entry
    }
    pub fn storage_bindings(&self) -> &[StorageBinding] {
        &self.storage
    }
    pub fn uniform_binding(&self) -> Option<&UniformBinding> {
        self.uniform.as_ref()
    }
    pub fn workgroup_size(&self) -> [u32; 3] {
        self.workgroup_size
    }

    /// Operations one pass through the kernel's code counts against a session's compute
    /// limits: its inlined size (expressions and statements, every call site's callee added)
    /// over 64, at least 1. A dispatch counts invocations × passes × this, where passes is
    /// 1 + the loop budget for a kernel with loops and 1 without.
    pub fn ops_per_pass(&self) -> u64 {
        self.ops_per_pass
    }

    /// Binds `tensors` to the storage bindings in binding order, `uniforms` to the uniform
    /// binding, and queues `workgroups` workgroups.
    pub fn dispatch(&self, tensors: &[&Tensor], uniforms: Option<&[u8]>, workgroups: [u32; 3]) -> Result<()> {
        let r = self.dispatch_checked(tensors, uniforms, workgroups);
        if let (Err(e), Some(owner)) = (&r, &self.owner) {
            crate::session::event("error", |m| {
                m.insert("session".into(), owner.id().into());
                m.insert("entry".into(), self.entry.as_str().into());
                m.insert("during".into(), "dispatch".into());
                crate::session::error_fields(m, e);
            });
        }
        r
    }

    fn dispatch_checked(&self, tensors: &[&Tensor], uniforms: Option<&[u8]>, workgroups: [u32; 3]) -> Result<()> {
        if let Some(s) = &self.owner {
            if s.is_closed() {
                return Err(Error::InvalidArgument(format!(
                    "kernel {:?} belonged to session {}, which was closed",
                    self.entry,
                    s.id()
                )));
            }
        }
        if tensors.len() != self.storage.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel {:?} has {} storage bindings but {} tensors were given",
                self.entry,
                self.storage.len(),
                tensors.len()
            )));
        }
        for (i, (t, b)) in tensors.iter().zip(&self.storage).enumerate() {
            if !Arc::ptr_eq(t.device(), &self.device) {
                return Err(Error::InvalidArgument(format!("tensor {i} lives on another device than the kernel")));
            }
            if t.dtype() == DType::Bool {
                // Its words must stay 0/1 for the ops that read it; a kernel could write anything.
                return Err(Error::DTypeMismatch(format!(
                    "tensor {i} is bool, which custom kernels do not take: cast it to u32 (and back) first"
                )));
            }
            if let Some(dt) = b.dtype {
                if b.raw_words && dt != t.dtype() {
                    return Err(Error::DTypeMismatch(format!(
                        "binding {} ({}) is a struct of mixed scalar types, which takes raw 32-bit words: \
                         bind a u32 tensor holding its bytes (tensor {i} is {})",
                        b.binding,
                        b.name,
                        t.dtype()
                    )));
                }
                if dt != t.dtype() {
                    return Err(Error::DTypeMismatch(format!(
                        "binding {} ({}) holds {dt} but tensor {i} is {}",
                        b.binding,
                        b.name,
                        t.dtype()
                    )));
                }
            }
            if (t.nbytes() as u64) < b.min_bytes {
                return Err(Error::InvalidArgument(format!(
                    "binding {} ({}) needs at least {} bytes but tensor {i} has {}",
                    b.binding,
                    b.name,
                    b.min_bytes,
                    t.nbytes()
                )));
            }
            if b.reads_array_length && t.nbytes() % 4 != 0 {
                return Err(Error::InvalidArgument(format!(
                    "binding {} ({}) is read with arrayLength, but tensor {i} has {} bytes: bindings are whole \
                     4-byte words, so arrayLength would count the padding; give it an even number of {} elements",
                    b.binding,
                    b.name,
                    t.nbytes(),
                    t.dtype()
                )));
            }
            for (j, (u, c)) in tensors.iter().zip(&self.storage).enumerate().skip(i + 1) {
                if t.shares_buffer(u) && (b.writable || c.writable) {
                    return Err(Error::InvalidArgument(format!(
                        "tensors {i} and {j} share one buffer and one of their bindings is writable"
                    )));
                }
            }
        }
        let params = match (&self.uniform, uniforms) {
            (Some(u), Some(bytes)) => {
                if (bytes.len() as u64) < u.min_bytes {
                    return Err(Error::InvalidArgument(format!(
                        "the uniform binding needs {} bytes, {} given",
                        u.min_bytes,
                        bytes.len()
                    )));
                }
                if bytes.len() > MAX_PARAMS_BYTES {
                    return Err(Error::InvalidArgument(format!("uniforms are limited to {MAX_PARAMS_BYTES} bytes")));
                }
                Some((u.binding, bytes))
            }
            (Some(u), None) => {
                return Err(Error::InvalidArgument(format!(
                    "the kernel has a uniform binding ({} bytes) but no uniforms were given",
                    u.min_bytes
                )))
            }
            (None, Some(b)) if !b.is_empty() => {
                return Err(Error::InvalidArgument("uniforms were given but the kernel has no uniform binding".into()))
            }
            (None, _) => None,
        };
        let guard = match (self.guard_binding, &self.owner) {
            (Some(slot), Some(owner)) => Some((slot, owner, self.guard_buffer(owner)?)),
            _ => None,
        };
        let mut bindings: Vec<Binding<'_>> = tensors
            .iter()
            .zip(&self.storage)
            .map(|(t, b)| Binding {
                slot: b.binding,
                buffer: t.raw(),
                size: Some((t.nbytes() as u64).next_multiple_of(4).max(4)),
            })
            .collect();
        if let Some((slot, _, g)) = &guard {
            bindings.push(Binding { slot: *slot, buffer: g.raw(), size: None });
        }
        // The whole dispatch's work, bounded before it is submitted: every invocation runs at
        // most the loop budget's iterations (all its loops together, see `session::loop_guard`)
        // plus its straight-line code once, and each pass costs the code's inlined size
        // (`session::kernel_cost`: loop bodies and call trees of any size). The budget, not
        // what the loops will really do, since nothing can know that before they run: a tenant
        // whose kernels loop little lowers `max_loop_iterations` to dispatch more invocations.
        let invocations =
            workgroups.iter().chain(&self.workgroup_size).fold(1u64, |acc, &d| acc.saturating_mul(d as u64));
        let passes = match &guard {
            Some((_, owner, _)) => 1 + owner.limits().loop_budget() as u64,
            None => 1,
        };
        let work = invocations.saturating_mul(passes).saturating_mul(self.ops_per_pass);
        self.device.dispatch(&self.pipeline, &bindings, params, workgroups, Some(work))?;
        if let Some(owner) = &self.owner {
            crate::session::event("dispatch", |m| {
                m.insert("session".into(), owner.id().into());
                m.insert("entry".into(), self.entry.as_str().into());
                m.insert("workgroups".into(), workgroups.to_vec().into());
                m.insert("workgroup_size".into(), self.workgroup_size.to_vec().into());
                m.insert("tensors".into(), tensors.len().into());
            });
        }
        if let Some((_, owner, g)) = guard {
            let v: Arc<dyn Verdict> = Arc::new(LoopVerdict {
                guard: g,
                entry: self.entry.clone(),
                owner: owner.clone(),
                seen: std::sync::OnceLock::new(),
            });
            for (t, b) in tensors.iter().zip(&self.storage) {
                if b.writable {
                    *t.buf.verdict.lock().unwrap_or_else(|p| p.into_inner()) = Some(v.clone());
                }
            }
        }
        Ok(())
    }

    /// A fresh budget buffer for one dispatch: [budget, 0]. It belongs to no session (a tenant
    /// at its quota must still be able to run its kernels) and lives as long as the verdict.
    fn guard_buffer(&self, owner: &SessionInner) -> Result<Tensor> {
        let previous = crate::session::set_current(None);
        let t = Tensor::from_slice_on(&self.device, &[owner.limits().loop_budget(), 0u32], &[2]);
        crate::session::set_current(previous);
        t
    }
}

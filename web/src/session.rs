//! Sessions for pages (docs/DESIGN.md, "Sessions and untrusted kernels"). kiln-core's current
//! session is a thread-local, and a page has one thread shared by every task: a session left
//! current across an `await` would capture whatever other task runs meanwhile. So a session is
//! current only while synchronous code runs (`run(fn)`, or `enter()` ... `exit()` with no
//! `await` between), and the one asynchronous creation, `compileKernel`, re-enters the session
//! around each step of its own future and leaves it before yielding.

use crate::error::{invalid, js_err, JsResult};
use crate::kernel::Kernel;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use wasm_bindgen::prelude::*;

/// A session with limits: `new Session({maxBytes, maxOpsPerDispatch, maxOpsTotal,
/// maxLoopIterations, maxSourceBytes, maxWorkgroupInvocations, maxBindings, allowF16,
/// allowAtomics, allowWorkgroupMemory, allowSubgroups})`, every field optional (0: no limit).
#[wasm_bindgen]
pub struct Session {
    inner: kiln_core::Session,
    /// The sessions current before each `enter` (restored by `exit`).
    previous: RefCell<Vec<Option<kiln_core::Session>>>,
}

/// Closing on drop: `free()`, or the garbage collector finalizing a session nobody closed.
impl Drop for Session {
    fn drop(&mut self) {
        self.inner.close();
    }
}

/// A non-negative whole number field of the limits object (undefined or null: 0).
fn limit(o: &JsValue, key: &str, max: f64) -> JsResult<f64> {
    let v = js_sys::Reflect::get(o, &key.into()).unwrap_or(JsValue::UNDEFINED);
    if v.is_undefined() || v.is_null() {
        return Ok(0.0);
    }
    match v.as_f64() {
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= max => Ok(n),
        _ => Err(invalid(format!("session limit {key} must be a whole number from 0 to {max}, got {v:?}"))),
    }
}

fn flag(o: &JsValue, key: &str) -> JsResult<bool> {
    let v = js_sys::Reflect::get(o, &key.into()).unwrap_or(JsValue::UNDEFINED);
    if v.is_undefined() || v.is_null() {
        return Ok(true);
    }
    v.as_bool().ok_or_else(|| invalid(format!("session policy {key} must be true or false, got {v:?}")))
}

const KNOWN: [&str; 12] = [
    "maxBytes",
    "maxKernels",
    "maxOpsPerDispatch",
    "maxOpsTotal",
    "maxLoopIterations",
    "maxSourceBytes",
    "maxWorkgroupInvocations",
    "maxBindings",
    "allowF16",
    "allowAtomics",
    "allowWorkgroupMemory",
    "allowSubgroups",
];

fn limits(o: &JsValue) -> JsResult<kiln_core::SessionLimits> {
    if o.is_undefined() || o.is_null() {
        return Ok(kiln_core::SessionLimits::default());
    }
    if !o.is_object() {
        return Err(invalid("session limits are an object such as {maxBytes: 1 << 20}"));
    }
    let object: &js_sys::Object = o.unchecked_ref();
    for k in js_sys::Object::keys(object).iter() {
        let k = k.as_string().unwrap_or_default();
        if !KNOWN.contains(&k.as_str()) {
            return Err(invalid(format!("unknown session limit {k:?} (known: {})", KNOWN.join(", "))));
        }
    }
    // Numbers are exact only up to 2^53: a larger byte or operation budget cannot be asked for.
    let safe = 9_007_199_254_740_991.0;
    let u32max = u32::MAX as f64;
    Ok(kiln_core::SessionLimits {
        max_bytes: limit(o, "maxBytes", safe)? as u64,
        max_ops_per_dispatch: limit(o, "maxOpsPerDispatch", safe)? as u64,
        max_ops_total: limit(o, "maxOpsTotal", safe)? as u64,
        max_loop_iterations: limit(o, "maxLoopIterations", u32max)? as u32,
        // The page times nothing (no blocking waits to charge), so there is no GPU-time budget.
        max_gpu_time_ms: 0,
        max_kernels: limit(o, "maxKernels", u32max)? as u32,
        policy: kiln_core::ShaderPolicy {
            max_source_bytes: limit(o, "maxSourceBytes", u32max)? as usize,
            max_workgroup_invocations: limit(o, "maxWorkgroupInvocations", u32max)? as u32,
            max_bindings: limit(o, "maxBindings", u32max)? as u32,
            allow_f16: flag(o, "allowF16")?,
            allow_atomics: flag(o, "allowAtomics")?,
            allow_workgroup_memory: flag(o, "allowWorkgroupMemory")?,
            allow_subgroups: flag(o, "allowSubgroups")?,
        },
    })
}

/// A future polled with `session` current, left current by no `await`: every step of its code
/// runs in the session, and whatever else the page runs between the steps does not.
struct InSession<F> {
    session: kiln_core::Session,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for InSession<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = self.session.enter();
        self.future.as_mut().poll(cx)
    }
}

#[wasm_bindgen]
impl Session {
    #[wasm_bindgen(constructor)]
    pub fn new(limits_object: JsValue) -> JsResult<Session> {
        Ok(Session { inner: kiln_core::Session::new(limits(&limits_object)?), previous: RefCell::new(Vec::new()) })
    }

    #[wasm_bindgen(getter)]
    pub fn id(&self) -> f64 {
        self.inner.id() as f64
    }

    #[wasm_bindgen(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Makes the session current until `exit()`. No `await` may come between the two: the page's
    /// other tasks would run in the session meanwhile. `run(fn)` is the safe form.
    pub fn enter(&self) {
        let prev = kiln_core::session::set_current(Some(self.inner.clone()));
        self.previous.borrow_mut().push(prev);
    }

    /// Leaves the session entered last (the one current before comes back).
    pub fn exit(&self) -> JsResult<()> {
        let current = kiln_core::session::current();
        if current.as_ref().map(|s| s.id()) != Some(self.inner.id()) {
            return Err(invalid(format!(
                "session {} is not the current session: exit() follows enter()",
                self.inner.id()
            )));
        }
        let prev = self.previous.borrow_mut().pop().flatten();
        kiln_core::session::set_current(prev);
        Ok(())
    }

    /// Calls `f()` with the session current and returns what it returns. `f` must be
    /// synchronous: the session is left when `f` returns, so the part of an async function
    /// after its first `await` would run outside it; a promise returned is refused (after `f`
    /// ran) with INVALID_ARGUMENT. Use `compileKernel` for the asynchronous creation.
    pub fn run(&self, f: &js_sys::Function) -> JsResult<JsValue> {
        self.enter();
        let result = f.call0(&JsValue::NULL);
        self.exit()?;
        let value = result?;
        if value.is_object() && js_sys::Reflect::get(&value, &"then".into()).is_ok_and(|t| t.is_function()) {
            return Err(invalid(
                "session.run(fn) takes a synchronous function: fn returned a promise, and what it does after \
                 its first await runs outside the session (create tensors inside run, await outside it)",
            ));
        }
        Ok(value)
    }

    /// Compiles a kernel that belongs to the session (bounded loops, the session's shader
    /// policy), asynchronously: the session is current during each step of the compilation only.
    #[wasm_bindgen(js_name = compileKernel)]
    pub async fn compile_kernel(&self, source: String, entry: Option<String>) -> JsResult<Kernel> {
        let entry = entry.unwrap_or_else(|| "main".to_string());
        let session = self.inner.clone();
        let future = Box::pin(async move { kiln_core::Kernel::new_async(&source, &entry).await });
        InSession { session, future }.await.map(Kernel::from).map_err(js_err)
    }

    /// Frees everything the session owns now (its tensors throw INVALID_ARGUMENT from then on)
    /// and refuses further work in it. Closing twice is fine.
    pub fn close(&self) {
        self.inner.close();
    }

    /// `{id, bytesInUse, peakBytes, liveBuffers, opsTotal, dispatches, kernelsCompiled,
    /// quotaExceeded, computeLimitHits, policyRejections, closed}`.
    pub fn stats(&self) -> JsValue {
        let s = self.inner.stats();
        let o = js_sys::Object::new();
        let set = |k: &str, v: JsValue| {
            let _ = js_sys::Reflect::set(&o, &k.into(), &v);
        };
        for (k, v) in [
            ("id", s.id),
            ("bytesInUse", s.bytes_in_use),
            ("peakBytes", s.peak_bytes),
            ("liveBuffers", s.live_buffers),
            ("opsTotal", s.ops_total),
            ("dispatches", s.dispatches),
            ("kernelsCompiled", s.kernels_compiled),
            ("quotaExceeded", s.quota_exceeded),
            ("computeLimitHits", s.compute_limit_hits),
            ("policyRejections", s.policy_rejections),
        ] {
            set(k, (v as f64).into());
        }
        set("closed", s.closed.into());
        o.into()
    }
}

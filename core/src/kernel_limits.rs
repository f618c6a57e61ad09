//! What a custom kernel may cost before the driver sees it, and the thread that compiles it.
//!
//! A hostile or careless kernel must end in an error, never in a crash, a hang or an exhausted
//! machine. naga's WGSL lowering recurses once per operand of a flat expression (`x+x+x…`, `~~~x`),
//! so a deep enough source overflows whatever stack the caller has: a BEAM dirty scheduler dies
//! at ~600 terms. Drivers (lavapipe above all) take time and memory superlinear in a kernel's size
//! and in its private arrays, and segfault on workgroup arrays past the device limit. So: bound
//! the source, compile on a thread whose stack is sized for the largest accepted source, bound the
//! wait for it, and check workgroup and private memory on the naga module first.
//!
//! Every limit is read from its environment variable once, at the first kernel compile (a value
//! that does not parse keeps the default).

// In the page the compile runs inline (`platform::run_compile`): the thread machinery is unused.
#![cfg_attr(target_arch = "wasm32", allow(dead_code, unused_imports))]

use crate::env::env_or;
use crate::{Error, Result};
use naga::{AddressSpace, Module, TypeInner};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;

/// Largest accepted kernel source, in bytes (`KILN_MAX_KERNEL_SOURCE_BYTES`).
///
/// Measured on lavapipe on the 2-core build machine (load ~7, Mesa shader cache off), kernel
/// creation + first dispatch (lavapipe JIT-compiles at first dispatch):
/// flat `x+x+…` 32 KB: 0.5 s + 1.5 s; 64 KB: 1.3–2.5 s + 3.4–4.3 s; 128 KB: 8.6 s + 18 s;
/// 10k short statements 64 KB: 1.9 s + 7.1 s; 128 KB: 7.1 s + 19 s (the issue saw 0.84 MB ~70 s
/// and 6.5 MB never finish). 64 KiB keeps both within a few seconds and is 14x the largest
/// built-in kernel.
pub const DEFAULT_MAX_SOURCE_BYTES: usize = 64 << 10;

/// Per-invocation private memory budget in bytes (`KILN_MAX_PRIVATE_BYTES`): the arrays and
/// structs among the function-local variables of every function, by-value arguments, and
/// `var<private>` globals (scalars, vectors and matrices are registers, and the source-size limit
/// bounds how many there are).
///
/// Measured on lavapipe (same machine, load 4-7) with `var a: array<f32, N>` indexed
/// dynamically, time of the first dispatch (lavapipe's JIT compile): 1 KiB 1.2-2.3 s;
/// 2 KiB 6.6-12.7 s; 4 KiB 25-32 s; 8 KiB 265 s (the issue: 16 KiB > 300 s, 64 MiB exhausted
/// RAM). The cost grows 5-10x per doubling, so 1 KiB (256 f32) is the largest power of two that
/// stays within a few seconds there; real GPUs cope with more, hence the variable.
pub const DEFAULT_MAX_PRIVATE_BYTES: u64 = 1 << 10;

/// How long a caller waits for a kernel compile (`KILN_COMPILE_TIMEOUT_MS`). A source at the
/// size limit compiles in ~1-3 s on a loaded 2-core machine, so this only trips on a pathology.
pub const DEFAULT_COMPILE_TIMEOUT_MS: u64 = 20_000;

/// User pipelines kept in a device's cache (`KILN_PIPELINE_CACHE_ENTRIES`). Unbounded, 10,000
/// distinct kernels held 466 MiB (~47 KiB each) on lavapipe; with 512, compiling and dropping
/// 10,000 adds 52 MiB, flat after the first 1,000 (see `PipelineCache::evicted_at_least`).
pub const DEFAULT_PIPELINE_CACHE_ENTRIES: usize = 512;

/// Stack the compile thread gets per accepted source byte. Measured: a 65,000-deep `~~~x` chain
/// (65 KB) overflows 32 MiB and fits in 64 MiB, i.e. up to ~1 KiB of stack per source byte in
/// naga's lowering; 4 KiB per byte leaves 4x for wgpu's second parse and the driver. Unoptimized
/// builds (a Rust user's `cargo test`) take several times the stack per frame: a 64 KB nested
/// source overflowed 256 MiB there, so they get 4x (address space only, as below).
const STACK_PER_SOURCE_BYTE: u64 = if cfg!(debug_assertions) { 16 << 10 } else { 4 << 10 };
/// Floor of the compile thread's stack: only address space is reserved, pages are touched on use.
const MIN_COMPILE_STACK: u64 = 256 << 20;
/// Ceiling, so that a huge `KILN_MAX_KERNEL_SOURCE_BYTES` cannot make every compile fail to
/// start its thread (4 GiB covers ~4 MiB of worst-case source).
const MAX_COMPILE_STACK: u64 = 4 << 30;
/// Compiles whose caller gave up but which still run; past this many, new compiles are refused
/// rather than stacking up threads that each hold a core and memory.
const MAX_ABANDONED_COMPILES: usize = 4;
/// Idle compile threads kept for reuse.
const KEEP_IDLE_THREADS: usize = 2;

struct Limits {
    max_source_bytes: usize,
    max_private_bytes: u64,
    compile_timeout: Duration,
    pipeline_cache_entries: usize,
}

fn limits() -> &'static Limits {
    static LIMITS: OnceLock<Limits> = OnceLock::new();
    LIMITS.get_or_init(|| Limits {
        max_source_bytes: env_or("KILN_MAX_KERNEL_SOURCE_BYTES", DEFAULT_MAX_SOURCE_BYTES),
        max_private_bytes: env_or("KILN_MAX_PRIVATE_BYTES", DEFAULT_MAX_PRIVATE_BYTES),
        compile_timeout: Duration::from_millis(env_or("KILN_COMPILE_TIMEOUT_MS", DEFAULT_COMPILE_TIMEOUT_MS)),
        pipeline_cache_entries: env_or("KILN_PIPELINE_CACHE_ENTRIES", DEFAULT_PIPELINE_CACHE_ENTRIES),
    })
}

pub(crate) fn pipeline_cache_entries() -> usize {
    limits().pipeline_cache_entries
}

pub(crate) fn check_source_size(source: &str) -> Result<()> {
    let max = limits().max_source_bytes;
    if source.len() > max {
        return Err(Error::Shader(format!(
            "kernel source is {} bytes, over the {max}-byte limit (KILN_MAX_KERNEL_SOURCE_BYTES)",
            source.len()
        )));
    }
    crate::platform::check_expression_depth(source)
}

fn type_bytes(module: &Module, layouter: &naga::proc::Layouter, ty: &naga::proc::TypeResolution) -> u64 {
    match ty {
        naga::proc::TypeResolution::Handle(h) => layouter[*h].size as u64,
        // An unrepresentable size is over any budget.
        naga::proc::TypeResolution::Value(inner) => inner.try_size(module.to_ctx()).map_or(u64::MAX, u64::from),
    }
}

/// Workgroup memory the entry point uses must fit the device's limit: wgpu 30 does not check it,
/// and lavapipe segfaults compiling a 64 MiB workgroup array.
pub(crate) fn check_workgroup_memory(
    module: &Module,
    uses: &naga::valid::FunctionInfo,
    layouter: &naga::proc::Layouter,
    entry: &str,
    limit: u32,
) -> Result<()> {
    let mut total = 0u64;
    for (h, var) in module.global_variables.iter() {
        if var.space == AddressSpace::WorkGroup && !uses[h].is_empty() {
            total += layouter[var.ty].size as u64;
        }
    }
    if total > limit as u64 {
        return Err(Error::Shader(format!(
            "entry point {entry:?} uses {total} bytes of workgroup memory (var<workgroup>); \
             the device allows {limit} (max_compute_workgroup_storage_size)"
        )));
    }
    Ok(())
}

/// Private memory per invocation must stay within the budget: drivers unroll or spill it at a
/// cost superlinear in its size (see `DEFAULT_MAX_PRIVATE_BYTES`). Counted conservatively: the
/// array and struct locals and by-value arguments of every function as if all were live at once,
/// plus the
/// `var<private>` globals the entry point uses; any single composite value (`array<f32, N>()`
/// in an expression) must fit the budget by itself.
pub(crate) fn check_private_memory(
    module: &Module,
    info: &naga::valid::ModuleInfo,
    ep_index: usize,
    layouter: &naga::proc::Layouter,
) -> Result<()> {
    let budget = limits().max_private_bytes;
    let over = |what: String, bytes: u64| {
        Error::Shader(format!(
            "{what} needs {bytes} bytes of private memory per invocation, over the {budget}-byte budget \
             (KILN_MAX_PRIVATE_BYTES); use a storage or workgroup buffer for large arrays"
        ))
    };
    let ep = &module.entry_points[ep_index];
    let ep_info = info.get_entry_point(ep_index);
    let bytes_of = |ty: naga::Handle<naga::Type>| match module.types[ty].inner {
        TypeInner::Array { .. } | TypeInner::Struct { .. } => layouter[ty].size as u64,
        _ => 0,
    };
    let mut total = 0u64;
    for (h, var) in module.global_variables.iter() {
        if var.space == AddressSpace::Private && !ep_info[h].is_empty() {
            total = total.saturating_add(bytes_of(var.ty));
        }
    }
    for (_, c) in module.constants.iter() {
        let bytes = layouter[c.ty].size as u64;
        if bytes > budget {
            // Drivers copy a constant array into private memory to index it dynamically.
            return Err(over(format!("constant {:?}", c.name.as_deref().unwrap_or("?")), bytes));
        }
    }
    // The entry point's arguments are built-ins, not memory the kernel chose.
    let functions = module.functions.iter().map(|(h, f)| (f, &info[h], true)).chain(std::iter::once((
        &ep.function,
        ep_info,
        false,
    )));
    for (f, finfo, count_arguments) in functions {
        for (_, local) in f.local_variables.iter() {
            total = total.saturating_add(bytes_of(local.ty));
        }
        if count_arguments {
            for arg in &f.arguments {
                total = total.saturating_add(bytes_of(arg.ty));
            }
        }
        for (h, _) in f.expressions.iter() {
            let bytes = type_bytes(module, layouter, &finfo[h].ty);
            if bytes > budget && !matches!(finfo[h].ty.inner_with(&module.types), TypeInner::Pointer { .. }) {
                let name = f.name.as_deref().unwrap_or("?");
                return Err(over(format!("a value in function {name:?}"), bytes));
            }
        }
    }
    if total > budget {
        return Err(over(format!("entry point {:?}", ep.name), total));
    }
    Ok(())
}

// ---- the compile thread ----

#[cfg(target_arch = "wasm32")]
pub(crate) use crate::platform::run_compile;

/// A compile, which returns the hand-over of its result: the thread offers itself for reuse
/// between the two, so that a caller's next compile finds it idle instead of starting another.
type Job = Box<dyn FnOnce() -> Box<dyn FnOnce() + Send> + Send>;

static IDLE: Mutex<Vec<mpsc::Sender<Job>>> = Mutex::new(Vec::new());
static ABANDONED: AtomicUsize = AtomicUsize::new(0);

fn compile_stack_bytes() -> usize {
    let want = (limits().max_source_bytes as u64).saturating_mul(STACK_PER_SOURCE_BYTE);
    usize::try_from(want.clamp(MIN_COMPILE_STACK, MAX_COMPILE_STACK)).unwrap_or(usize::MAX)
}

/// Hands `job` to an idle compile thread, or starts one. Threads are reused so that wgpu's
/// per-thread error-scope table does not grow by one entry per compile.
fn start(job: Job) -> Result<()> {
    let idle = IDLE.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let job = match idle {
        Some(tx) => match tx.send(job) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    let (tx, rx) = mpsc::channel::<Job>();
    let me = tx.clone();
    std::thread::Builder::new()
        .name("kiln-compile".into())
        .stack_size(compile_stack_bytes())
        .spawn(move || {
            for job in rx.iter() {
                let deliver = job();
                let stay = {
                    let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
                    let stay = idle.len() < KEEP_IDLE_THREADS;
                    if stay {
                        idle.push(me.clone());
                    }
                    stay
                };
                deliver();
                if !stay {
                    return;
                }
            }
        })
        .map_err(|e| Error::OutOfMemory(format!("cannot start a kernel compile thread: {e}")))?;
    tx.send(job).map_err(|_| Error::Internal("the kernel compile thread exited before its job".into()))
}

/// Runs `f` (naga parse and validation, and wgpu's shader and pipeline creation, which parses
/// again) on a compile thread with a stack sized for the largest accepted source.
///
/// The caller waits at most `KILN_COMPILE_TIMEOUT_MS` and then gets `Error::Timeout`; a compile
/// cannot be interrupted, so it goes on in the background and its result is dropped.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn run_compile<T: Send + 'static>(what: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    const RUNNING: u8 = 0;
    const GAVE_UP: u8 = 1;
    const DONE: u8 = 2;
    let budget = limits().compile_timeout;
    let n = ABANDONED.load(Ordering::SeqCst);
    if n >= MAX_ABANDONED_COMPILES {
        return Err(Error::Timeout(format!(
            "{n} earlier kernel compiles that ran past the {} ms budget (KILN_COMPILE_TIMEOUT_MS) \
             are still running; try again when they finish",
            budget.as_millis()
        )));
    }
    let state = Arc::new(AtomicU8::new(RUNNING));
    let (tx, rx) = mpsc::sync_channel(1);
    let st = state.clone();
    start(Box::new(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
            Err(Error::Shader(format!("the shader compiler panicked: {}", Error::from_panic(p).message())))
        });
        Box::new(move || {
            if st.compare_exchange(RUNNING, DONE, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                ABANDONED.fetch_sub(1, Ordering::SeqCst);
            }
            let _ = tx.send(r);
        })
    }))?;
    match rx.recv_timeout(budget) {
        Ok(r) => return r,
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            return Err(Error::Internal(format!("the compile thread of {what} ended without a result")))
        }
    }
    // Counted before the state says so, so that the thread's decrement never comes first.
    ABANDONED.fetch_add(1, Ordering::SeqCst);
    if state.compare_exchange(RUNNING, GAVE_UP, Ordering::SeqCst, Ordering::SeqCst).is_err() {
        ABANDONED.fetch_sub(1, Ordering::SeqCst);
        // It finished between the timeout and now.
        if let Ok(r) = rx.recv() {
            return r;
        }
    }
    Err(Error::Timeout(format!(
        "compiling {what} took longer than the {} ms budget (KILN_COMPILE_TIMEOUT_MS); \
         it goes on in the background and its result is dropped",
        budget.as_millis()
    )))
}

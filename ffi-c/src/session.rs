//! Sessions over the C ABI: a `KilnSession *` handle (checked like tensor handles), created with
//! a `KilnSessionLimits`, made current on a thread with kiln_session_enter, closed with
//! kiln_session_close (which frees every tensor and kernel created in it), and the audit log.

use crate::boundary::{call, cstr, out_ptr, tensor};
use crate::handles;
use crate::types::{KilnStatus, KilnTensor};
use kiln_core::session::{audit_off, audit_to_callback, audit_to_file};
use kiln_core::{Error, Result, Session, SessionLimits, ShaderPolicy};
use std::ffi::CString;
use std::os::raw::{c_char, c_void};
use std::sync::Arc;

/// A session: an owner of tensors and kernels with limits on memory, operations, loop
/// iterations and the kernels it may compile (docs/DESIGN.md, "Sessions and untrusted
/// kernels"). Opaque; a checked handle like KilnTensor. Created by kiln_session_create,
/// released with kiln_session_free.
pub struct KilnSession {
    _handle_only: (),
}

/// kiln_session_create's limits. Every 0 means "no limit" (max_loop_iterations 0: the default
/// budget, about 4 billion per invocation). Zero-initialise it (`KilnSessionLimits l = {0};`)
/// and set what you need, so that fields added later keep their defaults.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct KilnSessionLimits {
    /// Bytes the session's live tensors may hold; over it: KILN_ERR_QUOTA_EXCEEDED.
    pub max_bytes: u64,
    /// Operations (workgroups x invocations per workgroup) one dispatch may count; over it:
    /// KILN_ERR_COMPUTE_LIMIT, nothing queued.
    pub max_ops_per_dispatch: u64,
    /// Operations the session may count in all; past it: KILN_ERR_COMPUTE_LIMIT.
    pub max_ops_total: u64,
    /// Loop iterations one invocation of the session's kernels may run, all loops together.
    pub max_loop_iterations: u32,
    /// Most invocations per workgroup a kernel may declare.
    pub max_workgroup_invocations: u32,
    /// Largest kernel source, in bytes.
    pub max_source_bytes: u64,
    /// Most bindings a kernel's entry point may use.
    pub max_bindings: u32,
    /// KILN_FORBID_* bits: WGSL features the session's kernels may not use.
    pub forbid: u32,
    /// Milliseconds of GPU time the session's dispatches may use in all (timestamp queries;
    /// the wall clock of its waits where the adapter has none). Charged when results are read
    /// or synchronized; once spent, every dispatch fails with KILN_ERR_COMPUTE_LIMIT.
    pub max_gpu_time_ms: u64,
    /// Kernels the session may hold at once (compiled, not yet freed); over it a compile fails
    /// with KILN_ERR_QUOTA_EXCEEDED. Each live kernel also counts a fixed charge against
    /// max_bytes (Kiln core's KERNEL_CHARGE_BYTES).
    pub max_kernels: u32,
}

/// kiln_session_stats' counters (a snapshot).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct KilnSessionStats {
    pub id: u64,
    pub bytes_in_use: u64,
    pub peak_bytes: u64,
    pub live_buffers: u64,
    pub ops_total: u64,
    pub dispatches: u64,
    pub kernels_compiled: u64,
    pub quota_exceeded: u64,
    pub compute_limit_hits: u64,
    pub policy_rejections: u64,
    pub closed: bool,
    /// Bytes of storage buffers bound to the session's dispatches.
    pub bound_bytes: u64,
    /// GPU time charged to the session, nanoseconds (see KilnSessionLimits.max_gpu_time_ms).
    pub gpu_time_ns: u64,
    /// Kernels of the session alive now (see KilnSessionLimits.max_kernels).
    pub kernels_alive: u64,
}

/// KilnSessionLimits.forbid: no f16.
pub const KILN_FORBID_F16: u32 = 1;
/// KilnSessionLimits.forbid: no atomics.
pub const KILN_FORBID_ATOMICS: u32 = 2;
/// KilnSessionLimits.forbid: no var<workgroup> memory.
pub const KILN_FORBID_WORKGROUP_MEMORY: u32 = 4;
/// KilnSessionLimits.forbid: no subgroup operations or builtins.
pub const KILN_FORBID_SUBGROUPS: u32 = 8;

fn limits_of(l: &KilnSessionLimits) -> Result<SessionLimits> {
    let known = KILN_FORBID_F16 | KILN_FORBID_ATOMICS | KILN_FORBID_WORKGROUP_MEMORY | KILN_FORBID_SUBGROUPS;
    if l.forbid & !known != 0 {
        return Err(Error::InvalidArgument(format!("unknown KILN_FORBID_* bits {:#x}", l.forbid & !known)));
    }
    let max_source_bytes = usize::try_from(l.max_source_bytes)
        .map_err(|_| Error::InvalidArgument("max_source_bytes does not fit this platform".into()))?;
    Ok(SessionLimits {
        max_bytes: l.max_bytes,
        max_ops_per_dispatch: l.max_ops_per_dispatch,
        max_ops_total: l.max_ops_total,
        max_loop_iterations: l.max_loop_iterations,
        max_gpu_time_ms: l.max_gpu_time_ms,
        max_kernels: l.max_kernels,
        policy: ShaderPolicy {
            max_source_bytes,
            max_workgroup_invocations: l.max_workgroup_invocations,
            max_bindings: l.max_bindings,
            allow_f16: l.forbid & KILN_FORBID_F16 == 0,
            allow_atomics: l.forbid & KILN_FORBID_ATOMICS == 0,
            allow_workgroup_memory: l.forbid & KILN_FORBID_WORKGROUP_MEMORY == 0,
            allow_subgroups: l.forbid & KILN_FORBID_SUBGROUPS == 0,
        },
    })
}

fn session(p: *const KilnSession, what: &str) -> Result<Arc<Session>> {
    if p.is_null() {
        return Err(Error::NullPointer(format!("{what} is NULL")));
    }
    handles::sessions().get(p.addr(), what)
}

/// Opens a session with `limits` (nullable: no limits) and writes its handle to `*out`.
/// Nothing is current yet: call kiln_session_enter on each thread that should work in it.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_session_create(
    limits: *const KilnSessionLimits,
    out: *mut *mut KilnSession,
) -> KilnStatus {
    call("kiln_session_create", || {
        let out = out_ptr(out, "out")?;
        *out = std::ptr::null_mut();
        let l = if limits.is_null() { KilnSessionLimits::default() } else { *limits };
        let s = Session::new(limits_of(&l)?);
        *out = std::ptr::without_provenance_mut(handles::sessions().insert(s)?);
        Ok(())
    })
}

/// Makes `session` the calling thread's current session: tensors and kernels this thread
/// creates from now on belong to it and count against its limits, until kiln_session_exit.
#[no_mangle]
pub unsafe extern "C" fn kiln_session_enter(session: *const KilnSession) -> KilnStatus {
    call("kiln_session_enter", || {
        let s = self::session(session, "session")?;
        s.limits(); // a live handle
        kiln_core::session::set_current(Some((*s).clone()));
        Ok(())
    })
}

/// The calling thread goes back to the default session (no limits). Never fails.
#[no_mangle]
pub extern "C" fn kiln_session_exit() -> KilnStatus {
    call("kiln_session_exit", || {
        kiln_core::session::set_current(None);
        Ok(())
    })
}

/// Closes `session`: frees every tensor and kernel created in it now. Their handles stay
/// valid to free, but any other use gives KILN_ERR_INVALID_ARGUMENT naming the closed
/// session. The session handle itself stays valid (for kiln_session_stats) until
/// kiln_session_free. Closing twice is fine. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn kiln_session_close(session: *const KilnSession) -> KilnStatus {
    call("kiln_session_close", || {
        self::session(session, "session")?.close();
        Ok(())
    })
}

/// Closes `session` (see kiln_session_close) and releases its handle. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn kiln_session_free(session: *mut KilnSession) -> KilnStatus {
    call("kiln_session_free", || {
        if !session.is_null() {
            handles::sessions().remove(session.addr(), "session")?.close();
        }
        Ok(())
    })
}

/// Writes `session`'s counters to `*out`.
#[no_mangle]
pub unsafe extern "C" fn kiln_session_stats(session: *const KilnSession, out: *mut KilnSessionStats) -> KilnStatus {
    call("kiln_session_stats", || {
        let out = out_ptr(out, "out")?;
        let s = self::session(session, "session")?.stats();
        *out = KilnSessionStats {
            id: s.id,
            bytes_in_use: s.bytes_in_use,
            peak_bytes: s.peak_bytes,
            live_buffers: s.live_buffers,
            ops_total: s.ops_total,
            dispatches: s.dispatches,
            kernels_compiled: s.kernels_compiled,
            quota_exceeded: s.quota_exceeded,
            compute_limit_hits: s.compute_limit_hits,
            policy_rejections: s.policy_rejections,
            closed: s.closed,
            bound_bytes: s.bound_bytes,
            gpu_time_ns: s.gpu_time_ns,
            kernels_alive: s.kernels_alive,
        };
        Ok(())
    })
}

/// Whether `tensor` is valid: KILN_ERR_INVALID_ARGUMENT once its session was closed,
/// KILN_ERR_COMPUTE_LIMIT when the session kernel that last wrote it ran out of its loop
/// budget (this may wait for the GPU). Reading a tensor checks the same.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_check(t: *const KilnTensor) -> KilnStatus {
    call("kiln_tensor_check", || tensor(t, "tensor")?.check())
}

/// Appends the audit log (JSON lines: sessions, kernel compiles, dispatches, limits hit,
/// errors; never tensor data) to the file at `path`. Off by default.
#[no_mangle]
pub unsafe extern "C" fn kiln_audit_to_file(path: *const c_char) -> KilnStatus {
    call("kiln_audit_to_file", || audit_to_file(cstr(path, "path")?))
}

/// A pointer C code handed over with its callback; Kiln never dereferences it.
struct UserData(*mut c_void);
// SAFETY: Kiln only passes the pointer back to the caller's callback, which must be callable
// from any thread (documented on kiln_audit_to_callback).
unsafe impl Send for UserData {}
unsafe impl Sync for UserData {}

/// Hands each audit event (one JSON object, NUL-terminated, valid during the call) and
/// `user_data` to `callback`, on the thread that caused the event: the callback must be
/// thread-safe and must not call Kiln. Off by default.
#[no_mangle]
pub extern "C" fn kiln_audit_to_callback(
    callback: Option<extern "C" fn(event: *const c_char, user_data: *mut c_void)>,
    user_data: *mut c_void,
) -> KilnStatus {
    call("kiln_audit_to_callback", || {
        let cb = callback.ok_or_else(|| Error::NullPointer("callback is NULL".into()))?;
        let data = UserData(user_data);
        audit_to_callback(move |line| {
            // JSON text has no NUL bytes (serde_json escapes them).
            if let Ok(c) = CString::new(line) {
                let d = &data;
                cb(c.as_ptr(), d.0);
            }
        });
        Ok(())
    })
}

/// Stops the audit log. Never fails.
#[no_mangle]
pub extern "C" fn kiln_audit_off() -> KilnStatus {
    call("kiln_audit_off", || {
        audit_off();
        Ok(())
    })
}

//! What a session may use: memory, compute, and which kernels it may compile. Every field's
//! zero (or `None`) means "no limit", so `SessionLimits::default()` is today's unlimited runtime.

/// Limits of one session (docs/DESIGN.md, "Sessions and untrusted kernels").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionLimits {
    /// Bytes of GPU storage the session's live tensors may hold at once (their size classes,
    /// what the device really sets aside). Over it an allocation fails with QUOTA_EXCEEDED.
    pub max_bytes: u64,
    /// Operations one dispatch may count, its real work bounded before anything is queued: a
    /// session's kernel counts invocations × (1 + the loop budget) when it has loops (else its
    /// invocations); matmul, conv2d, the pools and attention their multiply-adds (or taps), once
    /// per op; other built-in dispatches the larger of their invocations and the 4-byte elements
    /// they bind. Over it the dispatch (or op) is refused with COMPUTE_LIMIT.
    pub max_ops_per_dispatch: u64,
    /// Operations the session may count in all: a dispatch that would pass it is refused with
    /// COMPUTE_LIMIT (the counter stays where it was).
    pub max_ops_total: u64,
    /// Milliseconds of GPU time the session's dispatches may use in all. Its passes are timed
    /// with timestamp queries (one pass per dispatch), and the time is charged when the GPU has
    /// finished them and Kiln reads the timestamps: at a read or a synchronize (and at later
    /// submits, for work already done). Once the charged time reaches the budget, every further
    /// dispatch is refused with COMPUTE_LIMIT; work already queued still runs, so a session can
    /// pass its budget by what it had in flight. Without timestamp queries on the adapter, the
    /// wall-clock time of the session's waits (reads, synchronize) is charged instead.
    pub max_gpu_time_ms: u64,
    /// Loop iterations one invocation of a user kernel compiled in this session may run, all its
    /// loops together. 0 means `DEFAULT_LOOP_BUDGET`: a kernel compiled in a session is always
    /// bounded (kernels of the default session are not rewritten at all).
    pub max_loop_iterations: u32,
    /// User kernels the session may hold at once (compiled and not yet dropped; each `Kernel`
    /// counts, also one whose source was compiled before and came from the cache). At it a
    /// compile fails with QUOTA_EXCEEDED before anything is compiled. Each kernel is also
    /// charged `KERNEL_CHARGE_BYTES` against `max_bytes` while it lives (once compiled, so that
    /// a kernel against the policy still says SHADER). `SUGGESTED_MAX_KERNELS`
    /// is the tenants' default in `kiln serve`.
    pub max_kernels: u32,
    /// Which kernels the session may compile.
    pub policy: ShaderPolicy,
}

/// The loop budget of a session that sets none: ~4 billion iterations per invocation, so that
/// every loop ends, while no real kernel notices. Tenants get a far smaller one from their limits.
pub const DEFAULT_LOOP_BUDGET: u32 = u32::MAX;

/// What one live user kernel of a session is charged against its `max_bytes`: compiled
/// pipelines live in driver memory that no buffer counter sees. Measured on lavapipe (`cargo
/// test --release -p kiln-core --test kernel_cache_rss -- --ignored --nocapture
/// rss_of_live_kernels`): 500 distinct small kernels held alive cost ~89 KB of resident memory
/// each (the issue saw ~150 KB); a GPU driver keeps the machine code in device memory and its
/// bookkeeping on the host. 256 KiB is above both, with room for kernels bigger than the
/// measured ones, and a size class of its own: a tenant that fills its quota with kernels holds
/// no more than it could with tensors.
pub const KERNEL_CHARGE_BYTES: u64 = 256 << 10;

/// A sensible `max_kernels` for an untrusted tenant: far more distinct kernels than a real
/// program holds at once, and with `KERNEL_CHARGE_BYTES` each, 16 MiB of its quota at most.
pub const SUGGESTED_MAX_KERNELS: u32 = 64;

/// What a session's kernels may be, checked on the validated naga module before anything is
/// compiled for the driver. Every zero means "no limit"; every `allow_*` starts allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShaderPolicy {
    /// Largest source in bytes (below the process-wide `KILN_MAX_KERNEL_SOURCE_BYTES`).
    pub max_source_bytes: usize,
    /// Most invocations per workgroup (x × y × z of `@workgroup_size`).
    pub max_workgroup_invocations: u32,
    /// Most bindings (storage and uniform) the entry point uses.
    pub max_bindings: u32,
    pub allow_f16: bool,
    pub allow_atomics: bool,
    /// `var<workgroup>` memory (and with it the barriers that make it useful).
    pub allow_workgroup_memory: bool,
    /// Subgroup operations and builtins.
    pub allow_subgroups: bool,
}

impl Default for ShaderPolicy {
    fn default() -> ShaderPolicy {
        ShaderPolicy {
            max_source_bytes: 0,
            max_workgroup_invocations: 0,
            max_bindings: 0,
            allow_f16: true,
            allow_atomics: true,
            allow_workgroup_memory: true,
            allow_subgroups: true,
        }
    }
}

/// One field of [`SessionLimits`] (or of its [`ShaderPolicy`]) as the bindings see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitField {
    pub name: &'static str,
    pub ty: LimitTy,
    /// A field of `policy` rather than of the limits themselves.
    pub in_policy: bool,
}

/// The Rust type of a session limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitTy {
    U64,
    U32,
    Usize,
    Bool,
}

impl SessionLimits {
    /// Every field of the limits, `policy`'s included, with the type the bindings decode it as
    /// (its default is the type's: 0, "no limit", for a number, true for an `allow_*`). Eight
    /// places restate them in their own idiom (C, Python and its stub, the NIF, Elixir, Julia,
    /// the browser, serve's config): `kiln-gen` generates the NIF's `session_open` and
    /// Elixir's option list from this, and checks each of the others against it (make gen-check
    /// names the file and the field missing there). The destructuring has no `..`: a new field
    /// does not compile here until it is listed.
    pub fn fields() -> [LimitField; 13] {
        let SessionLimits {
            max_bytes: _,
            max_ops_per_dispatch: _,
            max_ops_total: _,
            max_gpu_time_ms: _,
            max_loop_iterations: _,
            max_kernels: _,
            policy:
                ShaderPolicy {
                    max_source_bytes: _,
                    max_workgroup_invocations: _,
                    max_bindings: _,
                    allow_f16: _,
                    allow_atomics: _,
                    allow_workgroup_memory: _,
                    allow_subgroups: _,
                },
        } = SessionLimits::default();
        let (limit, policy) = (false, true);
        [
            LimitField { name: "max_bytes", ty: LimitTy::U64, in_policy: limit },
            LimitField { name: "max_ops_per_dispatch", ty: LimitTy::U64, in_policy: limit },
            LimitField { name: "max_ops_total", ty: LimitTy::U64, in_policy: limit },
            LimitField { name: "max_gpu_time_ms", ty: LimitTy::U64, in_policy: limit },
            LimitField { name: "max_loop_iterations", ty: LimitTy::U32, in_policy: limit },
            LimitField { name: "max_kernels", ty: LimitTy::U32, in_policy: limit },
            LimitField { name: "max_source_bytes", ty: LimitTy::Usize, in_policy: policy },
            LimitField { name: "max_workgroup_invocations", ty: LimitTy::U32, in_policy: policy },
            LimitField { name: "max_bindings", ty: LimitTy::U32, in_policy: policy },
            LimitField { name: "allow_f16", ty: LimitTy::Bool, in_policy: policy },
            LimitField { name: "allow_atomics", ty: LimitTy::Bool, in_policy: policy },
            LimitField { name: "allow_workgroup_memory", ty: LimitTy::Bool, in_policy: policy },
            LimitField { name: "allow_subgroups", ty: LimitTy::Bool, in_policy: policy },
        ]
    }

    /// The loop budget user kernels of this session run under.
    pub fn loop_budget(&self) -> u32 {
        if self.max_loop_iterations == 0 {
            DEFAULT_LOOP_BUDGET
        } else {
            self.max_loop_iterations
        }
    }
}

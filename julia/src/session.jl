# Sessions (docs/DESIGN.md, "Sessions and untrusted kernels") over the C ABI.

struct KilnSession end

# Mirrors of the C structs (checked field by field against kiln.h by scripts/check_julia_ccalls.py).
struct KilnSessionLimits
    max_bytes::UInt64
    max_ops_per_dispatch::UInt64
    max_ops_total::UInt64
    max_loop_iterations::UInt32
    max_workgroup_invocations::UInt32
    max_source_bytes::UInt64
    max_bindings::UInt32
    forbid::UInt32
    max_gpu_time_ms::UInt64
    max_kernels::UInt32
end

struct KilnSessionStats
    id::UInt64
    bytes_in_use::UInt64
    peak_bytes::UInt64
    live_buffers::UInt64
    ops_total::UInt64
    dispatches::UInt64
    kernels_compiled::UInt64
    quota_exceeded::UInt64
    compute_limit_hits::UInt64
    policy_rejections::UInt64
    closed::Bool
    bound_bytes::UInt64
    gpu_time_ns::UInt64
    kernels_alive::UInt64
end

"""
    s = Kiln.Session(; max_bytes=0, max_ops_per_dispatch=0, max_ops_total=0, max_loop_iterations=0,
                     max_source_bytes=0, max_workgroup_invocations=0, max_bindings=0,
                     allow_f16=true, allow_atomics=true, allow_workgroup_memory=true, allow_subgroups=true,
                     max_gpu_time_ms=0, max_kernels=0)
    Kiln.with_session(s) do ... end

A session with limits (every 0: none). Arrays and kernels created inside `with_session` belong
to it: an allocation over `max_bytes` throws `KilnError` `:QUOTA_EXCEEDED`, a dispatch over an
operation budget, a kernel out of its loop budget, or any dispatch once `max_gpu_time_ms` of GPU
time (charged when results are read) is spent `:COMPUTE_LIMIT`, a kernel against the policy
`:SHADER` naming the line, a kernel past `max_kernels` held at once `:QUOTA_EXCEEDED` (each live
kernel also counts a fixed charge against `max_bytes`). `close(s)` frees everything it owns (its arrays throw
`:INVALID_ARGUMENT` from then on). The current session belongs to the OS thread, so run the block
without yielding to other tasks (no `@sync`/`@spawn` inside).
"""
mutable struct Session
    handle::Ptr{KilnSession}
    function Session(; max_bytes=0, max_ops_per_dispatch=0, max_ops_total=0, max_loop_iterations=0,
                     max_source_bytes=0, max_workgroup_invocations=0, max_bindings=0, allow_f16=true,
                     allow_atomics=true, allow_workgroup_memory=true, allow_subgroups=true, max_gpu_time_ms=0,
                     max_kernels=0)
        forbid = UInt32((allow_f16 ? 0 : 1) | (allow_atomics ? 0 : 2) | (allow_workgroup_memory ? 0 : 4) |
                        (allow_subgroups ? 0 : 8))
        limits = Ref(KilnSessionLimits(max_bytes, max_ops_per_dispatch, max_ops_total, max_loop_iterations,
                                       max_workgroup_invocations, max_source_bytes, max_bindings, forbid,
                                       max_gpu_time_ms, max_kernels))
        out = Ref{Ptr{KilnSession}}(C_NULL)
        check(@ccall libkiln.kiln_session_create(limits::Ref{KilnSessionLimits}, out::Ref{Ptr{KilnSession}})::UInt32)
        s = new(out[])
        finalizer(free!, s)
        return s
    end
end

function free!(s::Session)
    h = s.handle
    if h != C_NULL
        s.handle = C_NULL
        @ccall libkiln.kiln_session_free(h::Ptr{KilnSession})::UInt32
    end
    return nothing
end

function Base.unsafe_convert(::Type{Ptr{KilnSession}}, s::Session)
    s.handle == C_NULL && throw(ArgumentError("this Session was freed"))
    return s.handle
end

"""`Kiln.with_session(f, s)`: runs `f()` with `s` current on this thread, then goes back to the default session."""
function with_session(f, s::Session)
    check(@ccall libkiln.kiln_session_enter(s::Ptr{KilnSession})::UInt32)
    try
        return f()
    finally
        @ccall libkiln.kiln_session_exit()::UInt32
    end
end

"""`close(s::Kiln.Session)`: frees every array and kernel the session owns; closing twice is fine."""
Base.close(s::Session) = check(@ccall libkiln.kiln_session_close(s::Ptr{KilnSession})::UInt32)

"""`Kiln.session_stats(s)`: the session's counters as a named tuple."""
function session_stats(s::Session)
    r = Ref{KilnSessionStats}()
    check(@ccall libkiln.kiln_session_stats(s::Ptr{KilnSession}, r::Ref{KilnSessionStats})::UInt32)
    st = r[]
    return (id=Int(st.id), bytes_in_use=Int(st.bytes_in_use), peak_bytes=Int(st.peak_bytes),
            live_buffers=Int(st.live_buffers), ops_total=Int(st.ops_total), dispatches=Int(st.dispatches),
            kernels_compiled=Int(st.kernels_compiled), quota_exceeded=Int(st.quota_exceeded),
            compute_limit_hits=Int(st.compute_limit_hits), policy_rejections=Int(st.policy_rejections),
            closed=st.closed, bound_bytes=Int(st.bound_bytes), gpu_time_ns=Int(st.gpu_time_ns),
            kernels_alive=Int(st.kernels_alive))
end

Base.show(io::IO, s::Session) = print(io, "Kiln.Session(", s.handle == C_NULL ? "freed" : "", ")")

# Metrics and per-op GPU-time profiles (docs/DESIGN.md, "Metrics and profiling") over the C ABI.

# Mirrors of the C structs (checked field by field against kiln.h by scripts/check_julia_ccalls.py).
struct KilnProfileSummary
    n_rows::Csize_t
    clock::UInt32
    total_s::Float64
    wall_s::Float64
end

struct KilnProfileRow
    op::NTuple{64,UInt8}
    calls::UInt64
    timed::UInt64
    total_s::Float64
    mean_s::Float64
    share::Float64
end

"""
    Kiln.metrics_text() -> String

The runtime's metrics in Prometheus' text format (version 0.0.4): dispatches, operations, bound
bytes and GPU time per op, per-session counters, errors by code, pipeline caches, device memory.
"""
function metrics_text()
    out = Ref{Ptr{UInt8}}(C_NULL)
    check(@ccall libkiln.kiln_metrics_text(out::Ref{Ptr{UInt8}})::UInt32)
    try
        return unsafe_string(out[])
    finally
        @ccall libkiln.kiln_string_free(out[]::Ptr{UInt8})::UInt32
    end
end

"""
A per-op profile: `rows` (one named tuple per op: `op`, `calls`, `timed`, `total_s`, `mean_s`,
`share`; most time first), `clock` (`:gpu_timestamps`, or `:wall_clock` where the adapter has no
timestamp queries: each op then ran submitted and waited for alone), `total_s`, `wall_s`.
`show` prints the table.
"""
struct Profile
    rows::Vector{NamedTuple{(:op, :calls, :timed, :total_s, :mean_s, :share),
                            Tuple{String,Int,Int,Float64,Float64,Float64}}}
    clock::Symbol
    total_s::Float64
    wall_s::Float64
    text::String
end

Base.show(io::IO, p::Profile) = print(io, p.text)

function _profile_stop()
    summary = Ref{KilnProfileSummary}()
    rows = Ref{Ptr{KilnProfileRow}}(C_NULL)
    text = Ref{Ptr{UInt8}}(C_NULL)
    check(@ccall libkiln.kiln_profile_stop(summary::Ref{KilnProfileSummary}, rows::Ref{Ptr{KilnProfileRow}},
                                           text::Ref{Ptr{UInt8}})::UInt32)
    s = summary[]
    try
        table = map(1:Int(s.n_rows)) do i
            row = unsafe_load(rows[], i)
            (op=_cstr(row.op), calls=Int(row.calls), timed=Int(row.timed), total_s=row.total_s,
             mean_s=row.mean_s, share=row.share)
        end
        clock = s.clock == 0 ? :gpu_timestamps : :wall_clock
        return Profile(table, clock, s.total_s, s.wall_s, unsafe_string(text[]))
    finally
        @ccall libkiln.kiln_profile_rows_free(rows[]::Ptr{KilnProfileRow}, s.n_rows::Csize_t)::UInt32
        @ccall libkiln.kiln_string_free(text[]::Ptr{UInt8})::UInt32
    end
end

"""
    p = Kiln.profile() do ... end

Runs the block with every dispatch of the process profiled (each gets a compute pass of its own,
timed with GPU timestamps), then returns the `Kiln.Profile`. One profile at a time.
"""
function profile(f)
    check(@ccall libkiln.kiln_profile_start()::UInt32)
    try
        f()
    catch
        _profile_stop()
        rethrow()
    end
    return _profile_stop()
end

# Written by hand: Julia's idiom (Base's names and methods, column-major `dims`, 1-based
# positions, broadcasting, finalizers) over the generated `_kiln_<op>` @ccalls (ccall_gen.jl)
# and elementwise tables (ops_gen.jl); the runtime API besides.
"""
    Kiln

Julia bindings to Kiln, one WebGPU compute runtime shared by Rust, C, Julia, Elixir and Python,
through its C ABI (`libkiln`, `include/kiln.h`).

`KilnArray{T,N}` is a GPU tensor with Julia semantics: column-major, 1-based, `dims=1` is
the first dimension. A Julia array of size `(d1, …, dn)` is handed to Kiln as the row-major
tensor of shape `(dn, …, d1)` with the same bytes (no copy, no transpose); `A * B` is
Kiln's `matmul(B, A)`. Element types: `Float32`, `Float16` (where the adapter supports it),
`Int32`, `UInt32`, `Bool` (one byte an element on the host, as Julia stores it; comparisons
such as `x .== y`, `isnan.(x)` and the logical broadcasts give it, `all` and `any` take it).

The library is found through `ENV["KILN_LIB"]` (a path to `libkiln.so`), else the repository's
build output `target/release/libkiln.so` (`make c-lib`).
"""
module Kiln

using Libdl
using LinearAlgebra
import Statistics

export KilnArray, KilnError, KilnVector, KilnMatrix

# --------------------------------------------------------------------------------------------
# The library
# --------------------------------------------------------------------------------------------

# A constant name for @ccall; __init__ dlopens the real file first, and libkiln.so carries
# the soname "libkiln.so", so every @ccall resolves to that already-loaded copy.
const libkiln = "libkiln." * Libdl.dlext
const ABI_VERSION = 0x00000002
const LIBPATH = Ref{String}("")
const LIBHANDLE = Ref{Ptr{Cvoid}}(C_NULL)

function _find_library()
    p = get(ENV, "KILN_LIB", "")
    if !isempty(p)
        isfile(p) || error("Kiln: ENV[\"KILN_LIB\"] = $(repr(p)) is not a file")
        return abspath(p)
    end
    repo = normpath(joinpath(@__DIR__, "..", ".."))
    for profile in ("release", "debug")
        cand = joinpath(repo, "target", profile, libkiln)
        isfile(cand) && return cand
    end
    error("Kiln: cannot find $libkiln. Build it with `make c-lib` in $repo, " *
          "or set ENV[\"KILN_LIB\"] to the path of $libkiln")
end

function __init__()
    path = _find_library()
    LIBPATH[] = path
    dir = dirname(path)
    dir in Libdl.DL_LOAD_PATH || pushfirst!(Libdl.DL_LOAD_PATH, dir)
    LIBHANDLE[] = Libdl.dlopen(path, Libdl.RTLD_NOW | Libdl.RTLD_GLOBAL)
    v = @ccall libkiln.kiln_abi_version()::UInt32
    v == ABI_VERSION || error("Kiln: $path has C ABI version $v, this package needs $ABI_VERSION")
    return nothing
end

"""The path of the loaded libkiln."""
libpath() = LIBPATH[]

"""The version string of the loaded libkiln, e.g. \"0.1.0\"."""
version() = unsafe_string(@ccall libkiln.kiln_version()::Cstring)

# Opaque C types (only ever used behind pointers).
struct KilnTensor end
struct KilnKernel end

# Mirrors of the C structs (checked field by field against kiln.h by scripts/check_julia_ccalls.py).
struct KilnDeviceInfo
    index::Csize_t
    name::NTuple{256,UInt8}
    backend::NTuple{16,UInt8}
    device_type::NTuple{16,UInt8}
    driver::NTuple{128,UInt8}
    vendor::UInt32
    device_id::UInt32
    max_buffer_size::UInt64
    max_storage_buffer_binding_size::UInt64
    shader_f16::Bool
    chosen::Bool
end

struct KilnMemoryStats
    allocated_bytes::UInt64
    in_use_bytes::UInt64
    peak_bytes::UInt64
    live_buffers::UInt64
    pooled_bytes::UInt64
end

struct KilnPipelineStats
    pipelines::UInt64
    hits::UInt64
    misses::UInt64
    compile_seconds::Cdouble
end

# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

"""
    KilnError(code, name, msg)

An error reported by Kiln: `code` is the stable status number (docs/DESIGN.md), `name` its symbol
(`:SHAPE_MISMATCH`, `:SHADER`, …), `msg` the library's message.
"""
struct KilnError <: Exception
    code::Int
    name::Symbol
    msg::String
end

Base.showerror(io::IO, e::KilnError) = print(io, "KilnError(", e.name, ", code ", e.code, "): ", e.msg)

status_name(code::Integer) = Symbol(unsafe_string(@ccall libkiln.kiln_status_name(UInt32(code)::UInt32)::Cstring))

function _last_message()
    n = @ccall libkiln.kiln_last_error_message(C_NULL::Ptr{UInt8}, 0::Csize_t)::Csize_t
    buf = Vector{UInt8}(undef, n)
    @ccall libkiln.kiln_last_error_message(buf::Ptr{UInt8}, n::Csize_t)::Csize_t
    return String(buf[1:end-1])
end

# Must be called right after the failing ccall (no yield in between: the message is per thread).
@inline function check(status::UInt32)
    status == 0x00000000 && return nothing
    msg = _last_message()
    throw(KilnError(Int(status), status_name(status), msg))
end

# The calls that wait for the GPU (read-back, synchronize) run in Julia's GC-safe state, so
# that a long wait does not stop other threads' garbage collections: between
# jl_gc_safe_enter and jl_gc_safe_leave there is only the ccall, on values that are already
# raw pointers and bits (nothing allocates there).

# --------------------------------------------------------------------------------------------
# Element types
# --------------------------------------------------------------------------------------------

# KilnEltype, dtype_code and eltype_of (kiln-core's dtype table), UNARY, FLOAT_ONLY and BINARY
# (its elementwise tables): generated (`make gen`).
include("ops_gen.jl")

# The Kiln type a host element type is stored as (Float64 has no portable GPU type).
kiln_eltype(::Type{T}) where {T<:KilnEltype} = T
const _f64_warned = Ref(false)
function kiln_eltype(::Type{Float64})
    if !_f64_warned[]
        _f64_warned[] = true
        @warn "Kiln: Float64 data is stored as Float32 (WGSL has no portable f64); this warning is shown once"
    end
    return Float32
end
kiln_eltype(::Type{<:Union{Int8,Int16,Int64}}) = Int32
kiln_eltype(::Type{<:Union{UInt8,UInt16,UInt64}}) = UInt32
kiln_eltype(::Type{T}) where {T} = dtype_code(T)

# --------------------------------------------------------------------------------------------
# KilnArray
# --------------------------------------------------------------------------------------------

"""
    KilnArray{T,N} <: AbstractArray{T,N}

An `N`-dimensional GPU array of `T` (a handle to a Kiln tensor). Create one with
`KilnArray(A)`, read it back with `Array(x)`. Freed by its finalizer, or at once with
[`Kiln.free!`](@ref). Scalar indexing is not supported (read back with `Array` instead).
"""
mutable struct KilnArray{T<:KilnEltype,N} <: AbstractArray{T,N}
    handle::Ptr{KilnTensor}
    dims::NTuple{N,Int}
    function KilnArray{T,N}(h::Ptr{KilnTensor}, dims::NTuple{N,Int}) where {T<:KilnEltype,N}
        x = new{T,N}(h, dims)
        finalizer(_finalize, x)
        return x
    end
end

const KilnVector{T} = KilnArray{T,1}
const KilnMatrix{T} = KilnArray{T,2}
const KilnVecOrMat{T} = Union{KilnArray{T,1},KilnArray{T,2}}

function _finalize(x::KilnArray)
    h = x.handle
    if h != C_NULL
        x.handle = C_NULL
        @ccall libkiln.kiln_tensor_free(h::Ptr{KilnTensor})::UInt32  # fails only for a handle not ours
    end
    return nothing
end

"""
    Kiln.free!(x::KilnArray)

Releases the GPU buffer now (it returns to Kiln's pool). `x` must not be used afterwards.
Calling it twice is harmless.
"""
free!(x::KilnArray) = _finalize(x)

"""Whether `x` still holds a tensor (it has not been freed)."""
isvalid(x::KilnArray) = x.handle != C_NULL

function ptr(x::KilnArray)
    h = x.handle
    h == C_NULL && throw(ArgumentError("this KilnArray was freed with Kiln.free!"))
    return h
end
ptr(::Nothing) = Ptr{KilnTensor}(C_NULL)

Base.unsafe_convert(::Type{Ptr{KilnTensor}}, x::KilnArray) = ptr(x)

Base.size(x::KilnArray) = x.dims
Base.length(x::KilnArray) = prod(x.dims)
Base.IndexStyle(::Type{<:KilnArray}) = IndexLinear()

# The row-major shape Kiln sees: the Julia dims reversed.
_cshape(dims) = Csize_t[dims[i] for i in length(dims):-1:1]

# Wraps a new tensor handle from the library, reading its dtype and shape.
function wrap(h::Ptr{KilnTensor})
    h == C_NULL && throw(KilnError(13, :INTERNAL, "the library returned a NULL tensor"))
    nd = Ref{Csize_t}(0)
    dt = Ref{UInt32}(0)
    try
        check(@ccall libkiln.kiln_tensor_ndim(h::Ptr{KilnTensor}, nd::Ref{Csize_t})::UInt32)
        shape = Vector{Csize_t}(undef, max(Int(nd[]), 1))
        check(@ccall libkiln.kiln_tensor_shape(h::Ptr{KilnTensor}, shape::Ptr{Csize_t}, length(shape)::Csize_t)::UInt32)
        check(@ccall libkiln.kiln_tensor_dtype(h::Ptr{KilnTensor}, dt::Ref{UInt32})::UInt32)
        n = Int(nd[])
        dims = ntuple(i -> Int(shape[n - i + 1]), n)
        return KilnArray{eltype_of(dt[]),n}(h, dims)
    catch
        @ccall libkiln.kiln_tensor_free(h::Ptr{KilnTensor})::UInt32  # fails only for a handle not ours
        rethrow()
    end
end

# Calls `f(out::Ref{Ptr{KilnTensor}}) -> status` and wraps the new tensor.
@inline function _new(f)
    out = Ref{Ptr{KilnTensor}}(C_NULL)
    check(f(out))
    return wrap(out[])
end

# An op giving a named tuple (one out-pointer per element, all NULL on error): a NamedTuple of
# its elements under `names`.
function _news(f, names::NTuple{N,Symbol}) where {N}
    outs = ntuple(_ -> Ref{Ptr{KilnTensor}}(C_NULL), N)
    check(f(outs))
    return NamedTuple{names}(map(o -> wrap(o[]), outs))
end

"""
    KilnArray(A::AbstractArray)
    KilnArray{T}(A::AbstractArray)

Uploads `A` to the GPU. `Float64` becomes `Float32` (with a one-time warning), other integer
types `Int32`/`UInt32`; `KilnArray{T}` converts to `T` explicitly.
"""
KilnArray(A::AbstractArray{T}) where {T} = KilnArray{kiln_eltype(T)}(A)
KilnArray{T}(A::AbstractArray{S,N}) where {T<:KilnEltype,S,N} = KilnArray{T,N}(A)
function KilnArray{T,N}(A::AbstractArray{S,N}) where {T<:KilnEltype,S,N}
    host = A isa Array{T,N} ? A : convert(Array{T,N}, A)
    return _upload(host)
end
KilnArray(x::KilnArray) = x
KilnArray{T}(x::KilnArray) where {T<:KilnEltype} = cast(x, T)
KilnArray{T,N}(x::KilnArray{S,N}) where {T<:KilnEltype,S,N} = cast(x, T)

function _upload(A::Array{T,N}) where {T<:KilnEltype,N}
    shape = _cshape(size(A))
    nbytes = sizeof(A)
    return _new() do out
        @ccall libkiln.kiln_tensor_from_host(dtype_code(T)::UInt32, shape::Ptr{Csize_t}, N::Csize_t,
                                             A::Ptr{Cvoid}, nbytes::Csize_t, out::Ref{Ptr{KilnTensor}})::UInt32
    end
end

"""
    Array(x::KilnArray)

Waits for the GPU work that produces `x` and copies it into a new `Array` (same bytes: no
transpose).
"""
function Base.Array{T,N}(x::KilnArray{T,N}) where {T,N}
    A = Array{T,N}(undef, x.dims)
    _read!(A, x)
    return A
end
Base.Array{T}(x::KilnArray{T,N}) where {T,N} = Array{T,N}(x)
Base.Array(x::KilnArray{T,N}) where {T,N} = Array{T,N}(x)
Base.collect(x::KilnArray) = Array(x)
Base.convert(::Type{Array}, x::KilnArray) = Array(x)

function _read!(A::Array{T}, x::KilnArray{T}) where {T}
    length(A) == length(x) || throw(DimensionMismatch("destination has $(length(A)) elements, source $(length(x))"))
    GC.@preserve A x begin
        h = ptr(x)
        p = Ptr{Cvoid}(pointer(A))
        n = Csize_t(sizeof(A))
        gc = ccall(:jl_gc_safe_enter, Int8, ())
        st = @ccall libkiln.kiln_tensor_to_host(h::Ptr{KilnTensor}, p::Ptr{Cvoid}, n::Csize_t)::UInt32
        ccall(:jl_gc_safe_leave, Cvoid, (Int8,), gc)
        check(st)
    end
    return A
end

"""Reads a 0-dimensional KilnArray back as a scalar."""
function _scalar(x::KilnArray{T,0}) where {T}
    A = Array{T,0}(undef)
    _read!(A, x)
    free!(x)
    return A[]
end

Base.getindex(x::KilnArray{T,0}) where {T} = Array(x)[]

function Base.show(io::IO, ::MIME"text/plain", x::KilnArray{T,N}) where {T,N}
    if !isvalid(x)
        print(io, "KilnArray{$T, $N} (freed)")
        return
    end
    print(io, Base.dims2string(size(x)), " KilnArray{$T, $N}")
    if length(x) > 0
        println(io, ":")
        Base.print_array(IOContext(io, :compact => true, :limit => true), Array(x))
    end
end
function Base.show(io::IO, x::KilnArray{T,N}) where {T,N}
    isvalid(x) || return print(io, "KilnArray{$T, $N} (freed)")
    print(io, "KilnArray(")
    show(io, Array(x))
    print(io, ")")
end

Base.:(==)(a::KilnArray, b::KilnArray) = size(a) == size(b) && Array(a) == Array(b)
Base.:(==)(a::KilnArray, b::AbstractArray) = size(a) == size(b) && Array(a) == b
Base.:(==)(a::AbstractArray, b::KilnArray) = b == a
Base.isapprox(a::KilnArray, b::AbstractArray; kw...) = isapprox(Array(a), b; kw...)
Base.isapprox(a::AbstractArray, b::KilnArray; kw...) = isapprox(a, Array(b); kw...)
Base.isapprox(a::KilnArray, b::KilnArray; kw...) = isapprox(Array(a), Array(b); kw...)

Base.similar(x::KilnArray{T}, ::Type{S}, dims::Dims) where {T,S<:KilnEltype} = empty(S, dims...)
Base.similar(x::KilnArray{T}, dims::Dims) where {T} = empty(T, dims...)

# --------------------------------------------------------------------------------------------
# Creation
# --------------------------------------------------------------------------------------------

_dims(d::Tuple{Vararg{Integer}}) = map(Int, d)
_dims(d::Integer...) = map(Int, d)

"""An uninitialised KilnArray (contents unspecified until written, e.g. by a kernel)."""
function empty(::Type{T}, dims::Integer...) where {T<:KilnEltype}
    shape = _cshape(dims)
    return _new() do out
        @ccall libkiln.kiln_tensor_empty(dtype_code(T)::UInt32, shape::Ptr{Csize_t}, length(shape)::Csize_t,
                                         out::Ref{Ptr{KilnTensor}})::UInt32
    end
end

"""`Kiln.fill(v, dims...)`: a KilnArray of `typeof(v)` (Kiln's element type for it) filled with `v`."""
fill(v::T, dims::Integer...) where {T<:Real} = full(kiln_eltype(T), v, dims...)
fill(v::Real, dims::Tuple{Vararg{Integer}}) = fill(v, dims...)

# full, zeros and ones (and rand, randn) take their rows' form: methods_gen.jl.

"""
    Kiln.arange(start, stop, step=1; T=Float32)

`start, start + step, …` strictly below `stop` (numpy's `arange`, stop excluded), as a
KilnVector.
"""
function arange(start::Real, stop::Real, step::Real=1; T::Type=Float32)
    return _kiln_arange(start, stop, step, T)
end

"""`KilnArray(r::AbstractRange)` is built on the GPU for evenly spaced integer ranges."""
function KilnArray(r::AbstractRange{<:Integer})
    isempty(r) && return KilnArray(Int32[])
    return arange(first(r), last(r) + sign(step(r)), step(r); T=Int32)
end

Base.copy(x::KilnArray) = _new() do out
    @ccall libkiln.kiln_copy(x::Ptr{KilnTensor}, out::Ref{Ptr{KilnTensor}})::UInt32
end

function Base.fill!(x::KilnArray, v::Real)
    check(@ccall libkiln.kiln_fill(x::Ptr{KilnTensor}, Float64(v)::Cdouble)::UInt32)
    return x
end

"""`Kiln.cast(x, T)`: converts the elements (float to integer truncates toward zero, saturating)."""
function cast(x::KilnArray{S}, ::Type{T}) where {S,T<:KilnEltype}
    S === T && return x
    return _kiln_cast(x, T)
end
Base.convert(::Type{KilnArray{T}}, x::KilnArray) where {T<:KilnEltype} = cast(x, T)
Base.convert(::Type{KilnArray{T,N}}, x::KilnArray{S,N}) where {T<:KilnEltype,S,N} = cast(x, T)

# --------------------------------------------------------------------------------------------
# Elementwise ops and broadcasting
# --------------------------------------------------------------------------------------------

function _unary(name::String, x::KilnArray)
    return _new() do out
        @ccall libkiln.kiln_unary(name::Cstring, x::Ptr{KilnTensor}, out::Ref{Ptr{KilnTensor}})::UInt32
    end
end

# Same element type for both operands, by Julia's promotion (as a Kiln type).
function _promote(a::KilnArray{A}, b::KilnArray{B}) where {A,B}
    A === B && return a, b
    T = kiln_eltype(promote_type(A, B))
    return cast(a, T), cast(b, T)
end

function _binary(name::String, a::KilnArray, b::KilnArray)
    _check_broadcast(name, a, b)   # Julia's sizes in the error, not Kiln's row-major shapes
    a, b = _promote(a, b)
    return _new() do out
        @ccall libkiln.kiln_binary(name::Cstring, a::Ptr{KilnTensor}, b::Ptr{KilnTensor}, out::Ref{Ptr{KilnTensor}})::UInt32
    end
end

function _binary_scalar(name::String, a::KilnArray{T}, s::Real, scalar_first::Bool) where {T}
    # An integer array with a non-integer scalar computes in Float32 (Julia would widen too).
    if T <: Integer && !(s isa Integer)
        a = cast(a, Float32)
    end
    return _new() do out
        @ccall libkiln.kiln_binary_scalar(name::Cstring, a::Ptr{KilnTensor}, Float64(s)::Cdouble, scalar_first::Bool,
                                          out::Ref{Ptr{KilnTensor}})::UInt32
    end
end

# Julia's `/` gives floats for integers.
_floaty(x::KilnArray{T}) where {T} = T <: AbstractFloat ? x : cast(x, Float32)

"""Elementwise `1/sqrt(x)` (broadcast it: `Kiln.rsqrt.(x)`)."""
rsqrt(x::Real) = inv(sqrt(x))
"""Elementwise logistic sigmoid."""
sigmoid(x::Real) = inv(one(x) + exp(-x))
"""Elementwise `max(x, 0)`."""
relu(x::Real) = max(x, zero(x))
"""Elementwise GELU with the exact erf (uses an erf approximation on the host side)."""
gelu(x::Real) = x * (1 + _erf(x / sqrt(oftype(float(x), 2)))) / 2
"""Elementwise GELU with the tanh approximation."""
gelu_tanh(x::Real) = x * (1 + tanh(sqrt(2 / oftype(float(x), pi)) * (x + oftype(float(x), 0.044715) * x^3))) / 2
"""Elementwise `x * sigmoid(x)`."""
silu(x::Real) = x * sigmoid(x)
"""Elementwise `log(exp(x) + exp(y))` without overflow (numpy's `logaddexp`): `Kiln.logaddexp.(a, b)`."""
function logaddexp(x::Real, y::Real)
    x == y && return x + log(oftype(float(x), 2))
    d = x - y
    return d > 0 ? x + log1p(exp(-d)) : d <= 0 ? y + log1p(exp(d)) : oftype(float(x), NaN)
end
"""The next floating-point value after `x` toward `y` (C's and numpy's `nextafter`): `Kiln.nextafter.(a, b)`."""
function nextafter(x::T, y::Real) where {T<:AbstractFloat}
    (isnan(x) || isnan(y)) && return T(NaN)
    x == y && return T(y)
    return y > x ? nextfloat(x) : prevfloat(x)
end

# erf without SpecialFunctions (host-side scalar version only; the GPU uses its own).
function _erf(x::Real)
    t = 1 / (1 + 0.3275911 * abs(x))
    y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x)
    return oftype(float(x), copysign(y, x))
end

struct KilnStyle <: Broadcast.AbstractArrayStyle{Any} end
KilnStyle(::Val) = KilnStyle()
Base.BroadcastStyle(::Type{<:KilnArray}) = KilnStyle()

include("ccall_gen.jl")   # _kiln_<op>: the @ccall of every plain op of the table
include("methods_gen.jl")   # the Kiln.jl methods that take their rows' form

for (f, name) in UNARY
    if name in FLOAT_ONLY
        @eval Broadcast.broadcasted(::KilnStyle, ::typeof($f), x::KilnArray) = _unary($name, _floaty(x))
    else
        @eval Broadcast.broadcasted(::KilnStyle, ::typeof($f), x::KilnArray) = _unary($name, x)
    end
end
Base.:-(x::KilnArray) = _unary("neg", x)

for (f, name) in BINARY
    @eval begin
        Broadcast.broadcasted(::KilnStyle, ::typeof($f), a::KilnArray, b::KilnArray) = _binary($name, a, b)
        Broadcast.broadcasted(::KilnStyle, ::typeof($f), a::KilnArray, s::Real) = _binary_scalar($name, a, s, false)
        Broadcast.broadcasted(::KilnStyle, ::typeof($f), s::Real, a::KilnArray) = _binary_scalar($name, a, s, true)
    end
end
# `/` and `^` compute in floating point (Julia semantics for integer arrays).
Broadcast.broadcasted(::KilnStyle, ::typeof(/), a::KilnArray, b::KilnArray) = _binary("div", _floaty(a), _floaty(b))
Broadcast.broadcasted(::KilnStyle, ::typeof(/), a::KilnArray, s::Real) = _binary_scalar("div", _floaty(a), s, false)
Broadcast.broadcasted(::KilnStyle, ::typeof(/), s::Real, a::KilnArray) = _binary_scalar("div", _floaty(a), s, true)
Broadcast.broadcasted(::KilnStyle, ::typeof(^), a::KilnArray, b::KilnArray) = _binary("pow", _floaty(a), _floaty(b))
Broadcast.broadcasted(::KilnStyle, ::typeof(^), a::KilnArray, s::Real) = _binary_scalar("pow", _floaty(a), s, false)
Broadcast.broadcasted(::KilnStyle, ::typeof(^), s::Real, a::KilnArray) = _binary_scalar("pow", _floaty(a), s, true)
# `x .^ 2` lowers to broadcasted(literal_pow, ^, x, Val(2)); it is caught before Base wraps
# `^` and `Val(2)` in Refs for the style dispatch.
function Broadcast.broadcasted(::typeof(Base.literal_pow), ::typeof(^), a::KilnArray{T}, ::Val{p}) where {T,p}
    T <: Integer && p isa Integer && return _binary_scalar("pow", a, p, false)
    return _binary_scalar("pow", _floaty(a), p, false)
end
# Integer powers stay integers, as in Base (wrapping on overflow; a negative exponent gives
# trunc(1 / x^|y|) where Base throws a DomainError).
const _KilnInt = Union{Int32,UInt32}
Broadcast.broadcasted(::KilnStyle, ::typeof(^), a::KilnArray{<:_KilnInt}, b::KilnArray{<:_KilnInt}) = _binary("pow", a, b)
Broadcast.broadcasted(::KilnStyle, ::typeof(^), a::KilnArray{<:_KilnInt}, s::Integer) = _binary_scalar("pow", a, s, false)
Broadcast.broadcasted(::KilnStyle, ::typeof(^), s::Integer, a::KilnArray{<:_KilnInt}) = _binary_scalar("pow", a, s, true)
# `fld` and `mod` are kiln-core's floor_divide and remainder (in BINARY): x ÷ 0 gives 0 on
# integers where Julia throws a DivideError.
# `div` (÷) truncates toward zero: the floor quotient, plus one where a remainder is left and
# the operands' signs differ (and the divisor is not zero).
function _truncdiv(a::KilnArray{T}, b::Union{KilnArray,Integer}) where {T<:Integer}
    q = b isa KilnArray ? _binary("div", a, b) : _binary_scalar("div", a, b, false)
    T <: Unsigned && return q
    left = (q .* b) .!= a
    differ = b isa KilnArray ? (a .< 0) .!= (b .< 0) : (b < 0 ? a .>= 0 : a .< 0)
    fix = b isa KilnArray ? left .& differ .& (b .!= 0) : (b == 0 ? left .& false : left .& differ)
    return q .+ T.(fix)
end
Broadcast.broadcasted(::KilnStyle, ::typeof(div), a::KilnArray{<:Integer}, b::KilnArray{<:Integer}) = _truncdiv(a, b)
Broadcast.broadcasted(::KilnStyle, ::typeof(div), a::KilnArray{<:Integer}, s::Integer) = _truncdiv(a, s)

# The logical broadcasts of Bool arrays: `.!`, `.&`, `.|`, `xor.` (Base's on Bool). On integer
# arrays `.&`, `.|`, `xor.`, `.<<` and `.>>` are kiln-core's bitwise ops (BINARY), and `.~` below.
Broadcast.broadcasted(::KilnStyle, ::typeof(!), x::KilnArray{Bool}) = _unary("logical_not", x)
for (f, name) in ((:&, "logical_and"), (:|, "logical_or"), (:xor, "logical_xor"))
    @eval begin
        Broadcast.broadcasted(::KilnStyle, ::typeof($f), a::KilnArray{Bool}, b::KilnArray{Bool}) = _binary($name, a, b)
        Broadcast.broadcasted(::KilnStyle, ::typeof($f), a::KilnArray{Bool}, s::Bool) = _binary_scalar($name, a, s, false)
        Broadcast.broadcasted(::KilnStyle, ::typeof($f), s::Bool, a::KilnArray{Bool}) = _binary_scalar($name, a, s, true)
    end
end

# `.~`: bitwise not (Base's `~` on Bool is `!`, as kiln-core's bitwise_invert on bool).
Broadcast.broadcasted(::KilnStyle, ::typeof(~), x::KilnArray{<:Union{Bool,Int32,UInt32}}) = _unary("bitwise_invert", x)

# ifelse.(cond, a, b): Kiln's `where` (cond Bool, or non-zero = true).
_tensor_like(s::Real, ::Type{T}) where {T} = full(T, s)
function Broadcast.broadcasted(::KilnStyle, ::typeof(ifelse), c::KilnArray, a::Union{KilnArray,Real}, b::Union{KilnArray,Real})
    _check_broadcast("ifelse", c, a, b)
    T = a isa KilnArray ? eltype(a) : b isa KilnArray ? eltype(b) : kiln_eltype(typeof(a))
    ta = a isa KilnArray ? a : _tensor_like(a, T)
    tb = b isa KilnArray ? b : _tensor_like(b, T)
    ta, tb = _promote(ta, tb)
    return _kiln_where(c, ta, tb)
end

# clamp.(x, lo, hi): kiln-core's clip, the Array API's (a NaN bound gives NaN where Base's clamp
# would keep x); bounds are KilnArrays or numbers of x's type, ±Inf meaning no bound.
function Broadcast.broadcasted(::KilnStyle, ::typeof(clamp), x::KilnArray, lo::Union{KilnArray,Real}, hi::Union{KilnArray,Real})
    if lo isa Real && hi isa Real
        return _new() do out
            @ccall libkiln.kiln_clip_scalar(x::Ptr{KilnTensor}, Float64(lo)::Cdouble, Float64(hi)::Cdouble,
                                            out::Ref{Ptr{KilnTensor}})::UInt32
        end
    end
    _check_broadcast("clamp", x, lo, hi)
    tl = lo isa KilnArray ? lo : _tensor_like(lo, eltype(x))
    th = hi isa KilnArray ? hi : _tensor_like(hi, eltype(x))
    return _new() do out
        @ccall libkiln.kiln_clip(x::Ptr{KilnTensor}, tl::Ptr{KilnTensor}, th::Ptr{KilnTensor}, out::Ref{Ptr{KilnTensor}})::UInt32
    end
end

# Float32.(x) and friends: cast.
Broadcast.broadcasted(::KilnStyle, ::Type{T}, x::KilnArray) where {T<:KilnEltype} = cast(x, T)

# Anything else would need a kernel per Julia function: say so instead of computing on the host.
function Base.copy(bc::Broadcast.Broadcasted{KilnStyle})
    throw(ArgumentError("Kiln: broadcasting $(bc.f) over these arguments is not supported on the GPU. " *
                        "Supported: the unary ops $(join(first.(UNARY), ", ")), the binary ops " *
                        "$(join(first.(BINARY), ", ")), /, ^, div, fld, ifelse, ~, !, &, |, xor (Bool arrays) and element-type conversion, " *
                        "on KilnArrays and real scalars. Read back with Array(x) to use other functions."))
end

# Non-dotted arithmetic with Julia's rules (same sizes for + and -; scalars for * and /).
function _same_size(a, b, op)
    size(a) == size(b) || throw(DimensionMismatch("$op: sizes $(size(a)) and $(size(b)) differ (use .$op to broadcast)"))
end
Base.:+(a::KilnArray, b::KilnArray) = (_same_size(a, b, "+"); _binary("add", a, b))
Base.:-(a::KilnArray, b::KilnArray) = (_same_size(a, b, "-"); _binary("sub", a, b))
Base.:*(a::KilnArray, s::Real) = _binary_scalar("mul", a, s, false)
Base.:*(s::Real, a::KilnArray) = _binary_scalar("mul", a, s, true)
Base.:/(a::KilnArray, s::Real) = _binary_scalar("div", _floaty(a), s, false)

# --------------------------------------------------------------------------------------------
# Matrix product
# --------------------------------------------------------------------------------------------

function _matmul(a::KilnArray, b::KilnArray)
    a, b = _promote(a, b)
    return _kiln_matmul(a, b)
end

# Julia A * B (column-major) is Kiln's matmul(B, A) on the row-major views of the same bytes.
function Base.:*(A::KilnMatrix, B::KilnMatrix)
    size(A, 2) == size(B, 1) || throw(DimensionMismatch("A has size $(size(A)), B has size $(size(B))"))
    return _matmul(B, A)
end
function Base.:*(A::KilnMatrix, v::KilnVector)
    size(A, 2) == length(v) || throw(DimensionMismatch("A has size $(size(A)), v has length $(length(v))"))
    return _matmul(v, A)
end

"""
    Kiln.matmul(A, B)

Batched matrix product in Julia order: for `A` of size `(m, k, batch...)` and `B` of size
`(k, n, batch...)` gives `(m, n, batch...)` (batch dimensions broadcast).
"""
matmul(A::KilnArray, B::KilnArray) = _matmul(B, A)

# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------

# Julia dims (1-based, first = fastest) -> Kiln axes (0-based, last = fastest). Dims beyond
# ndims are size 1 in Julia and are dropped here. `nothing` = every axis.
function _axes(x::KilnArray{T,N}, dims) where {T,N}
    dims isa Colon && return nothing
    ds = dims isa Integer ? (dims,) : Tuple(dims)
    for d in ds
        d >= 1 || throw(ArgumentError("dimension must be ≥ 1, got $d"))
    end
    return Cptrdiff_t[N - d for d in ds if d <= N]
end

function _reduce(name::Symbol, x::KilnArray, axes::Union{Nothing,Vector{Cptrdiff_t}}, keepdims::Bool)
    name === :sum && return _kiln_sum(x, axes, keepdims)
    name === :mean && return _kiln_mean(x, axes, keepdims)
    name === :max && return _kiln_max(x, axes, keepdims)
    name === :all && return _kiln_all(x, axes, keepdims)
    name === :any && return _kiln_any(x, axes, keepdims)
    name === :prod && return _kiln_prod(x, axes, keepdims, nothing)
    return _kiln_min(x, axes, keepdims)
end

function _reduction(name::Symbol, x::KilnArray, dims)
    ax = _axes(x, dims)
    if ax === nothing
        return _scalar(_reduce(name, x, nothing, false))
    elseif isempty(ax)
        return copy(x)
    end
    return _reduce(name, x, ax, true)
end

# `init` as Base's: a whole reduction gives `op(result, init)` on the host; a reduction over
# `dims` applies `init` elementwise on the GPU, in the array's element type (Kiln has no wider
# type to promote to). An empty array's maximum/minimum is `init` (Kiln refuses it without).
struct _NoInit end

function Base.sum(x::KilnArray{T}; dims=:, init=_NoInit()) where {T}
    r = _reduction(:sum, x, dims)
    # Base widens small-integer sums to the machine integer.
    dims isa Colon && T <: Integer && (r = T <: Signed ? Int(r) : UInt(r))
    init isa _NoInit && return r
    return dims isa Colon ? r + init : _binary_scalar("add", r, init, false)
end
"""
    prod(x::KilnArray; dims=:)

Product on the GPU in the array's element type (integers wrap; Base widens `Int32` to `Int`,
kiln has no 64-bit integers); 1 over an empty collection.
"""
Base.prod(x::KilnArray; dims=:) = _reduction(:prod, x, dims)
Base.maximum(x::KilnArray; dims=:, init=_NoInit()) = _extremum(:max, "maximum", max, x, dims, init)
Base.minimum(x::KilnArray; dims=:, init=_NoInit()) = _extremum(:min, "minimum", min, x, dims, init)

function _extremum(kind::Symbol, name::String, op, x::KilnArray{T,N}, dims, init) where {T,N}
    _axes(x, dims)   # validates dims
    ds = dims isa Colon ? (1:N) : dims isa Integer ? (dims,) : Tuple(dims)
    if any(d -> d <= N && size(x, d) == 0, ds)   # an empty reduced dimension: every result is init
        init isa _NoInit && throw(ArgumentError("reducing over an empty collection is not allowed"))
        dims isa Colon && return init
        return full(T, init, ntuple(i -> i in ds ? 1 : size(x, i), N)...)
    end
    init isa _NoInit && return _reduction(kind, x, dims)
    dims isa Colon && return op(_reduction(kind, x, dims), init)
    return _binary_scalar(name, _reduction(kind, x, dims), init, false)
end
Statistics.mean(x::KilnArray; dims=:) = _reduction(:mean, _floaty(x), dims)

# all / any of a Bool array, as Base (which refuses other element types: a non-Bool is no
# truth value there); true / false over an empty collection.
function _logical(name::Symbol, x::KilnArray{T}, dims) where {T}
    T === Bool || throw(TypeError(name, "a KilnArray{Bool} (compare first, e.g. x .!= 0)", KilnArray{Bool}, x))
    return _reduction(name, x, dims)
end
Base.all(x::KilnArray; dims=:) = _logical(:all, x, dims)
Base.any(x::KilnArray; dims=:) = _logical(:any, x, dims)

function _var(x::KilnArray, dims, corrected::Bool, std::Bool=false)
    ax = _axes(x, dims)
    whole = ax === nothing
    xf = _floaty(x)
    ddof = corrected ? 1 : 0
    r = std ? _kiln_std(xf, ax, !whole, ddof) : _kiln_var(xf, ax, !whole, ddof)
    return whole ? _scalar(r) : r
end
Statistics.var(x::KilnArray; dims=:, corrected::Bool=true) = _var(x, dims, corrected)
Statistics.std(x::KilnArray; dims=:, corrected::Bool=true) = _var(x, dims, corrected, true)

function _arg(name::Symbol, x::KilnArray{T,N}, dims) where {T,N}
    if dims isa Colon
        r = name === :argmax ? _kiln_argmax(x, nothing, false) : _kiln_argmin(x, nothing, false)
        i = Int(_scalar(r)) + 1   # the row-major flat index is Julia's linear index
        return N == 1 ? i : CartesianIndices(size(x))[i]
    end
    dims isa Integer || throw(ArgumentError("Kiln: argmax/argmin take one dimension or dims=:"))
    1 <= dims <= N || throw(ArgumentError("dims=$dims out of range for a $N-dimensional array"))
    r = name === :argmax ? _kiln_argmax(x, N - dims, true) : _kiln_argmin(x, N - dims, true)
    return _binary_scalar("add", r, 1, false)   # 1-based positions along `dims`
end

"""
    argmax(x::KilnArray; dims=:)

With `dims=:` the index of the largest element (an `Int` for vectors, a `CartesianIndex`
otherwise), as Base. With `dims=d` a `KilnArray{Int32}` of 1-based positions along `d` (Base
returns `CartesianIndex`es there).
"""
Base.argmax(x::KilnArray; dims=:) = _arg(:argmax, x, dims)
Base.argmin(x::KilnArray; dims=:) = _arg(:argmin, x, dims)

# --------------------------------------------------------------------------------------------
# Normalization
# --------------------------------------------------------------------------------------------

_axis(x::KilnArray{T,N}, d::Integer) where {T,N} =
    1 <= d <= N ? Cptrdiff_t(N - d) : throw(ArgumentError("dims=$d out of range for a $N-dimensional array"))

# softmax, log_softmax, layer_norm, rms_norm and batch_norm take their rows' form: methods_gen.jl.
const logsoftmax = log_softmax

# An axis as the keyword `dims` (Julia dim d, 1-based, the first the fastest) of inputs of up to N
# dims: core axis N - d (the generated methods' translation, methods_gen.jl).
function _dims_axis(d::Integer, xs::KilnArray...)
    N = maximum(ndims, xs)
    1 <= d <= N || throw(ArgumentError("dims=$d out of range for a $N-dimensional array"))
    return Cptrdiff_t(N - d)
end

# --------------------------------------------------------------------------------------------
# Convolution and pooling (WHCN, as Flux)
# --------------------------------------------------------------------------------------------

_pair(v::Integer) = (Int(v), Int(v))
_pair(v::Tuple{Integer,Integer}) = (Int(v[1]), Int(v[2]))

# conv2d, max_pool2d and avg_pool2d take their rows' form (methods_gen.jl); Flux's names:
const maxpool = max_pool2d
const meanpool = avg_pool2d

# --------------------------------------------------------------------------------------------
# Movement
# --------------------------------------------------------------------------------------------

function Base.reshape(x::KilnArray, dims::Dims)
    prod(dims) == length(x) || throw(DimensionMismatch("new dimensions $dims must be consistent with array size $(length(x))"))
    shape = Cptrdiff_t[dims[i] for i in length(dims):-1:1]
    return _kiln_reshape(x, shape)
end
# One dimension given as `:` (inferred from the others), as Base; without this method Base
# would wrap the KilnArray in a host-side ReshapedArray.
function Base.reshape(x::KilnArray, dims::Tuple{Vararg{Union{Int,Colon}}})
    count(d -> d isa Colon, dims) == 1 ||
        throw(DimensionMismatch("new dimensions $dims may have at most one omitted dimension specified by `Colon()`"))
    known = 1
    for d in dims
        d isa Int && (known *= d)
    end
    (known != 0 && length(x) % known == 0) ||
        throw(DimensionMismatch("array size $(length(x)) must be divisible by the product of the new dimensions $dims"))
    return reshape(x, map(d -> d isa Colon ? length(x) ÷ known : d, dims))
end
Base.vec(x::KilnArray) = reshape(x, (length(x),))

function Base.permutedims(x::KilnArray{T,N}, perm) where {T,N}
    p = collect(Int, perm)
    (length(p) == N && sort(p) == 1:N) || throw(ArgumentError("no valid permutation of dimensions: $perm"))
    # Result Kiln axis c is Julia dim N - c; it takes x's Julia dim p[N - c], i.e. Kiln axis N - p[N - c].
    axes = Cptrdiff_t[N - p[N - c] for c in 0:N-1]
    return _kiln_permute(x, axes)
end
Base.permutedims(x::KilnMatrix) = permutedims(x, (2, 1))
Base.permutedims(x::KilnVector) = reshape(x, (1, length(x)))

"""`Kiln.swapdims(x, d1, d2)`: exchanges two dimensions (Kiln's `transpose`)."""
function swapdims(x::KilnArray{T,N}, d1::Integer, d2::Integer) where {T,N}
    a, b = _axis(x, d1), _axis(x, d2)
    return _kiln_transpose(x, a, b)
end

function _cat(xs, d::Integer)
    isempty(xs) && throw(ArgumentError("cat of no arrays"))
    d >= 1 || throw(ArgumentError("dims must be ≥ 1"))
    M = max(d, maximum(ndims, xs))
    T = kiln_eltype(mapreduce(eltype, promote_type, xs))
    parts = [reshape(cast(x, T), (size(x)..., ntuple(_ -> 1, M - ndims(x))...)) for x in xs]
    return _kiln_concat(parts, M - d)
end
Base.cat(x::KilnArray, xs::KilnArray...; dims::Integer) = _cat(KilnArray[x, xs...], dims)
# Same element type, mixed types (promoted as Base), vectors mixed with matrices (a vector is
# a one-column matrix): each with and without `{T}`, to stay more specific than Base's methods.
for f in (:vcat, :hcat), A in (:KilnVector, :KilnMatrix, :KilnVecOrMat)
    d = f === :vcat ? 1 : 2
    @eval Base.$f(x::$A{T}, xs::$A{T}...) where {T} = _cat(KilnArray[x, xs...], $d)
    @eval Base.$f(x::$A, xs::$A...) = _cat(KilnArray[x, xs...], $d)
end

function _slice(x::KilnArray{T,N}, d::Integer, start::Integer, stop::Integer, step::Integer) where {T,N}
    return _kiln_slice(x, N - d, start, stop, step)
end

function _index_select(x::KilnArray{T,N}, d::Integer, idx::AbstractVector{<:Integer}) where {T,N}
    ids = KilnArray{Int32}(Int32.(idx) .- Int32(1))
    return _kiln_index_select(x, N - d, ids)
end

const KilnIndex = Union{Colon,Integer,AbstractRange{<:Integer},AbstractVector{<:Integer}}

"""
    x[i, j, …]

Slicing with ranges (positive steps), `:`, integer vectors (Kiln's `index_select`) and
integers (which drop the dimension, as Base). All-integer (scalar) indexing is not supported:
read back with `Array(x)`.
"""
function Base.getindex(x::KilnArray{T,N}, I::Vararg{KilnIndex,N}) where {T,N}
    I = map(_host_index, I)   # index vectors held on the GPU are read back (base_methods.jl)
    all(i -> i isa Integer, I) &&
        throw(ArgumentError("Kiln: scalar indexing of a KilnArray is not supported (it would read the GPU " *
                            "once per element); use Array(x)[…] or a slice such as x[i:i, …]"))
    checkbounds(x, I...)
    I = map(_mask_positions, I)   # a Bool mask selects its true positions, as Base
    y = x
    for d in 1:N
        i = I[d]
        if i isa Colon
            continue
        elseif i isa Integer
            y = _slice(y, d, i - 1, i, 1)
        elseif i isa AbstractRange
            st = step(i)
            st > 0 || throw(ArgumentError("Kiln: ranges with a step ≤ 0 are not supported"))
            y = isempty(i) ? _slice(y, d, 0, 0, 1) : _slice(y, d, first(i) - 1, last(i), st)
        else
            y = _index_select(y, d, i)
        end
    end
    kept = Tuple(size(y, d) for d in 1:N if !(I[d] isa Integer))
    return length(kept) == N ? y : reshape(y, kept)
end
Base.getindex(x::KilnArray, ::Colon) = copy(vec(x))
Base.getindex(x::KilnArray{T,1}, ::Colon) where {T} = copy(x)

# 1-based ids as core's 0-based ones, in u32: an id outside 1:typemax(Int32) (0 and negative ones
# included) becomes a u32 at or past 2^31, past any axis, so it reads 0. In i32 a Julia 0 would
# be core's -1, which core's gather counts from the end (numpy): the last entry, not an error.
_ids(ids::KilnArray{UInt32}) = _binary_scalar("sub", ids, 1, false)
_ids(ids::KilnArray{Int32}) = _binary_scalar("sub", cast(ids, UInt32), 1, false)
_ids(ids::AbstractArray{<:Integer}) = KilnArray{UInt32}(map(i -> 1 <= i <= typemax(Int32) ? UInt32(i - 1) : typemax(UInt32), ids))

# gather, embedding (1-based ids: `_ids` below), rope and attention take their rows' form:
# methods_gen.jl.

# --------------------------------------------------------------------------------------------
# Quantized weights: GGUF blocks (:q4_0, :q4_1, :q8_0, :q5_0, :q5_1, and the K formats :q2_k
# .. :q6_k of 256-value super-blocks) kept quantized on the GPU as a
# KilnVector{UInt32} of the raw bytes, zero-padded to whole words. ggml's dimensions are Julia's:
# a GGUF matrix of ne = (K, N) (N rows of K values in the file) is a Julia (K, N) matrix.
# --------------------------------------------------------------------------------------------

const QUANT_FORMATS = (:q4_0, :q4_1, :q8_0, :q5_0, :q5_1, :q2_k, :q3_k, :q4_k, :q5_k, :q6_k)

function _quant_format(f)
    s = Symbol(lowercase(string(f)))
    s in QUANT_FORMATS || throw(KilnError(1, :INVALID_ARGUMENT, "format must be one of $(QUANT_FORMATS), got $(repr(f))"))
    return string(s)
end

"""
    Kiln.quant_from_bytes(data::AbstractVector{UInt8}, format, k, n)

Uploads raw GGUF blocks of a `(k, n)` matrix (`n` rows of `k` values in the file, `k` a
multiple of 32) in `format` (`:q4_0`, `:q4_1`, `:q8_0`) as the `KilnVector{UInt32}` the quant
functions read.
"""
function quant_from_bytes(data::AbstractVector{UInt8}, format, k::Integer, n::Integer)
    host = data isa Vector{UInt8} ? data : Vector{UInt8}(data)
    f = _quant_format(format)
    return GC.@preserve host _new() do out
        @ccall libkiln.kiln_quant_from_bytes(host::Ptr{Cvoid}, length(host)::Csize_t, f::Cstring, Csize_t(n)::Csize_t,
                                             Csize_t(k)::Csize_t, out::Ref{Ptr{KilnTensor}})::UInt32
    end
end

"""
    Kiln.dequantize(w, format, k, n)

The Float32 `(k, n)` matrix of the quantized `w`.
"""
dequantize(w::KilnVector, format, k::Integer, n::Integer) = _kiln_dequantize(w, _quant_format(format), n, k)

# quantize, quant_matmul and quant_embedding take their rows' form (methods_gen.jl);
# dequantize and quant_from_bytes name the matrix by ggml's (k, n) instead.

# --------------------------------------------------------------------------------------------
# Custom kernels
# --------------------------------------------------------------------------------------------

"""
    k = Kiln.Kernel(source, entry="main")
    k(xs::KilnArray...; workgroups=(x, y, z), uniforms=nothing)

A custom WGSL compute kernel. Calling it binds the arrays, in order, to the kernel's storage
bindings (in binding-number order) and `uniforms` (`nothing`, a byte vector, an array of bits
values or one isbits struct) to its uniform binding, and dispatches `workgroups`. Arrays bound
read_write are updated in place. The kernel sees each array's elements in Julia's linear
(column-major) order. Invalid WGSL throws `KilnError` with code `:SHADER` and line:column.
"""
mutable struct Kernel
    handle::Ptr{KilnKernel}
    entry::String
    function Kernel(source::AbstractString, entry::AbstractString="main")
        out = Ref{Ptr{KilnKernel}}(C_NULL)
        check(@ccall libkiln.kiln_kernel_compile(String(source)::Cstring, String(entry)::Cstring,
                                                 out::Ref{Ptr{KilnKernel}})::UInt32)
        k = new(out[], String(entry))
        finalizer(free!, k)
        return k
    end
end

function free!(k::Kernel)
    h = k.handle
    if h != C_NULL
        k.handle = C_NULL
        @ccall libkiln.kiln_kernel_free(h::Ptr{KilnKernel})::UInt32  # as kiln_tensor_free
    end
    return nothing
end

function Base.unsafe_convert(::Type{Ptr{KilnKernel}}, k::Kernel)
    k.handle == C_NULL && throw(ArgumentError("this Kernel was freed"))
    return k.handle
end

Base.show(io::IO, k::Kernel) = print(io, "Kiln.Kernel(", repr(k.entry), k.handle == C_NULL ? ", freed)" : ")")

_uniform_bytes(::Nothing) = UInt8[]
_uniform_bytes(v::AbstractVector{UInt8}) = Vector{UInt8}(v)
function _uniform_bytes(v::AbstractArray{T}) where {T}
    isbitstype(T) || throw(ArgumentError("uniforms: element type $T is not a bits type"))
    a = collect(v)
    buf = Vector{UInt8}(undef, sizeof(a))
    GC.@preserve a buf unsafe_copyto!(pointer(buf), Ptr{UInt8}(pointer(a)), sizeof(a))
    return buf
end
function _uniform_bytes(x::T) where {T}
    isbitstype(T) || throw(ArgumentError("uniforms: $T is not a bits type"))
    r = Ref(x)
    buf = Vector{UInt8}(undef, sizeof(T))
    GC.@preserve r buf unsafe_copyto!(pointer(buf), Ptr{UInt8}(Base.unsafe_convert(Ptr{T}, r)), sizeof(T))
    return buf
end

function (k::Kernel)(xs::KilnArray...; workgroups=(1, 1, 1), uniforms=nothing)
    wg = workgroups isa Integer ? (workgroups, 1, 1) : workgroups
    length(wg) == 3 || (wg = (wg..., ntuple(_ -> 1, 3 - length(wg))...))
    u = _uniform_bytes(uniforms)
    ptrs = Ptr{KilnTensor}[ptr(x) for x in xs]
    up = isempty(u) ? Ptr{Cvoid}(C_NULL) : Ptr{Cvoid}(pointer(u))
    GC.@preserve xs ptrs u begin
        check(@ccall libkiln.kiln_kernel_dispatch(k::Ptr{KilnKernel}, ptrs::Ptr{Ptr{KilnTensor}}, length(ptrs)::Csize_t,
                                                  up::Ptr{Cvoid}, length(u)::Csize_t, UInt32(wg[1])::UInt32,
                                                  UInt32(wg[2])::UInt32, UInt32(wg[3])::UInt32)::UInt32)
    end
    return nothing
end

include("interop.jl")   # copyto! and mul! in place
include("base_methods.jl")   # A', transpose, map, setindex!, \ (refused), Julia-order size errors
include("sorting.jl")   # sort, sortperm, searchsortedfirst/last, count, findall, unique, isin
include("session.jl")   # sessions: limits, ownership, close
include("metrics.jl")   # metrics_text, profile

# --------------------------------------------------------------------------------------------
# Devices, memory, synchronization
# --------------------------------------------------------------------------------------------

_cstr(t::NTuple{N,UInt8}) where {N} = String(UInt8[c for c in t if c != 0x00])

"""`Kiln.devices()`: every adapter Kiln can use, best first, as named tuples."""
function devices()
    n = Ref{Csize_t}(0)
    check(@ccall libkiln.kiln_device_count(n::Ref{Csize_t})::UInt32)
    list = NamedTuple[]
    for i in 0:Int(n[])-1
        r = Ref{KilnDeviceInfo}()
        check(@ccall libkiln.kiln_device_info(i::Csize_t, r::Ref{KilnDeviceInfo})::UInt32)
        d = r[]
        push!(list, (index=Int(d.index), name=_cstr(d.name), backend=_cstr(d.backend),
                     device_type=_cstr(d.device_type), driver=_cstr(d.driver), vendor=d.vendor,
                     device_id=d.device_id, max_buffer_size=Int(d.max_buffer_size),
                     max_storage_buffer_binding_size=Int(d.max_storage_buffer_binding_size),
                     shader_f16=d.shader_f16, chosen=d.chosen))
    end
    return list
end

"""`Kiln.select_device(spec)`: use the adapter matching `spec` (an index or part of its name) from now on."""
function select_device(spec::Union{AbstractString,Integer})
    idx = Ref{Csize_t}(0)
    check(@ccall libkiln.kiln_device_select(string(spec)::Cstring, idx::Ref{Csize_t})::UInt32)
    return Int(idx[])
end

"""`Kiln.device(A)`: the index (in `Kiln.devices()`) of the adapter `A` lives on."""
function device(x::KilnArray)
    i = Ref{Csize_t}(0)
    check(@ccall libkiln.kiln_tensor_device(x::Ptr{KilnTensor}, i::Ref{Csize_t})::UInt32)
    return Int(i[])
end

"""`Kiln.to_device(A, index)`: `A` on adapter `index` (as `Kiln.devices()` lists them): a copy
through host memory, or `A`'s tensor again when it lives there. Operations on arrays of two
devices throw `KilnError` (INVALID_ARGUMENT): move one first."""
to_device(x::KilnArray, index::Integer) = _new() do out
    @ccall libkiln.kiln_tensor_to_device(x::Ptr{KilnTensor}, Csize_t(index)::Csize_t,
                                         out::Ref{Ptr{KilnTensor}})::UInt32
end

"""`Kiln.synchronize()`: waits until the GPU has finished all queued work."""
function synchronize()
    gc = ccall(:jl_gc_safe_enter, Int8, ())
    st = @ccall libkiln.kiln_synchronize()::UInt32
    ccall(:jl_gc_safe_leave, Cvoid, (Int8,), gc)
    check(st)
end

"""`Kiln.memory_stats()`: the current device's memory counters."""
function memory_stats()
    r = Ref{KilnMemoryStats}()
    check(@ccall libkiln.kiln_memory_stats(r::Ref{KilnMemoryStats})::UInt32)
    m = r[]
    return (allocated_bytes=Int(m.allocated_bytes), in_use_bytes=Int(m.in_use_bytes), peak_bytes=Int(m.peak_bytes),
            live_buffers=Int(m.live_buffers), pooled_bytes=Int(m.pooled_bytes))
end

"""`Kiln.pipeline_stats()`: the current device's pipeline-cache counters."""
function pipeline_stats()
    r = Ref{KilnPipelineStats}()
    check(@ccall libkiln.kiln_pipeline_stats(r::Ref{KilnPipelineStats})::UInt32)
    p = r[]
    return (pipelines=Int(p.pipelines), hits=Int(p.hits), misses=Int(p.misses), compile_seconds=p.compile_seconds)
end

"""
    Kiln.reset_devices!()

Destroys every device this process has created (the way out of a timeout or any other stuck
state); the next call that needs a device creates a fresh one. Arrays and kernels made before
throw `KilnError` with code `:DEVICE_LOST` from then on (they are still freed normally).
"""
reset_devices!() = check(@ccall libkiln.kiln_reset_devices()::UInt32)

"""`Kiln.empty_cache()`: returns pooled GPU buffers to the driver."""
empty_cache() = check(@ccall libkiln.kiln_empty_cache()::UInt32)


# ---- scans (kiln_cumulative_sum / kiln_cumulative_prod) --------------------------------------

function _scan(name::Symbol, x::KilnArray{T,N}, dims, include_initial::Bool) where {T,N}
    if dims === nothing
        N == 1 || throw(ArgumentError("Kiln: $name of a $N-dimensional array needs dims"))
        dims = 1
    end
    dims isa Integer || throw(ArgumentError("Kiln: $name takes one dimension"))
    1 <= dims <= N || throw(ArgumentError("dims=$dims out of range for a $N-dimensional array"))
    axis = N - dims   # Julia's dims count from the other end of kiln's axes
    scan = name === :cumsum ? _kiln_cumulative_sum : _kiln_cumulative_prod
    return scan(x, axis, nothing, include_initial)
end

"""
    cumsum(x::KilnArray; dims, include_initial=false)

Running sum along `dims` (optional for vectors), on the GPU. Integer sums wrap in the array's
own type (Base widens `Int32` to `Int`; kiln has no 64-bit integers). `include_initial=true`
(kiln's, the Array API's) starts the run with a 0, one longer along `dims`.
"""
Base.cumsum(x::KilnArray; dims=nothing, include_initial::Bool=false) = _scan(:cumsum, x, dims, include_initial)

"""`cumprod(x::KilnArray; dims, include_initial=false)`: running product along `dims`, as `cumsum`."""
Base.cumprod(x::KilnArray; dims=nothing, include_initial::Bool=false) = _scan(:cumprod, x, dims, include_initial)

"""
    diff(x::KilnArray; dims, n=1, prepend=nothing, append=nothing)

Forward difference along `dims` (optional for vectors), on the GPU. `n` (kiln's, numpy's)
repeats it; `prepend` / `append` (KilnArrays of x's element type and size but along `dims`) are
joined at either end first.
"""
function Base.diff(x::KilnArray{T,N}; dims=nothing, n::Integer=1, prepend=nothing, append=nothing) where {T,N}
    if dims === nothing
        N == 1 || throw(ArgumentError("Kiln: diff of a $N-dimensional array needs dims"))
        dims = 1
    end
    1 <= dims <= N || throw(ArgumentError("dims=$dims out of range for a $N-dimensional array"))
    n >= 0 || throw(ArgumentError("n must be >= 0, got $n"))
    return _kiln_diff(x, N - dims, n, prepend, append)
end

"""
    Kiln.tensordot(A, B, n::Integer=2)
    Kiln.tensordot(A, B, dimsA, dimsB)

Tensor contraction: the last `n` dimensions of `A` with the first `n` of `B` (or `dimsA[i]` with
`dimsB[i]`); the result has A's other dimensions then B's. One matmul on the GPU; as for `*`,
this is kiln-core's tensordot with the operands swapped (column-major views).
"""
function tensordot(A::KilnArray, B::KilnArray, n::Integer=2)
    n >= 0 || throw(ArgumentError("n must be >= 0, got $n"))
    return _new() do out
        @ccall libkiln.kiln_tensordot(B::Ptr{KilnTensor}, A::Ptr{KilnTensor}, Cptrdiff_t(n)::Cptrdiff_t, C_NULL::Ptr{Cptrdiff_t},
                                      C_NULL::Ptr{Cptrdiff_t}, Csize_t(0)::Csize_t, out::Ref{Ptr{KilnTensor}})::UInt32
    end
end
function tensordot(A::KilnArray{T,NA}, B::KilnArray{T,NB}, dimsA, dimsB) where {T,NA,NB}
    length(dimsA) == length(dimsB) || throw(ArgumentError("tensordot: $(length(dimsA)) dims of A against $(length(dimsB)) of B"))
    all(d -> 1 <= d <= NA, dimsA) && all(d -> 1 <= d <= NB, dimsB) || throw(ArgumentError("tensordot: a dimension out of range"))
    a1 = Cptrdiff_t[NB - d for d in dimsB]   # core x1 is B
    a2 = Cptrdiff_t[NA - d for d in dimsA]
    return GC.@preserve a1 a2 begin
        _new() do out
            @ccall libkiln.kiln_tensordot(B::Ptr{KilnTensor}, A::Ptr{KilnTensor}, Cptrdiff_t(-1)::Cptrdiff_t, pointer(a1)::Ptr{Cptrdiff_t},
                                          pointer(a2)::Ptr{Cptrdiff_t}, Csize_t(length(a1))::Csize_t, out::Ref{Ptr{KilnTensor}})::UInt32
        end
    end
end

end # module

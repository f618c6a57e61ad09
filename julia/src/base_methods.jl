# Base and LinearAlgebra methods a Julia user reaches for on any array (issue 34): `A'` and
# `transpose(A)` (materialised on the GPU), `map`, indexed assignment (`A[I...] = B`,
# `A[I...] .= x`, `A .= x`), `A \ b` (refused with what to use instead), and broadcast size
# errors in Julia's (column-major) order. (Included by Kiln.jl.)

# --------------------------------------------------------------------------------------------
# adjoint and transpose
# --------------------------------------------------------------------------------------------

# Kiln's element types are real, so the adjoint is the transpose. Both are materialised (a
# permute on the GPU, a reshape for vectors): the result is a plain KilnArray that every op
# takes, where Base's lazy Adjoint wrapper would fall back to scalar indexing. One difference
# from Base follows: `x' * y` of two vectors is a 1-element KilnVector, not a scalar (use
# `dot(x, y)` or `sum(x .* y)`).
Base.adjoint(A::KilnMatrix) = permutedims(A)
Base.transpose(A::KilnMatrix) = permutedims(A)
Base.adjoint(x::KilnVector) = reshape(x, (1, length(x)))
Base.transpose(x::KilnVector) = reshape(x, (1, length(x)))

"""
    dot(x::KilnArray, y::KilnArray)

`sum(x .* y)` on the GPU (real element types), read back as a scalar: same sizes, as Base.
"""
function LinearAlgebra.dot(x::KilnArray, y::KilnArray)
    size(x) == size(y) || throw(DimensionMismatch("dot: sizes $(size(x)) and $(size(y)) differ"))
    return sum(x .* y)
end

# --------------------------------------------------------------------------------------------
# Solves: not in Kiln
# --------------------------------------------------------------------------------------------

const _NO_SOLVE = "Kiln has no linear solver or factorization on the GPU (no LU, QR or Cholesky op)"

_no_solve(what, how) = throw(ArgumentError("Kiln: $what: $_NO_SOLVE. Solve on the host and upload the result: $how"))

Base.:\(A::KilnMatrix, B::KilnVecOrMat) = _no_solve("A \\ B", "KilnArray(Array(A) \\ Array(B))")
Base.:\(A::KilnMatrix, B::AbstractVecOrMat) = _no_solve("A \\ B", "KilnArray(Array(A) \\ B)")
Base.:/(B::KilnVecOrMat, A::KilnMatrix) = _no_solve("B / A", "KilnArray(Array(B) / Array(A))")
Base.inv(A::KilnMatrix) = _no_solve("inv(A)", "KilnArray(inv(Array(A))) (or inv.(A) for the elementwise 1/x)")
LinearAlgebra.det(A::KilnMatrix) = _no_solve("det(A)", "det(Array(A))")

# --------------------------------------------------------------------------------------------
# map
# --------------------------------------------------------------------------------------------

"""
    map(f, A::KilnArray, Bs::KilnArray...)

`f.(A, Bs...)` on the GPU for the functions Kiln broadcasts (same sizes, as Base's `map`;
see `Kiln.UNARY`, `Kiln.BINARY`, plus `/`, `^`, `div`, `ifelse`, `clamp`, `identity` and
element-type conversions such as `Float32`). Any other function is refused, as broadcasting
it is: there is no host fallback that would silently read the array back and loop; write
`KilnArray(map(f, Array(A)))` to choose that explicitly.
"""
function Base.map(f, A::KilnArray, Bs::KilnArray...)
    for B in Bs
        size(B) == size(A) ||
            throw(DimensionMismatch("map: sizes $(size(A)) and $(size(B)) differ (map takes arrays of one size)"))
    end
    try
        return f.(A, Bs...)
    catch e
        e isa ArgumentError && occursin("not supported on the GPU", e.msg) || rethrow()
        throw(ArgumentError("Kiln: map($f, …) is not supported on the GPU: Kiln runs only its own elementwise " *
                            "functions (see `Kiln.UNARY`, `Kiln.BINARY`). To run $f on the host, say so: " *
                            "KilnArray(map($f, Array(A)))"))
    end
end

Broadcast.broadcasted(::KilnStyle, ::typeof(identity), x::KilnArray) = copy(x)

# --------------------------------------------------------------------------------------------
# Broadcast sizes in Julia's order
# --------------------------------------------------------------------------------------------

# Kiln checks broadcast shapes in its own (row-major, reversed) order; checking them here first
# gives Julia's error with Julia's sizes.
function _check_broadcast(op, xs...)
    shapes = Tuple(size(x) for x in xs if x isa AbstractArray)
    length(shapes) < 2 && return nothing
    try
        Broadcast.broadcast_shape(shapes...)
    catch e
        e isa DimensionMismatch || rethrow()
        throw(DimensionMismatch("$op: arrays could not be broadcast to a common size: sizes " *
                                join(map(string, shapes), ", ", " and ")))
    end
    return nothing
end

# --------------------------------------------------------------------------------------------
# Indexed assignment
# --------------------------------------------------------------------------------------------

# dst[idx[i]] = src[i] for i < n (idx 0-based), on the GPU. Two-dimensional grid for more than
# 65535 workgroups, as `_device_copy!`.
function _scatter_kernel(::Type{T}) where {T}
    t = _wgsl_type(T)
    src = (T === Float16 ? "enable f16;\n" : "") * """
    struct P { n: u32, row: u32 }
    @group(0) @binding(0) var<storage, read> src: array<$t>;
    @group(0) @binding(1) var<storage, read> idx: array<u32>;
    @group(0) @binding(2) var<storage, read_write> dst: array<$t>;
    @group(0) @binding(3) var<uniform> p: P;
    @compute @workgroup_size(64)
    fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        let i = id.y * p.row + id.x;
        if (i < p.n) { dst[idx[i]] = src[i]; }
    }
    """
    return Kernel(src, "main")
end

function _scatter!(dst::KilnArray{T}, li::AbstractArray{<:Integer}, src::KilnArray{T}) where {T}
    n = length(li)
    n == 0 && return dst
    idx = KilnArray{UInt32}(UInt32.(vec(li)) .- UInt32(1))
    groups = cld(n, 64)
    gx = min(groups, 65535)
    gy = cld(groups, gx)
    k = _scatter_kernel(T)   # compiled pipelines are cached by Kiln (by source)
    try
        k(vec(src), idx, dst; workgroups=(gx, gy, 1), uniforms=(UInt32(n), UInt32(gx * 64)))
    finally
        free!(k)
        free!(idx)
    end
    return dst
end

_assignable(::Type{T}) where {T} = T <: Union{Float32,Float16,Int32,UInt32} ||
    throw(ArgumentError("Kiln: assigning into a KilnArray{$T} is not supported (Float32, Float16, Int32 and " *
                        "UInt32 are); build a new array instead (e.g. ifelse.(mask, new, old))"))

# `x` as a KilnArray{T} of exactly `dims` (a scalar is filled, a smaller array broadcast as Base's `.=`).
function _as_region(::Type{T}, x, dims) where {T}
    if x isa Number
        return full(T, x, dims...)
    end
    v = x isa KilnArray ? cast(x, T) : KilnArray{T}(collect(x))
    size(v) == dims && return v
    try
        Broadcast.broadcast_shape(dims, size(v)) == dims || error()
    catch
        throw(DimensionMismatch("array could not be broadcast to match destination: size $(size(x)) into $dims"))
    end
    return _binary("add", zeros(T, dims...), v)
end

# Indices as the host holds them: a KilnArray of positions or a mask is read back (one
# transfer; Base would index it element by element, a read each).
_host_index(i) = i
_host_index(i::KilnArray) = Array(i)
# A Bool vector indexes by its true positions (Base); without this it would pass as integers.
_mask_positions(i) = i
_mask_positions(i::AbstractVector{Bool}) = findall(i)

# The 1-based linear indices of A that `I` selects, in the shape of the selection.
_selected(A::KilnArray, I) = LinearIndices(A)[Base.to_indices(A, map(_host_index, I))...]

function _check_unique(li)
    allunique(li) || throw(ArgumentError("Kiln: an index that repeats a position is not supported in assignment " *
                                         "(the GPU writes them in no set order; Base keeps the last)"))
end

"""
    A[I...] = B
    A[I...] .= x
    A .= x

Writes into `A`'s own buffer on the GPU (views and reshapes of it see the change). `I` may be
any of Base's index forms (ranges of any step, `:`, integer vectors, Bool masks, integers mixed
with those); `B` a KilnArray or host array of the selection's size, `x` a number or anything
that broadcasts to it. A single element (`A[i, j] = v`) is refused, as scalar reads are: each
would be a transfer and a dispatch; assign a slice (`A[i:i, j:j] .= v`). Element types
Float32, Float16, Int32, UInt32.
"""
function Base.setindex!(A::KilnArray{T}, X, I...) where {T}
    _assignable(T)
    I = map(_host_index, I)
    checkbounds(A, I...)
    li = _selected(A, I)
    li isa Integer && throw(ArgumentError("Kiln: scalar assignment into a KilnArray is not supported (it would be a " *
                                          "transfer and a dispatch per element); assign a slice: A[i:i, j:j] .= v"))
    X isa Number && throw(ArgumentError("indexed assignment with a single value to many locations is not supported; " *
                                        "perhaps use broadcasting `.=` instead?"))
    Base.setindex_shape_check(X, size(li)...)
    _check_unique(li)
    v = X isa KilnArray ? cast(X, T) : KilnArray{T}(collect(X))
    _scatter!(A, li, reshape(v, size(li)))
    return A
end

# `A[I...] .= x` lowers to materialize!(dotview(A, I...), …): the view records the selection.
struct _KilnSelection{T}
    parent::KilnArray{T}
    li::Array{Int}
end

function Base.dotview(A::KilnArray{T}, I...) where {T}
    I = map(_host_index, I)
    checkbounds(A, I...)
    li = _selected(A, I)
    li isa Integer && throw(ArgumentError("Kiln: scalar assignment into a KilnArray is not supported; " *
                                          "assign a slice: A[i:i, j:j] .= v"))
    return _KilnSelection{T}(A, collect(li))
end

# The value of a broadcast expression: an eager Kiln result (most are), a number, or a host
# array. A Broadcasted still lazy here is one Kiln cannot run, and says so.
_value(x) = x
function _value(bc::Broadcast.Broadcasted)
    bc.f === identity && length(bc.args) == 1 && return _value(bc.args[1])
    return copy(bc)   # a host broadcast computes on the host; a lazy Kiln one says it cannot run
end

function _assign!(s::_KilnSelection{T}, x) where {T}
    _assignable(T)
    _check_unique(s.li)
    _scatter!(s.parent, s.li, _as_region(T, x, size(s.li)))
    return s.parent
end
# A Broadcasted (`A[I] .= 0`, `A[I] .= f.(y)` when f is lazy) or an eager Kiln result.
Broadcast.materialize!(s::_KilnSelection, bc::Broadcast.Broadcasted) = _assign!(s, _value(bc))
Broadcast.materialize!(s::_KilnSelection, x) = _assign!(s, x)

# `A .= x` arrives here with the right-hand side's style (Base's materialize! keeps it): a Kiln
# one, a host array's, a number's; each is evaluated, then written into A's buffer.
Base.copyto!(dest::KilnArray, bc::Broadcast.Broadcasted) = _assign_all!(dest, bc)
Base.copyto!(dest::KilnArray, bc::Broadcast.Broadcasted{<:Broadcast.AbstractArrayStyle{0}}) = _assign_all!(dest, bc)
Base.copyto!(dest::KilnArray, bc::Broadcast.Broadcasted{Nothing}) = _assign_all!(dest, bc)

function _assign_all!(dest::KilnArray{T}, bc::Broadcast.Broadcasted) where {T}
    x = _value(bc)
    if x isa Number
        return fill!(dest, x)
    end
    _assignable(T)
    return _device_copy!(dest, vec(_as_region(T, x, size(dest))))
end

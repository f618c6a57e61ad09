# Written by hand (Julia's idiom: Base's names and keywords such as `rev`, Base's return types,
# 1-based positions) over the generated `_kiln_<op>` wrappers. Searching, sorting and sets over
# kiln-core's ops (kiln_sort, kiln_argsort, kiln_searchsorted, kiln_count_nonzero, kiln_nonzero,
# kiln_unique_all), with Base's names and 1-based indices; topk, isin, unique_all,
# unique_counts, unique_inverse and unique_values take their rows' form (methods_gen.jl). Julia dim d of an
# N-d array is core axis N - d (the column-major rule), and core's row-major flat index over the
# reversed shape is Julia's linear index.
#
# Order: NaN after +Inf (as Base's isless), but -0.0 and 0.0 are equal (Base's isless puts
# -0.0 first); sorts are stable, and `rev=true` is the exact reverse order with equal elements
# still in their original order (so NaNs come first), as Base's stable sort with rev=true.

function _sortop(x::KilnArray{T,N}, dims, rev::Bool, perm::Bool) where {T,N}
    d = dims === nothing ? (N == 1 ? 1 : throw(ArgumentError("Kiln: sort of a $N-dimensional array needs dims="))) : dims
    d isa Integer && 1 <= d <= N || throw(ArgumentError("dims=$d out of range for a $N-dimensional array"))
    return perm ? _kiln_argsort(x, N - d, rev) : _kiln_sort(x, N - d, rev)
end

"""
    sort(x::KilnArray; dims, rev=false)

`x` sorted along `dims` (optional for vectors) on the GPU: stable, NaN last (first with
`rev=true`), -0.0 equal to 0.0.
"""
Base.sort(x::KilnArray; dims=nothing, rev::Bool=false) = _sortop(x, dims, rev, false)

"""
    sortperm(x::KilnArray; dims, rev=false)

The 1-based `KilnArray{Int32}` positions along `dims` that sort `x` (as `sort`; stable).
"""
function Base.sortperm(x::KilnArray; dims=nothing, rev::Bool=false)
    return _binary_scalar("add", _sortop(x, dims, rev, true), 1, false)
end

function _searchsorted(a::KilnArray{T,1}, x::KilnArray{T}, right::Bool) where {T}
    return _kiln_searchsorted(a, x, right)
end

function _searchsorted_scalar(a::KilnArray{T,1}, x::Real, right::Bool) where {T}
    v = KilnArray(T[x])
    r = _searchsorted(a, v, right)
    i = Int(Array(r)[1])
    free!(v)
    free!(r)
    return i
end

"""
    searchsortedfirst(a::KilnVector, x)

The 1-based index of the first element of the sorted `a` not less than `x` (`length(a) + 1`
if none), for a number `x` (an `Int`) or every element of a `KilnArray` (a `KilnArray{Int32}`).
"""
Base.searchsortedfirst(a::KilnArray{T,1}, x::KilnArray{T}) where {T} = _binary_scalar("add", _searchsorted(a, x, false), 1, false)
Base.searchsortedfirst(a::KilnArray{T,1}, x::Real) where {T} = _searchsorted_scalar(a, x, false) + 1

"""
    searchsortedlast(a::KilnVector, x)

The 1-based index of the last element of the sorted `a` not greater than `x` (0 if none).
"""
Base.searchsortedlast(a::KilnArray{T,1}, x::KilnArray{T}) where {T} = _searchsorted(a, x, true)
Base.searchsortedlast(a::KilnArray{T,1}, x::Real) where {T} = _searchsorted_scalar(a, x, true)

"""
    count(x::KilnArray; dims=:)

The number of non-zero (true) elements: an `Int` with `dims=:`, else a `KilnArray{Int32}`
with the counted dims kept as size 1 (as Base). NaN counts.
"""
function Base.count(x::KilnArray; dims=:)
    ax = _axes(x, dims)
    whole = ax === nothing
    r = _kiln_count_nonzero(x, ax, !whole)
    return whole ? Int(_scalar(r)) : r
end

"""
    Kiln.nonzero(x::KilnArray{T,N})

A tuple of N `KilnArray{Int32}` vectors: the 1-based coordinates (dim 1 first) of the non-zero
elements in column-major order. Their number is read back from the GPU.
"""
function nonzero(x::KilnArray{T,N}) where {T,N}
    N >= 1 || throw(ArgumentError("Kiln.nonzero: x must have at least one dimension"))
    hs = Base.fill(Ptr{KilnTensor}(C_NULL), N)
    GC.@preserve hs begin
        ps = [pointer(hs, i) for i in 1:N]
        GC.@preserve ps begin
            st = @ccall libkiln.kiln_nonzero(x::Ptr{KilnTensor}, ps::Ptr{Ptr{Ptr{KilnTensor}}}, N::Csize_t)::UInt32
        end
    end
    check(st)
    core = [wrap(h) for h in hs]   # core dim k is Julia dim N - k
    return Tuple(_binary_scalar("add", core[N - d + 1], 1, false) for d in 1:N)
end

"""
    findall(x::KilnArray{Bool})

The indices of the true elements, as Base (an `Int` vector for vectors, else `CartesianIndex`es),
on the host.
"""
function Base.findall(x::KilnArray{Bool,N}) where {N}
    cs = [Array(c) for c in nonzero(x)]
    N == 1 && return Int.(cs[1])
    return [CartesianIndex(ntuple(d -> Int(cs[d][i]), N)) for i in 1:length(cs[1])]
end

"""
    unique(x::KilnArray)

The distinct values of `x` in order of first occurrence, as Base, with the Array API's
equality (-0.0 == 0.0; each NaN distinct) rather than `isequal`. The values are found on the
GPU; their (small) reordering by first index is done on the host.
"""
function Base.unique(x::KilnArray{T}) where {T}
    u = unique_all(x)
    v, i = Array(u.values), Array(u.indices)
    return KilnArray(v[sortperm(i)])
end

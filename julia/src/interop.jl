# In-place writes into an existing KilnArray: copyto! (from a KilnArray or a host array) and
# LinearAlgebra.mul!. The C ABI has no "write into this tensor" call, so the bytes go through
# a tiny custom kernel (kiln_kernel_compile/dispatch) that copies one tensor into another on
# the GPU: the destination keeps its buffer, so reshaped views of it see the new contents, as
# in Base. (Included by Kiln.jl.)

_wgsl_type(::Type{Float32}) = "f32"
_wgsl_type(::Type{Float16}) = "f16"
_wgsl_type(::Type{Int32}) = "i32"
_wgsl_type(::Type{UInt32}) = "u32"

function _copy_kernel(::Type{T}) where {T}
    t = _wgsl_type(T)
    src = (T === Float16 ? "enable f16;\n" : "") * """
    struct P { n: u32, row: u32 }
    @group(0) @binding(0) var<storage, read> src: array<$t>;
    @group(0) @binding(1) var<storage, read_write> dst: array<$t>;
    @group(0) @binding(2) var<uniform> p: P;
    @compute @workgroup_size(64)
    fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        let i = id.y * p.row + id.x;
        if (i < p.n) { dst[i] = src[i]; }
    }
    """
    return Kernel(src, "main")
end

# dst[1:length(src)] = src, on the GPU (same element type).
function _device_copy!(dst::KilnArray{T}, src::KilnArray{T}) where {T}
    n = length(src)
    n == 0 && return dst
    groups = cld(n, 64)
    gx = min(groups, 65535)
    gy = cld(groups, gx)
    k = _copy_kernel(T)   # compiled pipelines are cached by Kiln (by source)
    try
        k(src, dst; workgroups=(gx, gy, 1), uniforms=(UInt32(n), UInt32(gx * 64)))
    finally
        free!(k)
    end
    return dst
end

_check_room(dest, src) = length(dest) >= length(src) ||
    throw(BoundsError(dest, LinearIndices(src)))

"""
    copyto!(dest, src)

Copies every element of `src` into `dest` (linear order, `dest` at least as long), as Base:
between KilnArrays on the GPU, from a host array into a KilnArray (one upload), or from a
KilnArray into a host array (one read-back). Elements are converted to `dest`'s type.
"""
function Base.copyto!(dest::KilnArray{T}, src::KilnArray) where {T<:KilnEltype}
    _check_room(dest, src)
    ptr(dest) == ptr(src) && return dest
    return _device_copy!(dest, cast(src, T))
end
function Base.copyto!(dest::KilnArray{T}, src::AbstractArray) where {T<:KilnEltype}
    _check_room(dest, src)
    return _device_copy!(dest, KilnArray{T,1}(vec(collect(src))))
end
function Base.copyto!(dest::Array{T}, src::KilnArray{T}) where {T<:KilnEltype}
    _check_room(dest, src)
    length(dest) == length(src) && return _read!(dest, src)
    return copyto!(dest, Array(src))
end
Base.copyto!(dest::AbstractArray, src::KilnArray) = (_check_room(dest, src); copyto!(dest, Array(src)))

"""
    mul!(C, A, B)

`C = A * B` into the existing KilnArray `C` (matrix × matrix, matrix × vector): the product
is computed by Kiln, then copied into `C`'s buffer.
"""
function LinearAlgebra.mul!(C::KilnMatrix, A::KilnMatrix, B::KilnMatrix)
    size(C) == (size(A, 1), size(B, 2)) ||
        throw(DimensionMismatch("C has size $(size(C)), A * B has size $((size(A, 1), size(B, 2)))"))
    R = A * B
    copyto!(C, R)
    free!(R)
    return C
end
function LinearAlgebra.mul!(C::KilnVector, A::KilnMatrix, B::KilnVector)
    length(C) == size(A, 1) ||
        throw(DimensionMismatch("C has length $(length(C)), A * B has length $(size(A, 1))"))
    R = A * B
    copyto!(C, R)
    free!(R)
    return C
end

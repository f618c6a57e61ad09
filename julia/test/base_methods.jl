# A', transpose, map, setindex!, A \ b and broadcast size errors (issue 34), each against Base
# on plain Arrays. Included by runtests.jl inside its top test set (uses its r32 and rng).
@testset "Base methods: adjoint, transpose, map, setindex!, \\, size errors" begin
    A = r32(3, 5)
    x = KilnArray(A)
    # adjoint / transpose, materialised: plain KilnArrays every op takes
    @test x' isa KilnArray{Float32,2} && Array(x') == A'
    @test transpose(x) isa KilnArray{Float32,2} && Array(transpose(x)) == transpose(A)
    I32 = Int32[1 -2 3; 4 5 -6]
    @test Array(KilnArray(I32)') == I32'
    v = r32(5)
    @test Array(KilnArray(v)') == collect(v')          # 1×5
    @test size(transpose(KilnArray(v))) == size(transpose(v))
    B = r32(3, 4)
    @test approx(Array(x' * KilnArray(B)), A' * B; atol=1f-4)
    @test approx(Array(KilnArray(B)' * x), B' * A; atol=1f-4)
    @test approx(dot(KilnArray(v), KilnArray(v)), dot(v, v); atol=1f-4)
    @test_throws DimensionMismatch dot(KilnArray(v), KilnArray(r32(4)))
    # A \ b: no solver in Kiln, and the error says what to write instead
    S = r32(3, 3) + 3f0 * Matrix{Float32}(I, 3, 3)
    b = r32(3)
    for f in (() -> KilnArray(S) \ KilnArray(b), () -> KilnArray(S) \ b, () -> KilnArray(b') / KilnArray(S),
              () -> inv(KilnArray(S)), () -> det(KilnArray(S)))
        err = try f(); nothing catch e; e end
        @test err isa ArgumentError && occursin("no linear solver", err.msg) && occursin("Array(", err.msg)
    end
    # the host route the message names gives Base's answer
    @test approx(Array(KilnArray(Array(KilnArray(S)) \ Array(KilnArray(b)))), S \ b; atol=1f-5)
    # map: Kiln's elementwise functions, same sizes as Base's map
    @test approx(Array(map(exp, x)), map(exp, A))
    @test approx(Array(map(abs, x)), map(abs, A))
    @test approx(Array(map(+, x, KilnArray(2 .* A))), map(+, A, 2 .* A))
    @test approx(Array(map(max, x, KilnArray(-A))), map(max, A, -A))
    @test Array(map(Int32, KilnArray(Float32[1, -2, 3]))) == map(Int32, Float32[1, -2, 3])
    @test Array(map(identity, x)) == map(identity, A)
    @test_throws DimensionMismatch map(+, x, KilnArray(r32(5, 3)))
    err = try map(t -> 2t + 1, x); nothing catch e; e end
    @test err isa ArgumentError && occursin("not supported on the GPU", err.msg) && occursin("map(", err.msg)
    @test Array(KilnArray(map(t -> 2t + 1, Array(x)))) == map(t -> 2t + 1, A)   # the route it names
    # setindex!: every index form Base takes, checked against the same assignment on an Array
    function same_assign(idx, val)
        H = copy(A); H[idx...] = val
        k = KilnArray(A)
        k[idx...] = val isa AbstractArray ? KilnArray(val) : val
        return Array(k) == H
    end
    @test same_assign((2:3, 2:4), r32(2, 3))
    @test same_assign((:, 5), r32(3))
    @test same_assign((1, :), r32(5))                   # an integer drops the dimension, as Base
    @test same_assign((3:-1:1, 1:2:5), r32(3, 3))       # negative and non-unit steps
    @test same_assign(([3, 1], [5, 2, 4]), r32(2, 3))   # integer vectors
    @test same_assign((A .> 0,), r32(count(A .> 0)))    # a Bool mask
    @test same_assign((4:9,), r32(6))                   # linear indices
    @test same_assign((2:1, :), r32(0, 5))              # empty selection: nothing changes
    H = copy(A); H[1:2, 1:2] = [1 2; 3 4]
    k = KilnArray(A); k[1:2, 1:2] = [1 2; 3 4]           # a host array, converted to Float32
    @test Array(k) == H
    ki = KilnArray(Int32.(reshape(1:12, 3, 4)))
    Hi = Int32.(reshape(1:12, 3, 4))
    ki[2, 2:3] = Float32[-7, 8]; Hi[2, 2:3] = Float32[-7, 8]
    @test Array(ki) == Hi
    # the buffer is written in place: a reshape sharing it sees the change, as Base
    k = KilnArray(A); kv = vec(k)
    k[1:3, 1] = Float32[9, 9, 9]
    @test Array(kv)[1:3] == Float32[9, 9, 9]
    # .= into a selection and into the whole array, with scalars and broadcasts
    H = copy(A); H[2:3, :] .= 0
    k = KilnArray(A); k[2:3, :] .= 0
    @test Array(k) == H
    H = copy(A); H[:, 2] .= A[:, 3] .* 2
    k = KilnArray(A); k[:, 2] .= KilnArray(A)[:, 3] .* 2
    @test Array(k) == H
    H = copy(A); H[1:2, :] .= reshape(Float32[1, 2], 2, 1)     # broadcast along the second dimension
    k = KilnArray(A); k[1:2, :] .= reshape(Float32[1, 2], 2, 1)
    @test Array(k) == H
    H = copy(A); H .= 5
    k = KilnArray(A); k .= 5
    @test Array(k) == H
    H = copy(A); H .= 2 .* A .+ 1
    k = KilnArray(A); k .= 2 .* KilnArray(A) .+ 1
    @test approx(Array(k), H)
    H = copy(A); H .= r32(3, 1)
    Hs = H[:, 1:1]
    k = KilnArray(A); k .= Hs
    @test Array(k) == (H .= Hs)
    # refused, with Base's exception types where Base refuses too
    k = KilnArray(A)
    @test_throws BoundsError (A[4, 1] = 1f0)
    @test_throws BoundsError (k[4:4, 1:1] = Float32[1])
    @test_throws DimensionMismatch (A[1:2, 1:2] = r32(3, 3))
    @test_throws DimensionMismatch (k[1:2, 1:2] = KilnArray(r32(3, 3)))
    @test_throws ArgumentError (A[1:2, 1] = 1f0)                        # Base: use .=
    @test_throws ArgumentError (k[1:2, 1] = 1f0)
    err = try k[1, 1] = 1f0; nothing catch e; e end                   # one element: refused, as scalar reads
    @test err isa ArgumentError && occursin("scalar assignment", err.msg)
    err = try k[[1, 1], 1] = Float32[1, 2]; nothing catch e; e end    # a repeated position
    @test err isa ArgumentError && occursin("repeats", err.msg)
    @test_throws ArgumentError (KilnArray(A .> 0)[1:2, 1] = [true, false])   # Bool arrays
    @test Array(k) == A                                                # nothing changed by refusals
    # Bool masks and GPU-held index vectors in getindex and setindex!, as Base (a mask used to
    # pass as integers: false became position 0, which read the last element)
    m = [true, false, true, false, true]
    @test Array(x[:, m]) == A[:, m]
    @test Array(KilnArray(v)[m]) == v[m]
    @test Array(x[[true, false, true], 2:3]) == A[[true, false, true], 2:3]
    @test_throws BoundsError x[:, [true, false]]                     # a mask of the wrong length
    @test_throws BoundsError A[:, [true, false]]
    @test Array(x[KilnArray(Int32[3, 1]), :]) == A[[3, 1], :]
    H = copy(A); H[KilnArray(Int32[2, 3]) |> Array, 1] = Float32[7, 8]
    k = KilnArray(A); k[KilnArray(Int32[2, 3]), 1] = Float32[7, 8]
    @test Array(k) == H
    H = copy(A); H[:, m] .= 0
    k = KilnArray(A); k[:, KilnArray(m)] .= 0
    @test Array(k) == H
    # broadcast size errors give Julia's (column-major) sizes
    P, Q = KilnArray(r32(2, 3)), KilnArray(r32(3, 2))
    for f in (() -> P .+ Q, () -> P .* Q, () -> max.(P, Q), () -> ifelse.(P .> 0, P, Q), () -> clamp.(P, Q, Q))
        err = try f(); nothing catch e; e end
        @test err isa DimensionMismatch && occursin("(2, 3)", err.msg) && occursin("(3, 2)", err.msg)
    end
    @test_throws DimensionMismatch r32(2, 3) .+ r32(3, 2)             # Base refuses the same pair
    @test size(P .+ KilnArray(r32(2))) == size(r32(2, 3) .+ r32(2))   # and broadcasts the same ones
    @test size(P .+ KilnArray(r32(1, 3))) == size(r32(2, 3) .+ r32(1, 3))
end

# Kiln.jl tests: every result is compared with Julia's own Base (or a few lines of plain
# Julia) on the same inputs. Run with `make julia-test` (scripts/julia finds or installs a
# Julia; target/release/libkiln.so, or ENV["KILN_LIB"]).
using Test
using Random
using Statistics
using LinearAlgebra
using Kiln

const rng = MersenneTwister(20240611)
r32(dims...) = rand(rng, Float32, dims...) .* 2f0 .- 1f0
approx(a, b; atol=1f-5, rtol=1f-5) = isapprox(a, b; atol=atol, rtol=rtol)

const top = @testset "Kiln.jl" begin
    @testset "round trip, size, eltype, show" begin
        for A in (r32(3, 5), r32(7), r32(2, 3, 4), Int32[1 -2; 3 4], UInt32[5, 6, 7], zeros(Float32, 0, 3))
            x = KilnArray(A)
            @test size(x) == size(A)
            @test eltype(x) == eltype(A)
            @test ndims(x) == ndims(A)
            @test Array(x) == A
            @test Array(x) isa Array{eltype(A),ndims(A)}
        end
        x = KilnArray(r32(2, 3))
        s = sprint(show, MIME("text/plain"), x)
        @test occursin("2×3 KilnArray{Float32, 2}", s)
        @test KilnArray(Float64[1.5, 2.5]) |> eltype == Float32   # Float64 stored as Float32
        @test Array(KilnArray(1:5)) == Int32.(1:5)
    end

    @testset "column-major layout, no transpose" begin
        A = Float32[1 2 3; 4 5 6]          # 2×3; memory 1 4 2 5 3 6
        x = KilnArray(A)
        @test Array(reshape(x, 3, 2)) == reshape(A, 3, 2)
        @test Array(vec(x)) == vec(A)
        @test reshape(x, :, 2) isa KilnArray{Float32,2}          # on the GPU, not a host ReshapedArray
        @test Array(reshape(x, :, 2)) == reshape(A, :, 2)
        @test Array(reshape(x, (1, :))) == reshape(A, (1, :))
        @test_throws DimensionMismatch reshape(x, 4, :)
        @test_throws DimensionMismatch reshape(x, :, :)
        @test Array(x[2, :]) == A[2, :]
        @test Array(x[:, 2:3]) == A[:, 2:3]
        @test Array(x[1:2, 1:2:3]) == A[1:2, 1:2:3]
        @test Array(x[[2, 1], :]) == A[[2, 1], :]
        @test_throws ArgumentError x[1, 1]
        @test_throws BoundsError x[3, :]
    end

    @testset "broadcasting: unary" begin
        A = r32(4, 5) .* 3f0
        P = abs.(A) .+ 0.1f0
        x, p = KilnArray(A), KilnArray(P)
        @test approx(Array(.-x), .-A)
        @test approx(Array(-x), -A)
        @test approx(Array(abs.(x)), abs.(A))
        @test approx(Array(exp.(x)), exp.(A))
        @test approx(Array(log.(p)), log.(P))
        @test approx(Array(sqrt.(p)), sqrt.(P))
        @test approx(Array(Kiln.rsqrt.(p)), 1 ./ sqrt.(P))
        @test approx(Array(sin.(x)), sin.(A))
        @test approx(Array(cos.(x)), cos.(A))
        @test approx(Array(tanh.(x)), tanh.(A))
        @test approx(Array(Kiln.sigmoid.(x)), 1 ./ (1 .+ exp.(-A)))
        @test Array(Kiln.relu.(x)) == max.(A, 0f0)
        @test approx(Array(Kiln.silu.(x)), A ./ (1 .+ exp.(-A)))
        @test approx(Array(Kiln.gelu_tanh.(x)), Kiln.gelu_tanh.(A); atol=1f-4)
        @test approx(Array(Kiln.gelu.(x)), Kiln.gelu.(A); atol=1f-3)  # host side uses an erf approximation
        @test approx(Array(exp.(x .+ 1f0)), exp.(A .+ 1f0))           # fused expression
        # floor: exact, with Base's special values (±0, ±Inf, NaN, subnormals)
        F = Float32[-0.5, 0.5, 2.5, -2.5, -0f0, 0f0, Inf32, -Inf32, NaN32, -1f-40, 1f-40, 8.388607f6, -7.5f0, 3f0]
        got = Array(floor.(KilnArray(F)))
        @test isequal(got, floor.(F)) && all(signbit.(got) .== signbit.(floor.(F)))
        @test approx(Array(floor.(x)), floor.(A))
        # every unary op of the generated table broadcasts on the GPU
        for (f, name) in Kiln.UNARY
            @test Base.Broadcast.broadcasted(Kiln.KilnStyle(), getfield(Kiln, f), p) isa KilnArray
        end
    end

    @testset "broadcasting: the Array API's float functions, Base's names and special values" begin
        S = Float32[-0f0, 0f0, Inf32, -Inf32, NaN32, 0.5f0, -0.5f0, 2.5f0, -2.5f0, 1f-10, -1f-10, 1f0, -1f0, 3f38, 1f-40]
        k = KilnArray(S)
        same(a, b) = all(isequal.(a, b) .| (abs.(a .- b) .<= 1f-6 .* abs.(b)))
        # where Base and numpy agree (Base's sign keeps -0 where numpy's gives +0)
        for f in (atan, sinh, cosh, asinh, expm1, ceil, trunc, round, abs2, inv)
            @test same(Array(f.(k)), f.(S))
        end
        U = Float32[-0f0, 0f0, 0.5f0, -0.5f0, 1f0, -1f0, 1f-10, -0.999f0]
        for f in (asin, acos, atanh, log1p)
            @test same(Array(f.(KilnArray(U))), f.(U))
        end
        @test same(Array(acosh.(KilnArray(Float32[1, 1.5, 1f30, Inf32]))), acosh.(Float32[1, 1.5, 1f30, Inf32]))
        L = Float32[1f-40, 1f-3, 0.999f0, 1, 8, 1000, 3f38, Inf32]
        @test same(Array(log2.(KilnArray(L))), log2.(L)) && same(Array(log10.(KilnArray(L))), log10.(L))
        @test Array(log1p.(KilnArray(Float32[1f-10])))[1] == 1f-10     # log(1 + x) would give 0
        @test Array(round.(KilnArray(Float32[0.5, 1.5, 2.5, -2.5])))  == Float32[0, 2, 2, -2]  # ties to even
        A = Float32[-7.5 7.5 -1 1e30; 0.5 -0 3 -3]
        B = Float32[2 -2 Inf32 7; -0.25 5 -Inf32 2]
        for f in (atan, hypot, copysign, mod, Kiln.logaddexp, Kiln.nextafter)
            @test same(Array(f.(KilnArray(A), KilnArray(B))), f.(A, B))
        end
        Bf = Float32[2 -2 4 7; -0.25 5 -2 2]
        @test same(Array(fld.(KilnArray(A), KilnArray(Bf))), fld.(A, Bf))
        @test Array(mod.(KilnArray(Int32[7, -7, 7, -7, 5]), KilnArray(Int32[2, 2, -2, -2, 0]))) == Int32[1, 1, -1, -1, 0]
        @test Array(sign.(KilnArray(Int32[-3, 0, 5]))) == Int32[-1, 0, 1]
        @test Array(Kiln.nextafter.(KilnArray(Float32[1, 0]), 2f0)) == Float32[nextfloat(1f0), nextfloat(0f0)]
        # clamp.: kiln-core's clip (Base's clamp where no bound is NaN)
        C = Float32[-3 -0.5; 0.25 9]
        @test Array(clamp.(KilnArray(C), -1f0, 1f0)) == clamp.(C, -1f0, 1f0)
        @test Array(clamp.(KilnArray(C), KilnArray(Float32[-1, 0]), 0.5f0)) == clamp.(C, Float32[-1, 0], 0.5f0)
        @test Array(clamp.(KilnArray(Int32[-7, 0, 9]), -3, 4)) == Int32[-3, 0, 4]
        @test isnan(Array(clamp.(KilnArray(Float32[0.5]), KilnArray(Float32[NaN]), 1f0))[1])
    end

    @testset "sort, sortperm, searchsorted, count, findall, unique, isin" begin
        v = Float32[3, NaN, -0.0, 1, 0.0, 3, -Inf, 2]
        # Stable, NaN last; -0.0 == 0.0 keeps their order (Base's isless would put -0.0 first).
        @test isequal(Array(sort(KilnArray(v))), Float32[-Inf, -0.0, 0.0, 1, 2, 3, 3, NaN])  # -0.0 first, bit for bit
        @test Array(sortperm(KilnArray(v))) == Int32[7, 3, 5, 4, 8, 1, 6, 2]
        @test Array(sortperm(KilnArray(v); rev=true)) == Int32[2, 1, 6, 8, 4, 3, 5, 7]
        M = Int32[5 1 5; 2 2 0]
        @test Array(sort(KilnArray(M); dims=1)) == sort(M; dims=1)
        @test Array(sort(KilnArray(M); dims=2, rev=true)) == sort(M; dims=2, rev=true)
        @test_throws ArgumentError sort(KilnArray(M))
        a = KilnArray(Float32[1, 2, 2, 4])
        @test searchsortedfirst(a, 2f0) == searchsortedfirst(Float32[1, 2, 2, 4], 2f0)
        @test searchsortedlast(a, 2f0) == searchsortedlast(Float32[1, 2, 2, 4], 2f0)
        @test Array(searchsortedfirst(a, KilnArray(Float32[0, 2, 5]))) == Int32[1, 2, 5]
        B = Bool[1 0 1; 0 1 1]
        @test count(KilnArray(B)) == count(B)
        @test Array(count(KilnArray(B); dims=1)) == count(B; dims=1)
        @test findall(KilnArray(B)) == findall(B)
        @test Array(unique(KilnArray(Int32[3, 1, 3, 2, 1]))) == unique(Int32[3, 1, 3, 2, 1])
        u = Kiln.unique_all(KilnArray(Int32[3 1; 3 2]))
        @test Array(u.values) == Int32[1, 2, 3] && Array(u.counts) == Int32[1, 1, 2]
        @test Array(u.indices) == Int32[3, 4, 1] && Array(u.inverse_indices) == Int32[3 1; 3 2]  # 1-based positions in values
        @test Array(Kiln.isin(KilnArray(Float32[1, NaN, 2]), KilnArray(Float32[2, NaN]))) == Bool[0, 0, 1]
        # topk: Julia's dims and 1-based positions; NaN the largest, ties in position order.
        t = Kiln.topk(KilnArray(v), 3)
        @test isequal(Array(t.values), Float32[NaN, 3, 3]) && Array(t.indices) == Int32[2, 1, 6]
        @test Array(Kiln.topk(KilnArray(v), 2; largest=false).indices) == Int32[7, 3]
        t = Kiln.topk(KilnArray(M), 1; dims=2)
        @test Array(t.values) == reshape(Int32[5, 2], 2, 1) && Array(t.indices) == reshape(Int32[1, 1], 2, 1)
        @test Array(Kiln.topk(KilnArray(M), 2; dims=1).values) == sort(M; dims=1, rev=true)
        @test_throws KilnError Kiln.topk(KilnArray(v), 9)
    end

    @testset "broadcasting: binary, scalars, comparisons" begin
        A, B, c, r = r32(3, 4), r32(3, 4), r32(3), r32(1, 4)
        B[abs.(B) .< 0.1f0] .= 0.5f0
        x, y, cx, rx = KilnArray(A), KilnArray(B), KilnArray(c), KilnArray(r)
        @test approx(Array(x .+ y), A .+ B)
        @test approx(Array(x .- y), A .- B)
        @test approx(Array(x .* y), A .* B)
        @test approx(Array(x ./ y), A ./ B)
        @test Array(max.(x, y)) == max.(A, B)
        @test Array(min.(x, y)) == min.(A, B)
        @test approx(Array(x .+ cx), A .+ c)       # (3,4) .+ (3,)
        @test approx(Array(x .* rx), A .* r)       # (3,4) .* (1,4)
        @test approx(Array(cx .+ rx), c .+ r)      # (3,) .+ (1,4) -> (3,4)
        @test approx(Array(x .* 2.5f0), A .* 2.5f0)
        @test approx(Array(1f0 .- x), 1f0 .- A)
        @test approx(Array(2 .* x), 2 .* A)
        @test approx(Array(x / 4), A / 4)
        @test approx(Array(x + y), A + B)
        @test_throws DimensionMismatch x + cx
        @test approx(Array(abs.(x) .^ 2), abs.(A) .^ 2)
        @test approx(Array(abs.(x) .^ 0.5f0), abs.(A) .^ 0.5f0)
        # integer powers of integer arrays stay integers (wrapping, as Base's ^)
        ip = KilnArray(Int32[2, 3, -2]) .^ KilnArray(Int32[3, 2, 3])
        @test ip isa KilnArray{Int32} && Array(ip) == Int32[8, 9, -8]
        @test Array(KilnArray(Int32[2, -3]) .^ 3) == Int32[8, -27]
        @test Array(KilnArray(UInt32[3]) .^ UInt32(40)) == UInt32[3]  .^ UInt32(40)
        @test Array(x .< y) == (A .< B)
        @test Array(x .>= 0) == (A .>= 0)
        @test Array(x .== x) == trues(3, 4)
        @test eltype(x .< y) == Bool
        # Bool arrays in and out, Base's logical broadcasts, all / any, the predicates
        for dims in ((0,), (1,), (7,), (13, 17), (1031,))
            Bm = Base.rand(Bool, dims...)
            Cm = Base.rand(Bool, dims...)
            kb, kc = KilnArray(Bm), KilnArray(Cm)
            @test kb isa KilnArray{Bool} && Array(kb) == Bm
            @test Array(kb .& kc) == (Bm .& Cm)
            @test Array(kb .| kc) == (Bm .| Cm)
            @test Array(xor.(kb, kc)) == xor.(Bm, Cm)
            @test Array(.!kb) == .!Bm
            @test Array(kb .& true) == (Bm .& true)
            @test all(kb) == all(Bm) && any(kb) == any(Bm)
            @test Array(Float32.(kb)) == Float32.(Bm)
        end
        Bm = Base.rand(Bool, 5, 6)
        @test Array(all(KilnArray(Bm); dims=2)) == all(Bm; dims=2)
        @test Array(any(KilnArray(Bm); dims=1)) == any(Bm; dims=1)
        @test_throws TypeError all(x)
        # host bytes other than 0 / 1 read back as true
        raw = UInt8[0, 1, 2, 255]
        @test Array(KilnArray(reinterpret(Bool, raw))) == [false, true, true, true]
        V = Float32[NaN, -0.0, Inf, -Inf, 1.0, 0.0, -NaN]
        kv = KilnArray(V)
        @test Array(isnan.(kv)) == isnan.(V)
        @test Array(isinf.(kv)) == isinf.(V)
        @test Array(isfinite.(kv)) == isfinite.(V)
        @test Array(signbit.(kv)) == signbit.(V)
        @test Array(Bool.(KilnArray(Float32[0, 2, -0.0]))) == [false, true, false]
        @test Array(ifelse.(isnan.(kv), 0f0, kv)) == ifelse.(isnan.(V), 0f0, V)
        @test_throws KilnError KilnArray(Bm) .+ KilnArray(Bm)
        @test Array(ifelse.(x .> 0, x, y)) == ifelse.(A .> 0, A, B)
        I = Int32[7 -7; 9 100]
        J = Int32[2 2; -4 7]
        @test Array(KilnArray(I) .+ KilnArray(J)) == I .+ J
        @test Array(div.(KilnArray(I), KilnArray(J))) == div.(I, J)
        @test Array(fld.(KilnArray(I), KilnArray(J))) == fld.(I, J)
        for s in (Int32(3), Int32(-3), Int32(1), Int32(-1))
            @test Array(div.(KilnArray(I), s)) == div.(I, s)
            @test Array(fld.(KilnArray(I), s)) == fld.(I, s)
        end
        P = Int32[2 -3; 5 -1]
        @test Array(KilnArray(P) .^ Int32(3)) == P .^ Int32(3)
        @test Array(KilnArray(P) .^ KilnArray(Int32[0 1; 2 5])) == P .^ Int32[0 1; 2 5]
        @test Array(KilnArray(P) .^ 2) == P .^ 2
        @test eltype(KilnArray(P) .^ Int32(2)) == Int32
        U = UInt32[7 9; 100 5]
        @test Array(div.(KilnArray(U), UInt32(4))) == div.(U, UInt32(4))
        # Kiln's rule for a zero divisor (Julia throws): 0, in div and fld alike.
        @test Array(div.(KilnArray(I), KilnArray(Int32[0 2; 0 7]))) == Int32[0 -3; 0 14]
        @test Array(fld.(KilnArray(I), KilnArray(Int32[0 2; 0 7]))) == Int32[0 -4; 0 14]
        @test Array(fld.(KilnArray(I), Int32(0))) == zeros(Int32, 2, 2)
        @test approx(Array(KilnArray(I) ./ KilnArray(J)), Float32.(I ./ J))   # / gives floats
        @test Array(Float32.(KilnArray(I))) == Float32.(I)
        @test Array(KilnArray(I) .+ x[1:2, 1:2]) ≈ I .+ A[1:2, 1:2]          # promotion to Float32
        @test_throws ArgumentError Array(x .+ [1f0 2f0 3f0 4f0])               # host arrays are not mixed in
    end

    @testset "matrix product" begin
        A, B, v = r32(5, 7), r32(7, 3), r32(7)
        @test approx(Array(KilnArray(A) * KilnArray(B)), A * B; atol=1f-4)
        @test approx(Array(KilnArray(A) * KilnArray(v)), A * v; atol=1f-4)
        @test_throws DimensionMismatch KilnArray(A) * KilnArray(A)
        Ab, Bb = r32(4, 6, 2), r32(6, 3, 2)
        C = Kiln.matmul(KilnArray(Ab), KilnArray(Bb))
        @test size(C) == (4, 3, 2)
        @test approx(Array(C)[:, :, 2], Ab[:, :, 2] * Bb[:, :, 2]; atol=1f-4)
    end

    @testset "reductions" begin
        A = r32(4, 7, 3)
        x = KilnArray(A)
        for d in (1, 2, 3, (1, 3))
            @test approx(Array(sum(x; dims=d)), sum(A; dims=d); atol=1f-4)
            @test Array(maximum(x; dims=d)) == maximum(A; dims=d)
            @test Array(minimum(x; dims=d)) == minimum(A; dims=d)
            @test approx(Array(mean(x; dims=d)), mean(A; dims=d))
            @test approx(Array(var(x; dims=d)), var(A; dims=d); atol=1f-4)
        end
        @test approx(sum(x), sum(A); atol=1f-3)
        @test maximum(x) == maximum(A)
        @test minimum(x) == minimum(A)
        @test approx(mean(x), mean(A))
        @test approx(var(x; corrected=false), var(A; corrected=false); atol=1f-4)
        @test approx(std(x), std(A); atol=1f-4)
        @test size(sum(x; dims=4)) == size(A)
        @test argmax(x) == argmax(A)
        @test argmin(x) == argmin(A)
        v = r32(9)
        @test argmax(KilnArray(v)) == argmax(v)
        @test Array(argmax(x; dims=2)) == Int32.(getindex.(argmax(A; dims=2), 2))
        @test sum(KilnArray(Int32[1, 2, 3])) === 6
    end

    @testset "normalization" begin
        A = r32(9, 5)
        x = KilnArray(A)
        sm(A; dims) = (e = exp.(A .- maximum(A; dims=dims)); e ./ sum(e; dims=dims))
        @test approx(Array(Kiln.softmax(x)), sm(A; dims=1))
        @test approx(Array(Kiln.softmax(x; dims=2)), sm(A; dims=2))
        @test approx(Array(Kiln.logsoftmax(x)), log.(sm(A; dims=1)); atol=1f-4)
        g, b = r32(9), r32(9)
        mu = mean(A; dims=1)
        s2 = var(A; dims=1, corrected=false)
        @test approx(Array(Kiln.layer_norm(x; weight=KilnArray(g), bias=KilnArray(b))),
                     (A .- mu) ./ sqrt.(s2 .+ 1f-5) .* g .+ b; atol=1f-4)
        @test approx(Array(Kiln.rms_norm(x; weight=KilnArray(g))),
                     A ./ sqrt.(mean(A .^ 2; dims=1) .+ 1f-6) .* g; atol=1f-4)
        X = r32(4, 3, 2)                      # (L, C, N)
        m, vr, w, bb = r32(3), abs.(r32(3)) .+ 0.5f0, r32(3), r32(3)
        want = (X .- reshape(m, 1, 3)) ./ sqrt.(reshape(vr, 1, 3) .+ 1f-5) .* reshape(w, 1, 3) .+ reshape(bb, 1, 3)
        got = Kiln.batch_norm(KilnArray(X), KilnArray(m), KilnArray(vr); weight=KilnArray(w), bias=KilnArray(bb))
        @test approx(Array(got), want; atol=1f-4)
    end

    @testset "convolution and pooling (WHCN)" begin
        W, H, C, N, O, K = 5, 6, 4, 2, 6, 3
        X = r32(W, H, C, N)
        Wt = r32(K, K, C ÷ 2, O)
        bias = r32(O)
        # plain Julia cross-correlation, groups = 2, stride (w=2, h=1), pad (w=0, h=1)
        OW, OH = (W - K) ÷ 2 + 1, (H + 2 - K) + 1
        want = zeros(Float32, OW, OH, O, N)
        for n in 1:N, o in 1:O, oh in 1:OH, ow in 1:OW
            g = (o - 1) ÷ (O ÷ 2)
            acc = Float64(bias[o])
            for ci in 1:C÷2, kh in 1:K, kw in 1:K
                ih, iw = oh - 1 - 1 + kh, (ow - 1) * 2 + kw
                (1 <= ih <= H && 1 <= iw <= W) || continue
                acc += X[iw, ih, g * (C ÷ 2) + ci, n] * Wt[kw, kh, ci, o]
            end
            want[ow, oh, o, n] = acc
        end
        got = Kiln.conv2d(KilnArray(X), KilnArray(Wt); bias=KilnArray(bias), stride=(2, 1), pad=(0, 1), groups=2)
        @test size(got) == size(want)
        @test approx(Array(got), want; atol=1f-4)
        mp = Kiln.maxpool(KilnArray(X), (2, 2))
        @test Array(mp) == [maximum(X[2i-1:2i, 2j-1:2j, c, n]) for i in 1:2, j in 1:3, c in 1:C, n in 1:N]
        ap = Kiln.meanpool(KilnArray(X), (2, 2))
        @test approx(Array(ap), [mean(X[2i-1:2i, 2j-1:2j, c, n]) for i in 1:2, j in 1:3, c in 1:C, n in 1:N])
    end

    @testset "movement" begin
        A = r32(2, 3, 4)
        x = KilnArray(A)
        @test Array(permutedims(x, (3, 1, 2))) == permutedims(A, (3, 1, 2))
        @test Array(permutedims(x, (2, 3, 1))) == permutedims(A, (2, 3, 1))
        M = r32(3, 5)
        @test Array(permutedims(KilnArray(M))) == permutedims(M)
        @test Array(Kiln.swapdims(x, 1, 3)) == permutedims(A, (3, 2, 1))
        B = r32(2, 3, 2)
        @test Array(cat(x, KilnArray(B); dims=3)) == cat(A, B; dims=3)
        @test Array(vcat(KilnArray(M), KilnArray(M))) == vcat(M, M)
        @test Array(hcat(KilnArray(M), KilnArray(M))) == hcat(M, M)
        v, w = r32(4), r32(4)
        @test Array(hcat(KilnArray(v), KilnArray(w))) == hcat(v, w)
        @test Array(vcat(KilnArray(v), KilnArray(w))) == vcat(v, w)
        idx = Int32[3 1; 2 5; 1 3]            # 1-based positions along dims=2 of the 3×5 matrix M
        @test Array(Kiln.gather(KilnArray(M), idx; dims=2)) == [M[i, idx[i, j]] for i in 1:3, j in 1:2]
        # Julia has no negative indices: 0, -1 and 6 are outside 1:5 and read 0 (core's gather would
        # count an i32 -1 from the end), from host ids and from Int32/UInt32 KilnArrays alike.
        edge = Int32[0 -1; 6 1; 5 -5]
        want = [1 <= edge[i, j] <= 5 ? M[i, edge[i, j]] : 0.0f0 for i in 1:3, j in 1:2]
        @test Array(Kiln.gather(KilnArray(M), edge; dims=2)) == want
        @test Array(Kiln.gather(KilnArray(M), KilnArray(edge); dims=2)) == want
        @test Array(Kiln.embedding(KilnArray(r32(2, 3)), Int32[0, -1, 4])) == zeros(Float32, 2, 3)
        E = r32(4, 6)                         # (D, V)
        ids = [6 1 2; 3 3 5]
        emb = Kiln.embedding(KilnArray(E), ids)
        @test size(emb) == (4, 2, 3)
        got = Array(emb)
        @test all(got[:, i, j] == E[:, ids[i, j]] for i in 1:2, j in 1:3)
    end

    @testset "quantized weights" begin
        k, n = 32, 3
        W = r32(k, n)                          # ggml's (k, n): n rows of k values
        for fmt in (:q4_0, :q4_1, :q8_0)
            q = Kiln.quantize(KilnArray(W), fmt)
            @test eltype(q) == UInt32
            deq = Array(Kiln.dequantize(q, fmt, k, n))
            @test size(deq) == (k, n)
            nbytes = n * Dict(:q4_0 => 18, :q4_1 => 20, :q8_0 => 34)[fmt]
            raw = collect(reinterpret(UInt8, Array(q)))[1:nbytes]
            @test Array(Kiln.quant_from_bytes(raw, fmt, k, n)) == Array(q)
            x = r32(k, 2)
            @test Array(Kiln.quant_matmul(KilnArray(x), q, fmt, n)) ≈ transpose(deq) * x rtol=1e-4
            @test Array(Kiln.quant_embedding(q, fmt, k, [3, 0])) == hcat(deq[:, 3], zeros(Float32, k))
        end
        @test_throws KilnError Kiln.quantize(KilnArray(W), :q8_k)
    end

    @testset "nn: rope and attention" begin
        D, L, Bt = 6, 5, 2
        X = r32(D, L, Bt)
        want = similar(X)
        for b in 1:Bt, l in 1:L, i in 1:D÷2
            th = (3 + l - 1) * 10000.0^(-2 * (i - 1) / D)
            x0, x1 = X[i, l, b], X[i+D÷2, l, b]
            want[i, l, b] = x0 * cos(th) - x1 * sin(th)
            want[i+D÷2, l, b] = x1 * cos(th) + x0 * sin(th)
        end
        @test approx(Array(Kiln.rope(KilnArray(X); pos_offset=3)), want; atol=1f-4)
        Dk, Lq, Lk, Dv = 4, 3, 5, 2
        Q, Kt, V = r32(Dk, Lq, Bt), r32(Dk, Lk, Bt), r32(Dv, Lk, Bt)
        for causal in (false, true)
            lq = causal ? Lk : Lq
            Qc = causal ? r32(Dk, Lk, Bt) : Q
            scale = causal ? 0.7f0 : 1 / sqrt(Float32(Dk))
            want = zeros(Float32, Dv, lq, Bt)
            for b in 1:Bt
                S = (Kt[:, :, b]' * Qc[:, :, b]) .* scale          # (Lk, lq)
                if causal
                    for i in 1:lq, j in 1:Lk
                        j > i && (S[j, i] = -Inf32)
                    end
                end
                P = exp.(S .- maximum(S; dims=1))
                P ./= sum(P; dims=1)
                want[:, :, b] = V[:, :, b] * P
            end
            got = Kiln.attention(KilnArray(Qc), KilnArray(Kt), KilnArray(V); causal=causal,
                                 scale=causal ? 0.7f0 : nothing)
            @test approx(Array(got), want; atol=1f-4)
        end
    end

    @testset "creation and random" begin
        @test Array(Kiln.zeros(Float32, 2, 3)) == zeros(Float32, 2, 3)
        @test Array(Kiln.ones(Int32, 4)) == ones(Int32, 4)
        @test Array(Kiln.fill(7f0, 2, 2)) == fill(7f0, 2, 2)
        x = Kiln.ones(Float32, 3)
        y = copy(x)
        fill!(x, -2)
        @test Array(x) == fill(-2f0, 3)
        @test Array(y) == ones(Float32, 3)
        @test approx(Array(Kiln.arange(0, 5, 0.5)), collect(0f0:0.5f0:4.5f0))
        u1 = Array(Kiln.rand(Float32, 1000; seed=42, low=-2, high=3))
        u2 = Array(Kiln.rand(Float32, 1000; seed=42, low=-2, high=3))
        @test u1 == u2
        @test all(-2 .<= u1 .< 3)
        @test abs(mean(u1) - 0.5) < 0.2
        n = Array(Kiln.randn(Float32, 4000; seed=7, mean=1, std=2))
        @test abs(mean(n) - 1) < 0.2 && abs(std(n) - 2) < 0.2
        @test Array(Kiln.cast(KilnArray(Float32[-2.7, 2.9]), Int32)) == Int32[-2, 2]
    end

    @testset "Base interop: similar, copyto!, fill!, init, cat, mul!, show, collect" begin
        A = r32(3, 4)
        x = KilnArray(A)
        s = similar(x)
        @test s isa KilnArray{Float32,2} && size(s) == size(A)
        @test similar(x, Int32, (2, 5)) isa KilnArray{Int32,2} && size(similar(x, Int32, (2, 5))) == (2, 5)
        @test similar(x, UInt32) isa KilnArray{UInt32,2} && size(similar(x, UInt32)) == size(A)
        # copyto!: host -> GPU, GPU -> host, GPU -> GPU; each returns dest
        d = similar(x)
        @test copyto!(d, A) === d
        @test Array(d) == A
        H = zeros(Float32, 3, 4)
        @test copyto!(H, x) === H && H == A
        e = Kiln.zeros(Float32, 3, 4)
        v = reshape(e, 12)                       # shares e's buffer, as a Base reshape shares memory
        @test copyto!(e, x) === e && Array(e) == A
        @test Array(v) == vec(A)
        copyto!(e, KilnArray(2 .* A))
        @test Array(v) == vec(2 .* A)
        # a longer destination keeps its tail, as Base
        long, longh = Kiln.fill(9f0, 20), fill(9f0, 20)
        copyto!(long, A); copyto!(longh, A)
        @test Array(long) == longh
        h20, ref = fill(7f0, 20), fill(7f0, 20)
        copyto!(h20, x); copyto!(ref, A)
        @test h20 == ref
        # elements converted to dest's type
        ci = Kiln.zeros(Int32, 4)
        copyto!(ci, [1.0, 2.0, -3.0, 4.0])
        @test Array(ci) == Int32[1, 2, -3, 4]
        cf = Kiln.zeros(Float32, 4)
        copyto!(cf, KilnArray(Int32[1, -2, 3, 4]))
        @test Array(cf) == Float32[1, -2, 3, 4]
        @test_throws BoundsError copyto!(zeros(Float32, 2), A)     # Base
        @test_throws BoundsError copyto!(zeros(Float32, 2), x)
        @test_throws BoundsError copyto!(Kiln.zeros(Float32, 2), x)
        # more than 65535 workgroups of 64: the copy kernel's 2-D grid
        Lg = rand(rng, Float32, 4_300_001)
        lg = Kiln.zeros(Float32, length(Lg))
        copyto!(lg, Lg)
        @test Array(lg) == Lg
        if any(dv -> dv.chosen && dv.shader_f16, Kiln.devices())
            h = Kiln.zeros(Float16, 5)
            copyto!(h, Float16[1, 2, 3, 4, 5])
            @test Array(h) == Float16[1, 2, 3, 4, 5]
        end
        # fill!
        f = similar(x)
        @test fill!(f, 3) === f
        @test Array(f) == fill!(similar(A), 3)
        # sum / maximum / minimum with init. Base has these since Julia 1.6, defined there as
        # reduce(+ / max / min, A; dims, init), which 1.5 has too: that is the reference.
        @test approx(sum(x; init=10f0), reduce(+, A; init=10f0))
        @test sum(KilnArray(Float32[]); init=2f0) === reduce(+, Float32[]; init=2f0)
        @test approx(Array(sum(x; dims=2, init=1f0)), reduce(+, A; dims=2, init=1f0))
        for i in (5f0, -5f0)
            @test maximum(x; init=i) === reduce(max, A; init=i)
            @test minimum(x; init=i) === reduce(min, A; init=i)
        end
        @test Array(maximum(x; dims=1, init=0f0)) == reduce(max, A; dims=1, init=0f0)
        @test Array(minimum(x; dims=(1, 2), init=0f0)) == reduce(min, A; dims=(1, 2), init=0f0)
        E = zeros(Float32, 0, 3)
        @test maximum(KilnArray(E); init=-1f0) === reduce(max, E; init=-1f0)
        @test Array(maximum(KilnArray(E); dims=1, init=-1f0)) == reduce(max, E; dims=1, init=-1f0)
        @test size(minimum(KilnArray(E); dims=2, init=-1f0)) == size(reduce(min, E; dims=2, init=-1f0))
        @test_throws ArgumentError maximum(E)                      # Base
        @test_throws ArgumentError maximum(KilnArray(E))
        @test_throws ArgumentError minimum(KilnArray(E); dims=1)
        # hcat / vcat: vectors with matrices, mixed element types (promoted as Base)
        M, c, w = r32(3, 2), r32(3), Int32[1, 2, 3]
        @test Array(hcat(KilnArray(M), KilnArray(c))) == hcat(M, c)
        @test Array(hcat(KilnArray(c), KilnArray(M), KilnArray(c))) == hcat(c, M, c)
        @test Array(vcat(KilnArray(c), KilnArray(w))) == vcat(c, w)
        @test Array(hcat(KilnArray(M), KilnArray(w))) == hcat(M, w)
        one1 = reshape(Float32[5], 1, 1)
        @test Array(vcat(KilnArray(c), KilnArray(one1))) == vcat(c, one1)
        @test Array(vcat(KilnArray(M), KilnArray(M))) == vcat(M, M)
        # mul! in place
        A2, B2, b2 = r32(3, 5), r32(5, 2), r32(5)
        C = Kiln.zeros(Float32, 3, 2)
        Cv = vec(C)                              # shares C's buffer
        @test mul!(C, KilnArray(A2), KilnArray(B2)) === C
        @test approx(Array(C), A2 * B2; atol=1f-4)
        @test approx(Array(Cv), vec(A2 * B2); atol=1f-4)
        cv = Kiln.zeros(Float32, 3)
        mul!(cv, KilnArray(A2), KilnArray(b2))
        @test approx(Array(cv), A2 * b2; atol=1f-4)
        @test_throws DimensionMismatch mul!(Kiln.zeros(Float32, 2, 2), KilnArray(A2), KilnArray(B2))
        # show of 0-dimensional and empty arrays, as Base's (with the type's name)
        z0 = KilnArray(fill(1.5f0))
        @test sprint(show, MIME("text/plain"), z0) ==
              replace(sprint(show, MIME("text/plain"), fill(1.5f0)), r"Array\{Float32, ?0\}" => "KilnArray{Float32, 0}")
        @test sprint(show, MIME("text/plain"), KilnArray(E)) ==
              replace(sprint(show, MIME("text/plain"), E), r"Array\{Float32, ?2\}|Matrix\{Float32\}" => "KilnArray{Float32, 2}")
        @test sprint(show, z0) == "KilnArray(" * sprint(show, fill(1.5f0)) * ")"
        @test sprint(show, KilnArray(E)) == "KilnArray(" * sprint(show, E) * ")"
        @test z0[] === 1.5f0
        # collect
        @test collect(x) isa Array{Float32,2} && collect(x) == A
        @test collect(z0) isa Array{Float32,0} && collect(z0) == fill(1.5f0)
        # a Julia function Kiln has no kernel for: a clear error, not a host fallback
        err = try
            cbrt.(x)
        catch ex
            ex
        end
        @test err isa ArgumentError && occursin("cbrt", err.msg) && occursin("not supported on the GPU", err.msg)
        plus1(t) = t + 1
        @test_throws ArgumentError plus1.(x)
    end

    include("base_methods.jl")

    @testset "custom kernels" begin
        src = """
        struct P { add: i32, n: u32 }
        @group(0) @binding(0) var<storage, read_write> a: array<i32>;
        @group(0) @binding(1) var<uniform> p: P;
        @compute @workgroup_size(64)
        fn main(@builtin(global_invocation_id) id: vec3<u32>) {
            if (id.x < p.n) { a[id.x] = a[id.x] + p.add; }
        }
        """
        k = Kiln.Kernel(src, "main")
        A = Int32.(reshape(0:299, 20, 15))
        x = KilnArray(A)
        k(x; workgroups=(5, 1, 1), uniforms=(Int32(7), UInt32(300)))
        @test Array(x) == A .+ Int32(7)
        Kiln.free!(k)
        err = try
            Kiln.Kernel("@compute @workgroup_size(1)\nfn main() { let x = ; }\n")
            nothing
        catch e
            e
        end
        @test err isa KilnError
        @test err.name == :SHADER && err.code == 7
        @test occursin("2:", err.msg)
    end

    @testset "errors and freeing" begin
        x, y = KilnArray(r32(3)), KilnArray(r32(4))
        err = try
            x .+ y
        catch e
            e
        end
        # Base's exception, with Julia's sizes (checked before Kiln sees its row-major shapes)
        @test err isa DimensionMismatch && occursin("(3,) and (4,)", err.msg)
        # kiln-core's error table, as libkiln names it: numbered from 0 (OK) without gaps
        names = Symbol[]
        while Kiln.status_name(length(names)) != :UNKNOWN
            push!(names, Kiln.status_name(length(names)))
        end
        @test names[1] == :OK && length(names) >= 14 && allunique(names)
        @test :SHAPE_MISMATCH in names && :DEVICE_LOST in names
        @test_throws KilnError Kiln.select_device("no-such-adapter")
        @test_throws ArgumentError Kiln.softmax(KilnArray(r32(2, 2)); dims=3)
        z = KilnArray(r32(5))
        @test Kiln.isvalid(z)
        Kiln.free!(z)
        @test !Kiln.isvalid(z)
        Kiln.free!(z)                             # twice is harmless
        @test_throws ArgumentError Array(z)
        before = Kiln.memory_stats().live_buffers
        for _ in 1:20
            KilnArray(r32(16))
        end
        GC.gc(); GC.gc()
        Kiln.synchronize()
        @test Kiln.memory_stats().live_buffers <= before + 2   # finalizers freed the temporaries
        @test !isempty(Kiln.devices())
        @test count(d -> d.chosen, Kiln.devices()) == 1
        @test Kiln.pipeline_stats().pipelines > 0
    end

    @testset "two devices: to_device, and operations across them refused" begin
        # Two adapters without a GPU: Mesa's llvmpipe through Vulkan and through OpenGL. The
        # backends are read once per process, so the checks run in a child Julia.
        code = """
        using Kiln, Test
        @assert length(Kiln.devices()) >= 2 "two adapters expected"
        A = Float32[1.5 -2; Inf -0.0]
        a = KilnArray(A)
        b = Kiln.to_device(a, 1 - Kiln.device(a))
        @test Kiln.device(b) == 1 - Kiln.device(a)
        @test isequal(Array(b), A)
        err = try a .+ b; nothing catch e; e end
        @test err isa KilnError && err.code == 1 && occursin("device", err.msg)
        @test isequal(Array(a .+ Kiln.to_device(b, Kiln.device(a))), A .+ A)
        @test_throws KilnError Kiln.to_device(a, length(Kiln.devices()))
        println("two devices: ok")
        """
        cmd = setenv(`$(Base.julia_cmd()) --startup-file=no --project=$(Base.active_project()) -e $code`,
                     merge(ENV, Dict("KILN_BACKENDS" => "vulkan,gl")))
        out = read(cmd, String)
        @test occursin("two devices: ok", out)
    end

    @testset "reset_devices!" begin
        old = KilnArray(Float32[1, 2, 3])
        Kiln.reset_devices!()
        err = try
            Array(old)
        catch e
            e
        end
        @test err isa KilnError && err.name == :DEVICE_LOST
        Kiln.free!(old)                           # freeing a tensor of a reset device is fine
        @test Array(KilnArray(Float32[4, 5]) .* 2f0) == Float32[8, 10]   # a fresh device
    end

    @testset "metrics and profiles" begin
        A = Float32.(reshape(1:600, 20, 30)) ./ 100f0
        x = KilnArray(A)
        Array(x .+ x)
        sample(text) = begin
            m = match(r"\nkiln_op_dispatches_total\{op=\"elementwise:add\"\} (\S+)", text)
            m === nothing ? 0.0 : parse(Float64, m.captures[1])
        end
        before = sample(Kiln.metrics_text())
        for _ in 1:3
            @test Array(x .+ x) == A .+ A
        end
        text = Kiln.metrics_text()
        @test sample(text) - before == 3
        @test occursin("# TYPE kiln_op_gpu_seconds histogram", text)

        y = nothing
        p = Kiln.profile() do
            y = Array((x .+ x) .* x)
        end
        @test y == (A .+ A) .* A
        calls = Dict(r.op => r.calls for r in p.rows)
        @test calls["elementwise:add"] == 1 && calls["elementwise:mul"] == 1
        @test p.clock in (:gpu_timestamps, :wall_clock)
        @test p.total_s > 0 && isapprox(sum(r.share for r in p.rows), 1.0; atol=1e-9)
        shown = sprint(show, p)
        @test occursin("elementwise:mul", shown) && occursin("calls", shown)
        err = try
            Kiln.profile(() -> Kiln.profile(() -> nothing))
            nothing
        catch e
            e
        end
        @test err isa KilnError && err.name == :INVALID_ARGUMENT

        big = KilnArray(collect(range(-1f0, 1f0; length=1 << 18)))
        s = Kiln.Session(max_gpu_time_ms=2)
        err = Kiln.with_session(s) do
            try
                for _ in 1:5000
                    Array(big .* big)
                end
                nothing
            catch e
                e
            end
        end
        @test err isa KilnError && err.name == :COMPUTE_LIMIT && occursin("GPU time", err.msg)
        st = Kiln.session_stats(s)
        @test st.gpu_time_ns >= 2_000_000 && st.bound_bytes > 0
        Kiln.free!(s)
    end

    @testset "sessions" begin
        A = Float32.(reshape(1:1024, 32, 32))
        s = Kiln.Session(max_bytes=2 * 4096, allow_atomics=false)
        held = Kiln.with_session(s) do
            x = KilnArray(A)
            y = x .+ x
            @test Array(y) == A .+ A
            err = try
                x .* y
                nothing
            catch e
                e
            end
            @test err isa KilnError && err.name == :QUOTA_EXCEEDED
            st = Kiln.session_stats(s)
            @test st.bytes_in_use == 2 * 4096 && st.quota_exceeded == 1
            err = try
                Kiln.Kernel("@group(0) @binding(0) var<storage, read_write> c: atomic<u32>;\n" *
                            "@compute @workgroup_size(1) fn main() { atomicAdd(&c, 1u); }")
                nothing
            catch e
                e
            end
            @test err isa KilnError && err.name == :SHADER && occursin("policy", err.msg)
            x
        end
        close(s)
        err = try
            Array(held)
            nothing
        catch e
            e
        end
        @test err isa KilnError && err.name == :INVALID_ARGUMENT && occursin("closed", err.msg)
        @test Kiln.session_stats(s).closed
        @test Array(KilnArray(A) .+ 1f0) == A .+ 1f0
        Kiln.free!(s)

        # A kernel that never ends stops at its loop budget; the device carries on.
        s2 = Kiln.Session(max_loop_iterations=1000)
        err = Kiln.with_session(s2) do
            spin = Kiln.Kernel("@group(0) @binding(0) var<storage, read_write> v: array<f32>;\n" *
                               "@compute @workgroup_size(1) fn main() { loop { v[0] = v[0] + 1.0; } }")
            w = KilnArray(zeros(Float32, 4))
            spin(w; workgroups=1)
            try
                Array(w)
                nothing
            catch e
                e
            end
        end
        @test err isa KilnError && err.name == :COMPUTE_LIMIT && occursin("loop budget", err.msg)
        @test Kiln.session_stats(s2).compute_limit_hits == 1
        @test Array(KilnArray(A) .* 2f0) == A .* 2f0
        close(s2)
    end

    @testset "threads" begin
        results = Vector{Bool}(undef, 8)
        Threads.@threads for i in 1:8
            A = Float32.(reshape(1:12, 3, 4)) .* i
            results[i] = Array(KilnArray(A) .* 2f0) == A .* 2f0
        end
        @test all(results)
    end
end

# One plain closing line with the count (a failure has already thrown, with Test's summary).
# DefaultTestSet's fields are Test internals: where they differ, the summary above has the count.
npassed(t) = t.n_passed + sum(Int[npassed(r) for r in t.results if r isa Test.DefaultTestSet])
n = try
    npassed(top)
catch
    nothing
end
n === nothing || println("Kiln.jl on Julia $(VERSION), $(Threads.nthreads()) threads: $n passed, 0 failed")

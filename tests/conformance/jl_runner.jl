# Julia runner of the Kiln conformance suite: every case of manifest.txt (the line format that
# gen.py writes; see FORMAT.md) through Kiln.jl (julia/), never through another language.
# Written by hand where Kiln.jl's method is Julia's idiom (Base names, 1-based indices); the
# row-form calls and the tuple ops' core-form calls are the marked region's.
#
#   KILN_LIB=target/release/libkiln.so scripts/julia tests/conformance/jl_runner.jl MANIFEST.txt OUT.json
#
# Writes {"language": "julia", "missing_ops": [...], "cases": [{id, op, status, sha256, message}]}.
#
# Column-major rule (docs/DESIGN.md): a row-major core tensor of shape (d1, ..., dn) is the Julia
# array of size (dn, ..., d1) with the same bytes. So every input file is read as an Array of
# the reversed shape, and outputs are compared (and hashed) as the bytes of the result's Julia
# array. Kiln.jl gives Julia semantics (julia/src/Kiln.jl), so the runner states each core op
# in Julia terms:
#   core axis k of an n-d tensor        -> Julia dim n - k (k >= 0), -k (k < 0)
#   core matmul(a, b)                   -> Kiln.matmul(B, A)   (Julia A * B is core matmul(B, A))
#   core permute(p)                     -> permutedims(x, q), q[j] = n - p[n - j + 1] (1-based)
#   core transpose(a0, a1)              -> Kiln.swapdims(x, dim(a0), dim(a1))
#   core (h, w) pairs                   -> Julia (w, h) tuples (stride, pad, dilation, kernel)
#   core 0-based indices                -> 1-based (index_select via x[:, idx], gather, embedding)
#   core argmax/argmin (0-based)        -> Base.argmax (1-based; shifted back before hashing)
#   core slice(start, stop, step)       -> x[..., range, ...] with the numpy-clamped range
#   core where / unary / binary ops     -> ifelse.(c, a, b), exp.(x), a .+ b, x .- s, ...
#   core reductions with keepdims=false -> Julia keeps reduced dims as size 1 (same bytes; the
#                                          shape check ignores size-1 dims for reductions)
# `make conformance` runs it with scripts/julia (Julia 1.5.3 here).

const ROOT = normpath(joinpath(@__DIR__, "..", ".."))
# KILN_JL: another copy of Kiln.jl to test (the break check's broken one); default julia/.
pushfirst!(LOAD_PATH, get(ENV, "KILN_JL", joinpath(ROOT, "julia")))
using Kiln
using SHA

const TYPES = Dict("f32" => Float32, "f16" => Float16, "i32" => Int32, "u32" => UInt32, "bool" => Bool)

struct TSpec
    name::String
    T::DataType
    shape::Vector{Int}   # core (row-major) shape
    file::String
end

mutable struct Case
    id::String
    op::String
    params::Dict{String,Any}
    inputs::Vector{TSpec}
    out::Union{Nothing,TSpec}
    atol::Float64
    rtol::Float64
end

function parse_manifest(path)
    ops = String[]
    cases = Case[]
    cur = nothing
    for line in eachline(path)
        w = split(line)
        isempty(w) && continue
        if w[1] == "ops"
            ops = String.(w[3:end])
        elseif w[1] == "case"
            cur = Case(w[2], w[3], Dict{String,Any}(), TSpec[], nothing, 0.0, 0.0)
        elseif w[1] == "p"
            key, kind = String(w[2]), w[3]
            v = kind == "i" ? parse(Int128, w[4]) :
                kind == "b" ? w[4] == "1" :
                kind == "n" ? nothing :
                kind == "s" ? String(w[4]) :
                kind == "f" ? parse(Float64, w[4]) :
                kind == "I" ? [parse(Int, x) for x in w[5:end]] : error("bad parameter kind $kind")
            cur.params[key] = v
        elseif w[1] == "in"
            nd = parse(Int, w[4])
            push!(cur.inputs, TSpec(w[2], TYPES[w[3]], [parse(Int, x) for x in w[5:4+nd]], w[5+nd]))
        elseif w[1] == "out"
            nd = parse(Int, w[3])
            cur.out = TSpec("out", TYPES[w[2]], [parse(Int, x) for x in w[4:3+nd]], w[4+nd])
            cur.atol = parse(Float64, w[5+nd])
            cur.rtol = parse(Float64, w[6+nd])
        elseif w[1] == "end"
            push!(cases, cur)
        end
    end
    ops, cases
end

# The file's bytes as the Julia array of the reversed shape (no reordering: same bytes).
function read_array(dir, s::TSpec)
    bytes = read(joinpath(dir, s.file))
    data = collect(reinterpret(s.T, bytes))
    reshape(data, Tuple(reverse(s.shape)))
end

# ---- how each shared op is reached in Kiln.jl, and whether Kiln.jl defines it (a method owned
# by module Kiln, so that Base's generic fallbacks do not count)

using Statistics
const KS = Kiln.KilnStyle
const KA = KilnArray{Float32,2}
# The elementwise ops as Kiln.jl broadcasts them: its generated UNARY / BINARY tables (from
# kiln-core's op tables), plus `/` and `^`, which Kiln.jl writes by hand.
const UNARY_F = Dict(name => getfield(Kiln, f) for (f, name) in Kiln.UNARY)
const BINARY_F = merge(Dict(name => getfield(Kiln, f) for (f, name) in Kiln.BINARY), Dict("div" => /, "pow" => ^))
unary_f(op) = UNARY_F[op]
# The logical ops as Julia writes them: Base's `!`, `&`, `|`, `xor` on Bool arrays (Kiln.jl
# defines them for KilnArray{Bool}; other element types are made Bool first, `Bool.(x)`, the
# core cast: non-zero is true).
const LOGICAL_F = Dict("logical_and" => (&), "logical_or" => (|), "logical_xor" => xor)
const KB = KilnArray{Bool,2}
as_bool(x) = eltype(x) === Bool ? x : Bool.(x)

owned(f, types) = (hasmethod(f, types) && which(f, types).module === Kiln)
kiln_fn(name) = isdefined(Kiln, name) && parentmodule(getfield(Kiln, name)) === Kiln

# BEGIN GENERATED (kiln gen): how Kiln.jl shows it exposes each op of the table (core/src/ops/table.rs)
const EXPOSED = Dict{String,Vector{Any}}(
    "zeros" => [(Kiln.zeros, Tuple{Type{Float32},Int}), :zeros],
    "ones" => [(Kiln.ones, Tuple{Type{Float32},Int}), :ones],
    "full" => [(Kiln.full, Tuple{Type{Float32},Float64,Int}), :full],
    "arange" => [:arange],
    "random_uniform" => [(Kiln.rand, Tuple{Type{Float32},Int}), :rand],
    "random_normal" => [(Kiln.randn, Tuple{Type{Float32},Int}), :randn],
    "cast" => [:cast],
    "matmul" => [:matmul],
    "sum" => [(Kiln.sum, Tuple{KA})],
    "mean" => [(Statistics.mean, Tuple{KA})],
    "max" => [(Kiln.maximum, Tuple{KA})],
    "min" => [(Kiln.minimum, Tuple{KA})],
    "all" => [(all, Tuple{KB})],
    "any" => [(any, Tuple{KB})],
    "var" => [(Statistics.var, Tuple{KA})],
    "argmax" => [(Kiln.argmax, Tuple{KA})],
    "argmin" => [(Kiln.argmin, Tuple{KA})],
    "softmax" => [:softmax],
    "log_softmax" => [:log_softmax],
    "layer_norm" => [:layer_norm],
    "rms_norm" => [:rms_norm],
    "batch_norm" => [:batch_norm],
    "conv2d" => [:conv2d],
    "max_pool2d" => [:max_pool2d],
    "avg_pool2d" => [:avg_pool2d],
    "reshape" => [(reshape, Tuple{KA,Dims{2}})],
    "permute" => [(permutedims, Tuple{KA,Vector{Int}})],
    "transpose" => [:swapdims],
    "concat" => [(cat, Tuple{KA,KA})],
    "slice" => [(getindex, Tuple{KA,Colon,UnitRange{Int}})],
    "index_select" => [(getindex, Tuple{KA,Colon,Vector{Int}})],
    "gather" => [:gather],
    "embedding" => [:embedding],
    "rope" => [:rope],
    "attention" => [:attention],
    "quant_from_bytes" => [:quant_from_bytes],
    "quantize" => [:quantize],
    "dequantize" => [:dequantize],
    "quant_matmul" => [:quant_matmul],
    "quant_embedding" => [:quant_embedding],
    "sort" => [(Kiln.sort, Tuple{KA})],
    "argsort" => [(Kiln.sortperm, Tuple{KA})],
    "topk" => [:topk],
    "searchsorted" => [(searchsortedfirst, Tuple{KilnArray{Float32,1},KA}), (searchsortedlast, Tuple{KilnArray{Float32,1},KA})],
    "count_nonzero" => [(Kiln.count, Tuple{KA})],
    "nonzero" => [:nonzero],
    "unique_all" => [:unique_all],
    "unique_counts" => [:unique_counts],
    "unique_inverse" => [:unique_inverse],
    "unique_values" => [(unique, Tuple{KA}), :unique_values],
    "isin" => [:isin],
    "cumulative_sum" => [(Kiln.cumsum, Tuple{KA})],
    "cumulative_prod" => [(Kiln.cumprod, Tuple{KA})],
    "prod" => [(Kiln.prod, Tuple{KA})],
    "std" => [(Statistics.std, Tuple{KA})],
    "diff" => [(Kiln.diff, Tuple{KA})],
    "vecdot" => [:vecdot],
    "tensordot" => [:tensordot],
)
# END GENERATED (kiln gen)

function exposed(op)
    try
        haskey(UNARY_F, op) &&
            return owned(Broadcast.broadcasted, Tuple{KS,typeof(unary_f(op)),KA})
        haskey(BINARY_F, op) && return owned(Broadcast.broadcasted, Tuple{KS,typeof(BINARY_F[op]),KA,KA}) &&
                                       owned(Broadcast.broadcasted, Tuple{KS,typeof(BINARY_F[op]),KA,Float64})
        op == "where" && return owned(Broadcast.broadcasted, Tuple{KS,typeof(ifelse),KA,KA,KA})
        haskey(LOGICAL_F, op) && return owned(Broadcast.broadcasted, Tuple{KS,typeof(LOGICAL_F[op]),KB,KB}) &&
                                        owned(Broadcast.broadcasted, Tuple{KS,typeof(LOGICAL_F[op]),KB,Bool})
        op == "logical_not" && return owned(Broadcast.broadcasted, Tuple{KS,typeof(!),KB})
        op == "clip" && return owned(Broadcast.broadcasted, Tuple{KS,typeof(clamp),KA,KA,KA})
        op == "bitwise_invert" && return owned(Broadcast.broadcasted, Tuple{KS,typeof(~),KilnArray{Int32,2}})
        op == "kernel" && return kiln_fn(:Kernel)
        # The other ops: the checks of their rows (EXPOSED, generated).
        return all(c isa Symbol ? kiln_fn(c) : owned(c...) for c in EXPOSED[op])
    catch
        return false
    end
end

# ---- core -> Julia translation helpers

jdim(k, n) = k >= 0 ? n - k : -k
jshape(s) = Tuple(reverse(s))
jpair(p) = (p[2], p[1])
jaxes(a, n) = a === nothing ? (:) : Tuple(jdim(k, n) for k in a)   # core axes -> Julia dims

function numpy_range(n, start, stop, step)
    lo = start < 0 ? max(start + n, 0) : min(start, n)
    hi = stop < 0 ? max(stop + n, 0) : min(stop, n)
    hi <= lo ? (1:0) : (lo+1:step:hi)   # 0-based [lo, hi) -> 1-based inclusive
end

# Reads an index input as a host vector / array of 1-based Ints.
# Core's 0-based index -> Julia's 1-based one; a negative core index counts from the end of an axis
# of length n (numpy), which Julia spells n + 1 + i (Julia's own gather never wraps).
host_index(dir, s::TSpec, n) = [i < 0 ? n + 1 + i : i + 1 for i in Int.(read_array(dir, s))]

# BEGIN GENERATED (kiln gen): the ops whose Kiln.jl method takes the row's form (gen/src/julia.rs)
function run_table_op(op, p, up, nmax)
    op == "zeros" && return Kiln.zeros(TYPES[p["dtype"]], jshape(p["shape"])...)
    op == "ones" && return Kiln.ones(TYPES[p["dtype"]], jshape(p["shape"])...)
    op == "full" && return Kiln.full(TYPES[p["dtype"]], p["value"], jshape(p["shape"])...)
    op == "random_uniform" && return Kiln.rand(TYPES[p["dtype"]], jshape(p["shape"])...; seed=UInt64(p["seed"]), low=p["low"], high=p["high"])
    op == "random_normal" && return Kiln.randn(TYPES[p["dtype"]], jshape(p["shape"])...; seed=UInt64(p["seed"]), mean=p["mean"], std=p["std"])
    op == "sum" && return Kiln.sum(up("x"); dims=jaxes(p["axes"], nmax))
    op == "max" && return Kiln.maximum(up("x"); dims=jaxes(p["axes"], nmax))
    op == "min" && return Kiln.minimum(up("x"); dims=jaxes(p["axes"], nmax))
    op == "softmax" && return Kiln.softmax(up("x"); dims=jdim(Int(p["axis"]), nmax))
    op == "log_softmax" && return Kiln.log_softmax(up("x"); dims=jdim(Int(p["axis"]), nmax))
    op == "layer_norm" && return Kiln.layer_norm(up("x"); weight=up("weight"), bias=up("bias"), eps=p["eps"])
    op == "rms_norm" && return Kiln.rms_norm(up("x"); weight=up("weight"), eps=p["eps"])
    op == "batch_norm" && return Kiln.batch_norm(up("x"), up("mean"), up("var"); weight=up("weight"), bias=up("bias"), eps=p["eps"])
    op == "conv2d" && return Kiln.conv2d(up("x"), up("w"); bias=up("bias"), stride=jpair(p["stride"]), pad=jpair(p["padding"]), dilation=jpair(p["dilation"]), groups=Int(p["groups"]))
    op == "max_pool2d" && return Kiln.max_pool2d(up("x"), jpair(p["kernel"]); stride=jpair(p["stride"]), pad=jpair(p["padding"]))
    op == "avg_pool2d" && return Kiln.avg_pool2d(up("x"), jpair(p["kernel"]); stride=jpair(p["stride"]), pad=jpair(p["padding"]))
    op == "rope" && return Kiln.rope(up("x"); pos_offset=Int(p["pos_offset"]), base=p["base"])
    op == "attention" && return Kiln.attention(up("q"), up("k"), up("v"); causal=p["causal"], scale=p["scale"])
    op == "quantize" && return Kiln.quantize(up("x"), Symbol(p["format"]))
    op == "quant_matmul" && return Kiln.quant_matmul(up("x"), up("w"), Symbol(p["format"]), Int(p["n"]))
    op == "unique_values" && return Kiln.unique_values(up("x"))
    op == "isin" && return Kiln.isin(up("x1"), up("x2"); invert=p["invert"])
    op == "diff" && return Kiln.diff(up("x"); dims=jdim(Int(p["axis"]), nmax), n=Int(p["n"]), prepend=up("prepend"), append=up("append"))
    op == "vecdot" && return Kiln.vecdot(up("a"), up("b"); dims=jdim(Int(p["axis"]), nmax))
    op == "topk" && return Kiln._kiln_topk(up("x"), Int(p["k"]), Int(p["axis"]), p["largest"])[Int(p["output"])+1]
    op == "unique_all" && return Kiln._kiln_unique_all(up("x"))[Int(p["output"])+1]
    op == "unique_counts" && return Kiln._kiln_unique_counts(up("x"))[Int(p["output"])+1]
    op == "unique_inverse" && return Kiln._kiln_unique_inverse(up("x"))[Int(p["output"])+1]
    return nothing
end
# END GENERATED (kiln gen)

function run_op(op, p, c::Case, dir)
    # `local`: a plain `s = …` here would be run_op's own `s` (assigned in the gather and
    # embedding branches), captured and overwritten by every call.
    spec(name) = (local i = findfirst(t -> t.name == name, c.inputs); i === nothing ? nothing : c.inputs[i])
    up(name) = (local t = spec(name); t === nothing ? nothing : KilnArray(read_array(dir, t)))
    x = isempty(c.inputs) ? nothing : KilnArray(read_array(dir, c.inputs[1]))
    nx = x === nothing ? 0 : ndims(x)
    T(k) = TYPES[p[k]]
    nmax = isempty(c.inputs) ? 0 : maximum(length(i.shape) for i in c.inputs)
    y = run_table_op(op, p, up, nmax)
    y === nothing || return y
    if op == "arange"
        return Kiln.arange(p["start"], p["stop"], p["step"]; T=T("dtype"))
    elseif op == "where"
        return ifelse.(up("cond"), up("a"), up("b"))
    elseif op == "clip"
        return haskey(p, "min") ? clamp.(x, p["min"], p["max"]) : clamp.(x, up("min"), up("max"))
    elseif op == "cast"
        return Kiln.cast(x, T("dtype"))
    elseif op == "matmul"
        return Kiln.matmul(up("b"), up("a"))
    elseif op in ("all", "any")
        dims = p["axes"] === nothing ? (:) : Tuple(jdim(a, nx) for a in p["axes"])
        return (op == "all" ? all : any)(as_bool(x); dims=dims)
    elseif haskey(LOGICAL_F, op)
        f = LOGICAL_F[op]
        haskey(p, "scalar") || return f.(as_bool(up("a")), as_bool(up("b")))
        s = p["scalar"] != 0
        return p["scalar_first"] ? f.(s, as_bool(x)) : f.(as_bool(x), s)
    elseif op == "logical_not"
        return .!as_bool(x)
    elseif op in ("mean", "var")
        dims = jaxes(p["axes"], nx)
        op == "mean" && return Statistics.mean(x; dims=dims)
        p["ddof"] in (0, 1) || error("Kiln.jl's var takes corrected=true/false only (ddof 0 or 1)")
        return Statistics.var(x; dims=dims, corrected=p["ddof"] == 1)
    elseif op in ("argmax", "argmin")
        f = op == "argmax" ? argmax : argmin
        if p["axis"] === nothing
            i = f(x; dims=:)
            lin = i isa Integer ? i : LinearIndices(size(x))[i]
            return Int32[lin - 1]                        # core: the 0-based flat index
        end
        r = Array(f(x; dims=jdim(Int(p["axis"]), nx)))
        return r .- one(eltype(r))                       # 1-based positions -> 0-based
    elseif op in ("sort", "argsort")
        d = jdim(Int(p["axis"]), nx)
        op == "sort" && return sort(x; dims=d, rev=p["descending"])
        r = Array(sortperm(x; dims=d, rev=p["descending"]))
        return r .- one(eltype(r))                       # 1-based positions -> 0-based
    elseif op == "searchsorted"
        p["right"] && return searchsortedlast(up("x1"), up("x2"))        # the count <= v
        r = Array(searchsortedfirst(up("x1"), up("x2")))
        return r .- one(eltype(r))
    elseif op == "count_nonzero"
        dims = p["axes"] === nothing ? (:) : Tuple(jdim(a, nx) for a in p["axes"])
        r = count(x; dims=dims)
        return r isa Integer ? Int32[r] : r
    elseif op == "nonzero"
        r = Array(Kiln.nonzero(x)[nx - Int(p["output"])])   # core dim k is Julia dim n - k
        return r .- one(eltype(r))
    elseif op == "tensordot"
        a, b = up("a"), up("b")
        p["n"] >= 0 && return Kiln.tensordot(b, a, Int(p["n"]))   # core (a, b) is Julia (b, a)
        return Kiln.tensordot(b, a, [jdim(Int(k), ndims(b)) for k in p["axes2"]], [jdim(Int(k), ndims(a)) for k in p["axes1"]])
    elseif op in ("prod", "std")
        dims = p["axes"] === nothing ? (:) : Tuple(jdim(a, nx) for a in p["axes"])
        if op == "prod"
            xs = p["dtype"] === nothing ? x : Kiln.cast(x, T("dtype"))   # the standard casts first
            return prod(xs; dims=dims)
        end
        p["ddof"] in (0, 1) || error("Kiln.jl's std takes corrected=true/false only (ddof 0 or 1)")
        return Statistics.std(x; dims=dims, corrected=p["ddof"] == 1)
    elseif op == "bitwise_invert"
        return (~).(x)
    elseif op in ("cumulative_sum", "cumulative_prod")
        xs = p["dtype"] === nothing ? x : Kiln.cast(x, T("dtype"))   # the standard casts first
        dims = p["axis"] === nothing ? nothing : jdim(Int(p["axis"]), nx)
        f = op == "cumulative_sum" ? cumsum : cumprod
        return f(xs; dims=dims, include_initial=p["include_initial"])
    elseif op == "reshape"
        return reshape(x, Tuple(d == -1 ? Colon() : d for d in reverse(p["shape"])))
    elseif op == "permute"
        n = length(p["axes"])
        core = [a < 0 ? a + n : a for a in p["axes"]]
        return permutedims(x, [n - core[n-j+1] for j in 1:n])
    elseif op == "transpose"
        return Kiln.swapdims(x, jdim(Int(p["axis0"]), nx), jdim(Int(p["axis1"]), nx))
    elseif op == "concat"
        xs = [KilnArray(read_array(dir, s)) for s in c.inputs]
        return cat(xs...; dims=jdim(Int(p["axis"]), nx))
    elseif op == "slice"
        d = jdim(Int(p["axis"]), nx)
        r = numpy_range(size(x, d), Int(p["start"]), Int(p["stop"]), Int(p["step"]))
        return x[ntuple(i -> i == d ? r : Colon(), nx)...]
    elseif op == "index_select"
        d = jdim(Int(p["axis"]), nx)
        idx = vec(host_index(dir, spec("indices"), size(x, d)))
        return x[ntuple(i -> i == d ? idx : Colon(), nx)...]
    elseif op == "gather"
        d = jdim(Int(p["axis"]), nx)
        index = KilnArray(Int32.(host_index(dir, spec("index"), size(x, d))))
        return Kiln.gather(x, index; dims=d)
    elseif op == "embedding"
        s = spec("ids")
        return Kiln.embedding(up("weight"), KilnArray(read_array(dir, s) .+ one(s.T)))
    elseif op == "quant_from_bytes"
        # Kiln.jl names a GGUF matrix by ggml's (k, n): core's (cols, rows).
        bytes = collect(reinterpret(UInt8, vec(read_array(dir, c.inputs[1]))))[1:Int(p["nbytes"])]
        return Kiln.quant_from_bytes(bytes, Symbol(p["format"]), Int(p["cols"]), Int(p["rows"]))
    elseif op == "dequantize"
        return Kiln.dequantize(x, Symbol(p["format"]), Int(p["cols"]), Int(p["rows"]))
    elseif op == "quant_embedding"
        s = spec("ids")
        return Kiln.quant_embedding(up("w"), Symbol(p["format"]), Int(p["d"]), KilnArray(read_array(dir, s) .+ one(s.T)))
    elseif op == "kernel"
        k = Kiln.Kernel(read(joinpath(dir, p["source"]), String), p["entry"])
        xs = [KilnArray(read_array(dir, s)) for s in c.inputs]
        uni = p["uniforms"] === nothing ? nothing : hex2bytes(p["uniforms"])
        k(xs...; workgroups=Tuple(p["workgroups"]), uniforms=uni)
        return xs[p["output"]+1]
    elseif haskey(BINARY_F, op)
        # Kiln's integer div is floor division: Julia's `fld` (Julia's `/` on integers is float).
        f = op == "div" && eltype(x) <: Integer ? fld : BINARY_F[op]
        if haskey(p, "scalar")
            # A whole scalar against an integer tensor is an integer, as a Julia user writes it.
            s = eltype(x) <: Integer && isinteger(p["scalar"]) ? Int(p["scalar"]) : p["scalar"]
            return p["scalar_first"] ? f.(s, x) : f.(x, s)
        end
        return f.(up("a"), up("b"))
    else
        return unary_f(op).(x)
    end
end

const REDUCTIONS = ("sum", "mean", "max", "min", "var", "argmax", "argmin", "all", "any", "count_nonzero", "prod", "std")
squeeze1(t) = Tuple(d for d in t if d != 1)

# A zero matches only a zero of the same sign (-0.0 == 0.0 in Julia, so signbit decides).
close_enough(g, w, atol, rtol) = (g == 0 && w == 0) ? signbit(g) == signbit(w) :
    (isnan(g) && isnan(w)) || g == w || abs(g - w) <= atol + rtol * abs(w)

function check(c::Case, dir, y)
    A = y isa KilnArray ? Array(y) : y isa AbstractArray ? y : fill(y)   # a Julia scalar from dims=:
    bytes = collect(reinterpret(UInt8, vec(A)))
    digest = bytes2hex(sha256(bytes))
    want_size = jshape(c.out.shape)
    size_ok = c.op in REDUCTIONS ? squeeze1(size(A)) == squeeze1(want_size) : size(A) == want_size
    if eltype(A) != c.out.T || !size_ok
        return "fail", digest, "output $(eltype(A)) $(size(A)), expected $(c.out.T) $(want_size) (Julia order)"
    end
    want = read_array(dir, c.out)
    g = Float64.(vec(A))
    w = Float64.(vec(want))
    bad = findall(i -> !close_enough(g[i], w[i], c.atol, c.rtol), eachindex(w))
    isempty(bad) && return "pass", digest, ""
    i = bad[1]
    "fail", digest, "$(length(bad)) of $(length(w)) elements outside atol $(c.atol) rtol $(c.rtol); first: element $(i-1): got $(g[i]), expected $(w[i])"
end

function json(s::AbstractString)
    io = IOBuffer()
    print(io, '"')
    for ch in s
        if ch == '"' || ch == '\\'
            print(io, '\\', ch)
        elseif ch < ' '
            print(io, "\\u", string(UInt32(ch), base=16, pad=4))
        else
            print(io, ch)
        end
    end
    print(io, '"')
    String(take!(io))
end

function main(args)
    manifest, out = args[1], args[2]
    dir = dirname(abspath(manifest))
    ops, cases = parse_manifest(manifest)
    missing_ops = [op for op in ops if !exposed(op)]
    rows = String[]
    npass = 0
    for c in cases
        status, digest, msg = if c.op in missing_ops
            "missing", "", "op $(c.op) is not exposed by Kiln.jl"
        else
            try
                y = run_op(c.op, c.params, c, dir)
                check(c, dir, y)
            catch e
                "error", "", sprint(showerror, e)
            end
        end
        status == "pass" && (npass += 1)
        push!(rows, "  {\"id\": $(json(c.id)), \"op\": $(json(c.op)), \"status\": $(json(status)), \"sha256\": $(json(digest)), \"message\": $(json(msg))}")
    end
    open(out, "w") do io
        println(io, "{\"language\": \"julia\", \"binding\": \"Kiln.jl\", \"missing_ops\": [", join(json.(missing_ops), ", "), "],")
        println(io, " \"cases\": [")
        println(io, join(rows, ",\n"))
        println(io, " ]}")
    end
    println("conformance (julia): $npass/$(length(cases)) cases pass; results in $out")
end

isempty(ARGS) || main(ARGS)

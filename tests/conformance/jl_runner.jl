# Julia runner of the Kiln conformance suite: every case of manifest.txt (the line format that
# gen.py writes; see FORMAT.md) through Kiln.jl (julia/), never through another language.
#
#   KILN_LIB=target/release/libkiln.so julia tests/conformance/jl_runner.jl MANIFEST.txt OUT.json
#
# Writes {"language": "julia", "missing_ops": [...], "cases": [{id, op, status, sha256, message}]}.
#
# Column-major rule (DESIGN.md): a row-major core tensor of shape (d1, ..., dn) is the Julia
# array of size (dn, ..., d1) with the same bytes. So every input file is read as an Array of
# the reversed shape, outputs are compared (and hashed) as the bytes of `Array(result)`, whose
# size must be the reversed expected shape. Kiln.jl gives Julia semantics, so the runner turns
# each core parameter into its Julia meaning:
#   core axis k of an n-d tensor          -> Julia dim n - k (k >= 0), -k (k < 0)
#   core matmul(a, b)                     -> Julia B * A, i.e. Kiln.matmul(B, A)
#   core permute(p)                       -> permutation q[j] = n - p[n - j] (1-based dims)
#   core (h, w) pairs (stride, padding..) -> Julia (w, h)
#   core 0-based indices / argmax results -> Julia 1-based (inputs + 1, results - 1)
#   core slice(start, stop, step)         -> the Julia range of the numpy-clamped selection
#
# NOTE: written before julia/ (Kiln.jl) existed in the tree and with no `julia` on this machine:
# the calling conventions below (one function per op in module Kiln, positional arguments in
# core's order after the translation above) are the ones DESIGN.md implies; check them against
# Kiln.jl when it lands. An op that Kiln.jl does not define is reported as missing.

const ROOT = normpath(joinpath(@__DIR__, "..", ".."))
pushfirst!(LOAD_PATH, joinpath(ROOT, "julia"))
using Kiln
using SHA

const TYPES = Dict("f32" => Float32, "f16" => Float16, "i32" => Int32, "u32" => UInt32)

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

# ---- names: the Julia spelling of each shared op (`where` is a Julia keyword)

const NAMES = Dict("where" => [:where_, :select], "kernel" => [:Kernel])
candidates(op) = get(NAMES, op, [Symbol(op)])
function resolve(op)
    for s in candidates(op)
        isdefined(Kiln, s) && return getfield(Kiln, s)
    end
    nothing
end

# ---- core -> Julia translation helpers

jdim(k, n) = k >= 0 ? n - k : -k
jshape(s) = Tuple(reverse(s))
jpair(p) = (p[2], p[1])

function numpy_range(n, start, stop, step)
    lo = start < 0 ? max(start + n, 0) : min(start, n)
    hi = stop < 0 ? max(stop + n, 0) : min(stop, n)
    # 0-based [lo, hi) step -> Julia 1-based inclusive range
    hi <= lo ? (lo+1:step:lo) : (lo+1:step:hi)
end

function run_op(f, op, p, ins, dir)
    get(name) = (i = findfirst(x -> x[1] == name, ins); i === nothing ? nothing : ins[i][2])
    x = isempty(ins) ? nothing : ins[1][2]
    nx = x === nothing ? 0 : ndims(Array(x))
    T(k) = TYPES[p[k]]
    if op in ("zeros", "ones")
        return f(jshape(p["shape"]), T("dtype"))
    elseif op == "full"
        return f(jshape(p["shape"]), T("dtype"), p["value"])
    elseif op == "arange"
        return f(p["start"], p["stop"], p["step"], T("dtype"))
    elseif op == "random_uniform"
        return f(jshape(p["shape"]), T("dtype"), UInt64(p["seed"]), p["low"], p["high"])
    elseif op == "random_normal"
        return f(jshape(p["shape"]), T("dtype"), UInt64(p["seed"]), p["mean"], p["std"])
    elseif op == "where"
        return f(get("cond"), get("a"), get("b"))
    elseif op == "cast"
        return f(x, T("dtype"))
    elseif op == "matmul"
        return f(get("b"), get("a"))
    elseif op in ("sum", "mean", "max", "min", "var")
        dims = p["axes"] === nothing ? nothing : Tuple(jdim(a, nx) for a in p["axes"])
        return op == "var" ? f(x, dims, p["keepdims"], Int(p["ddof"])) : f(x, dims, p["keepdims"])
    elseif op in ("argmax", "argmin")
        d = p["axis"] === nothing ? nothing : jdim(Int(p["axis"]), nx)
        return f(x, d, p["keepdims"])           # 1-based: shifted back in `result_array`
    elseif op in ("softmax", "log_softmax")
        return f(x, jdim(Int(p["axis"]), nx))
    elseif op == "layer_norm"
        return f(x, get("weight"), get("bias"), Float32(p["eps"]))
    elseif op == "rms_norm"
        return f(x, get("weight"), Float32(p["eps"]))
    elseif op == "batch_norm"
        return f(x, get("mean"), get("var"), get("weight"), get("bias"), Float32(p["eps"]))
    elseif op == "conv2d"
        return f(x, get("w"), get("bias"); stride=jpair(p["stride"]), padding=jpair(p["padding"]),
                 dilation=jpair(p["dilation"]), groups=Int(p["groups"]))
    elseif op in ("max_pool2d", "avg_pool2d")
        return f(x, jpair(p["kernel"]); stride=jpair(p["stride"]), padding=jpair(p["padding"]))
    elseif op == "reshape"
        return f(x, Tuple(d == -1 ? Colon() : d for d in reverse(p["shape"]))...)
    elseif op == "permute"
        n = length(p["axes"])
        core = [a < 0 ? a + n : a for a in p["axes"]]
        return f(x, Tuple(n - core[n-j+1] for j in 1:n))
    elseif op == "transpose"
        return f(x, jdim(Int(p["axis0"]), nx), jdim(Int(p["axis1"]), nx))
    elseif op == "concat"
        return f([t for (_, t) in ins], jdim(Int(p["axis"]), nx))
    elseif op == "slice"
        d = jdim(Int(p["axis"]), nx)
        n = size(Array(x), d)
        return f(x, d, numpy_range(n, Int(p["start"]), Int(p["stop"]), Int(p["step"])))
    elseif op == "index_select"
        return f(x, jdim(Int(p["axis"]), nx), get("indices"))
    elseif op == "gather"
        return f(x, jdim(Int(p["axis"]), nx), get("index"))
    elseif op == "embedding"
        return f(get("weight"), get("ids"))
    elseif op == "rope"
        return f(x, Int(p["pos_offset"]), Float32(p["base"]))
    elseif op == "attention"
        s = p["scale"] === nothing ? nothing : Float32(p["scale"])
        return f(get("q"), get("k"), get("v"), p["causal"], s)
    elseif op == "kernel"
        k = f(read(joinpath(dir, p["source"]), String), p["entry"])
        uni = p["uniforms"] === nothing ? UInt8[] : hex2bytes(p["uniforms"])
        Kiln.dispatch(k, [t for (_, t) in ins], Tuple(p["workgroups"]); uniforms=uni)
        return ins[p["output"]+1][2]
    elseif haskey(p, "scalar")
        return p["scalar_first"] ? f(p["scalar"], x) : f(x, p["scalar"])
    elseif length(ins) == 2
        return f(get("a"), get("b"))
    else
        return f(x)
    end
end

# Inputs that hold indices are 0-based in the vectors and 1-based in Julia.
const INDEX_INPUTS = Dict("index_select" => "indices", "gather" => "index", "embedding" => "ids")

function upload(op, dir, s::TSpec)
    A = read_array(dir, s)
    if get(INDEX_INPUTS, op, "") == s.name
        A = A .+ one(eltype(A))
    end
    KilnArray(A)
end

function result_array(op, y)
    A = Array(y)
    op in ("argmax", "argmin") ? A .- one(eltype(A)) : A
end

close_enough(g, w, atol, rtol) = (isnan(g) && isnan(w)) || g == w || abs(g - w) <= atol + rtol * abs(w)

function check(c::Case, dir, y)
    A = result_array(c.op, y)
    bytes = collect(reinterpret(UInt8, vec(A)))
    digest = bytes2hex(sha256(bytes))
    if eltype(A) != c.out.T || size(A) != jshape(c.out.shape)
        return "fail", digest, "output $(eltype(A)) $(size(A)), expected $(c.out.T) $(jshape(c.out.shape)) (Julia order)"
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
    fns = Dict(op => resolve(op) for op in ops)
    missing_ops = [op for op in ops if fns[op] === nothing]
    rows = String[]
    npass = 0
    for c in cases
        f = get(fns, c.op, nothing)
        status, digest, msg = if f === nothing
            "missing", "", "op $(c.op) is not defined by Kiln.jl (tried $(candidates(c.op)))"
        else
            try
                ins = [(s.name, upload(c.op, dir, s)) for s in c.inputs]
                y = run_op(f, c.op, c.params, ins, dir)
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

main(ARGS)

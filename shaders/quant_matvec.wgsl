// y[m, n] = sum_k x[m, k] * W[n, k] for few rows of x (decode): W quantized [N, K] (rows of
// K/32 blocks). TPR threads share one W row, striding over its units (8 values each) so that
// neighbouring threads read neighbouring words; a workgroup does 256 / TPR W rows for MT rows of
// x at once (each W unit decoded once, used MT times), then sums each row's TPR partial sums in
// workgroup memory in a fixed order (deterministic). Accumulates in f32.
//
// Optional fusions (compile-time flags), so that a decoder layer's matvecs need no separate
// norm, activation or residual dispatches:
//  - NORM: x is RMS-normalised first (x * g / sqrt(mean(x^2) + eps)): every workgroup computes
//    the inverse RMS of its x rows itself (K values, cheap next to the W rows it reads), the
//    products use x * g and the sum is scaled once at the end;
//  - GLU: W holds 2N rows, gate rows [0, N) then up rows [N, 2N); out = silu(gate) * up;
//  - RES: out = T(sum) + r (a residual connection, r shaped like out);
//  - ROPE: W is a decoder layer's stacked Q, K and V rows ((NH + 2 NKV) heads of D) and the
//    epilogue is rope_kv_cache.wgsl's: the queries RoPE'd into out [NH, M, D], the keys RoPE'd
//    and the values copied into the KV caches at rows pos .. pos + M. Rotate-half pairs rows
//    (i, i + D/2) of a head, so slots 2j and 2j + 1 of a workgroup take such a pair (row n of
//    the others is wg * RPW + slot); the even slot's lane 0 rotates both sums. The sums are
//    rounded to T first, as the separate kernels' stored QKV is: the same bits as the two.
struct Params {
    m: u32,       // rows of x
    n: u32,       // outputs per x row (rows of W, half of them under GLU)
    k: u32,       // values per row
    blocks: u32,  // k / 32
    row_h: u32,   // halfwords per W row
    eps: f32,     // NORM's epsilon
    pad1: u32,
    pad2: u32,
{{ROPE_FIELDS}}}

@group(0) @binding(0) var<storage, read> w: array<u32>;
// x read four values at a time: rows start at multiples of K (a multiple of 32) and the values
// a unit pairs with start at multiples of 4.
@group(0) @binding(1) var<storage, read> x: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
// NORM's weight [K] (bound to x when unused).
@group(0) @binding(3) var<storage, read> g: array<vec4<{{T}}>>;
// RES's residual, shaped like out (bound to x when unused).
@group(0) @binding(4) var<storage, read> r: array<{{T}}>;
@group(0) @binding({{P_SLOT}}) var<uniform> p: Params;

const TPR: u32 = {{TPR}}u;
const RPW: u32 = 256u / TPR;
const MT: u32 = {{MT}}u;
const NORM: bool = {{NORM}};
const GLU: bool = {{GLU}};
const RES: bool = {{RES}};
const ROPE: bool = {{ROPE}};
// Accumulators per x row: the gate and up rows under GLU.
const NA: u32 = select(1u, 2u, GLU);

var<workgroup> red: array<f32, {{RED}}>;
var<workgroup> inv_rms: array<f32, MT>;

// Four values of x from column c of the row starting at row0 (times g's under NORM).
fn x4(row0: u32, c: u32) -> vec4<f32> {
    let v = vec4<f32>(x[(row0 + c) >> 2u]);
    if (NORM) {
        return v * vec4<f32>(g[c >> 2u]);
    }
    return v;
}

fn silu(v: f32) -> f32 {
    // exp(-v) overflows below -88: the limit, -0 (and v / inf would be NaN at v = -inf).
    return select(v / (1.0 + exp(-v)), -0.0, v < -88.0);
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let lane = li % TPR;
    let slot = li / TPR;
    let wgi = wg.x + wg.y * nwg.x;
    var n = wgi * RPW + slot;
    if (ROPE) {
        n = rope_row(wgi, slot);
    }
    let m0 = wg.z * MT;
    if (NORM) {
        // Sum of squares of each x row, by a fixed tree (deterministic).
        for (var q = 0u; q < MT; q++) {
            var s = 0.0;
            if (m0 + q < p.m) {
                let base = (m0 + q) * p.k / 4u;
                for (var t = li; t < p.k / 4u; t += 256u) {
                    let v = vec4<f32>(x[base + t]);
                    s += dot(v, v);
                }
            }
            red[q * 256u + li] = s;
        }
        workgroupBarrier();
        for (var s = 128u; s > 0u; s >>= 1u) {
            if (li < s) {
                for (var q = 0u; q < MT; q++) {
                    red[q * 256u + li] += red[q * 256u + li + s];
                }
            }
            workgroupBarrier();
        }
        if (li < MT) {
            inv_rms[li] = inverseSqrt(red[li * 256u] / f32(p.k) + p.eps);
        }
        workgroupBarrier();
    }
    var acc: array<f32, {{ACC}}>;
    for (var q = 0u; q < MT * NA; q++) {
        acc[q] = 0.0;
    }
    if (n < p.n) {
        let units = p.blocks * UPB;
        for (var a = 0u; a < NA; a++) {
            let hrow = (n + a * p.n) * p.row_h;
            for (var t = lane; t < units; t += TPR) {
                let b = t / UPB;
                let un = decode_at(hrow, b, t % UPB);
                let kb = b * 32u;
                for (var q = 0u; q < MT; q++) {
                    if (m0 + q < p.m) {
                        let row0 = (m0 + q) * p.k;
                        acc[a * MT + q] += dot(un.a, x4(row0, kb + un.pa)) + dot(un.b, x4(row0, kb + un.pb));
                    }
                }
            }
        }
    }
    workgroupBarrier();
    for (var q = 0u; q < MT * NA; q++) {
        red[q * 256u + li] = acc[q];
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var q = 0u; q < MT * NA; q++) {
                red[q * 256u + li] += red[q * 256u + li + s];
            }
        }
        workgroupBarrier();
    }
    if (ROPE) {
        if (lane == 0u && slot % 2u == 0u && n < p.n) {
            rope_epilogue(n, m0, li);
        }
        return;
    }
    if (lane == 0u && n < p.n) {
        for (var q = 0u; q < MT; q++) {
            if (m0 + q < p.m) {
                var y = red[q * 256u + li];
                if (NORM) {
                    y *= inv_rms[q];
                }
                if (GLU) {
                    var u = red[(MT + q) * 256u + li];
                    if (NORM) {
                        u *= inv_rms[q];
                    }
                    y = silu(y) * u;
                }
                let o = (m0 + q) * p.n + n;
                if (RES) {
                    out[o] = {{T}}(y) + r[o];
                } else {
                    out[o] = {{T}}(y);
                }
            }
        }
    }
}

// ROPE's epilogue for the pair of rows (n, n + half) of x rows m0 .. m0 + MT: their sums are at
// red[q * 256 + li] and red[q * 256 + li + TPR] (the odd slot's lane 0).
fn rope_epilogue(n: u32, m0: u32, li: u32) {
    for (var q = 0u; q < MT; q++) {
        if (m0 + q < p.m) {
            var x0 = red[q * 256u + li];
            var x1 = red[q * 256u + li + TPR];
            if (NORM) {
                x0 *= inv_rms[q];
                x1 *= inv_rms[q];
            }
            rope_store(n, m0 + q, x0, x1);
        }
    }
}

{{ROPE_PART}}

// y[n] = sum_k x[k] * W[n, k] for ONE row of x (decode), W quantized [N, K]: the bandwidth
// variant of quant_matvec.wgsl for large matrices (core/src/ops/quant_matvec_wide.rs picks it).
//
// What it changes against quant_matvec.wgsl, and why:
//  - x (times the norm weight under NORM) is staged once per workgroup in workgroup memory as
//    f32, 32 values per block at a stride of 9 vec4s (the 4-float pad puts the 8 lanes of a
//    quarter-warp, reading 8 neighbouring blocks, on different banks), instead of every unit
//    reading its 8 values from global memory for every W row;
//  - each thread decodes whole blocks: it loads all of a block's words at once (5 for Q4_0 and
//    Q4_1, 9 for Q8_0, independent loads) and reads the scale once per block, not once per unit;
//    U blocks per W row per step, the next step's words loaded before the current step's math
//    (loads in flight while the ALUs work);
//  - nibbles and bytes become f32 through the exponent trick (0x4B000000 | v is 2^23 + v), not
//    integer-to-float conversions (a slow pipe on most GPUs); the values are the same, exactly.
//
// The sums are those of quant_matvec.wgsl with TPR = 4 * TPB bit for bit (up to the driver's
// own choices of fused multiply-adds): its lane l (units l, l + TPR, ...) is this kernel's
// thread l / 4, accumulator component l % 4 (a thread's blocks b, b + TPB, ... hold exactly
// those units), each accumulated in the same order; the same tree then sums the TPR lanes
// (levels TPR/2 .. 4 across threads in workgroup memory, 2 and 1 inside the vec4), and NORM's
// sum of squares follows quant_matvec's 256-thread tree (256 / WG partial sums per thread).
struct Params {
    m: u32,       // rows of x (1)
    n: u32,       // outputs (rows of W, half of them under GLU)
    k: u32,       // values per row
    blocks: u32,  // k / 32
    row_h: u32,   // halfwords per W row
    eps: f32,     // NORM's epsilon
    pad1: u32,
    pad2: u32,
{{ROPE_FIELDS}}}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
// NORM's weight [K] (bound to x when unused).
@group(0) @binding(3) var<storage, read> g: array<vec4<{{T}}>>;
// RES's residual, shaped like out (bound to x when unused).
@group(0) @binding(4) var<storage, read> r: array<{{T}}>;
@group(0) @binding({{P_SLOT}}) var<uniform> p: Params;

const WG: u32 = {{WG}}u;
// Threads per W row (quant_matvec's TPR / 4), W rows per workgroup.
const TPB: u32 = {{TPB}}u;
const RPW: u32 = WG / TPB;
// Blocks per W row a thread decodes per step.
const U: u32 = {{U}}u;
// Words loaded per block, and per step (NA rows x U blocks).
const NW: u32 = {{NW}}u;
const CW: u32 = {{CW}}u;
// quant_matvec's NORM partial sums (of 256 threads) each thread stands for.
const V: u32 = 256u / WG;
// vec4s per block in xs: 8 of values, 1 of padding.
const XB: u32 = 9u;
const NORM: bool = {{NORM}};
const GLU: bool = {{GLU}};
const RES: bool = {{RES}};
// W is a decoder layer's stacked Q, K and V rows and the epilogue RoPEs and writes the KV caches
// (quant_matvec_rope.wgsl): slots 2j and 2j + 1 take a pair of rotated rows (rope_row).
const ROPE: bool = {{ROPE}};

// Staged x, then (after the products) the per-thread partial sums.
var<workgroup> xs: array<vec4<f32>, {{SH}}>;
var<workgroup> red: array<f32, WG>;
var<workgroup> inv_rms: f32;

fn silu(v: f32) -> f32 {
    // exp(-v) overflows below -88: the limit, -0 (and v / inf would be NaN at v = -inf).
    return select(v / (1.0 + exp(-v)), -0.0, v < -88.0);
}

// Values 4 i .. 4 i + 3 of block b of x (times g under NORM), as staged.
fn xval(b: u32, i: u32) -> vec4<f32> {
    return xs[b * XB + i];
}

// Four nibbles of q (bits s, s + 8, s + 16, s + 24) as f32, minus `off` (exact: 2^23 + v - off).
fn nib4(q: u32, s: u32, off: f32) -> vec4<f32> {
    let v = ((vec4<u32>(q) >> vec4<u32>(s, s + 8u, s + 16u, s + 24u)) & vec4<u32>(0xfu)) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(v) - vec4<f32>(8388608.0 + off);
}

// The four signed bytes of q as f32 (v ^ 0x80 is v + 128 for a signed byte v).
fn sbyte4(q: u32) -> vec4<f32> {
    let v = (((vec4<u32>(q) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu)) ^ vec4<u32>(0x80u)) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(v) - vec4<f32>(8388736.0);
}

// The words of this thread's blocks b0, b0 + TPB, ..., b0 + (U - 1) TPB of the W rows starting
// at halfwords h0 and h1 (the up row under GLU); zeros past the row's end.
fn load_step(h0: u32, h1: u32, b0: u32) -> array<u32, CW> {
    var v: array<u32, CW>;
{{LOAD}}
    return v;
}

@compute @workgroup_size({{WG}})
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let j = li % TPB;
    let wgi = wg.x + wg.y * nwg.x;
    var n = wgi * RPW + li / TPB;
    if (ROPE) {
        n = rope_row(wgi, li / TPB);
    }
    let live = n < p.n;
    let h0 = select(0u, n * p.row_h, live);
    let h1 = select(h0, (n + p.n) * p.row_h, live && GLU);
    // The first step's words are requested before x is staged (they do not depend on it).
    var cur: array<u32, CW>;
    if (live) {
        cur = load_step(h0, h1, j);
    }
    // Stage x (times g); under NORM also quant_matvec's sums of squares: its thread v = li + WG i
    // summed float4s v, v + 256, ...
    let k4 = p.k / 4u;
    var part: array<f32, V>;
    for (var t0 = 0u; t0 < k4; t0 += 256u) {
        for (var i = 0u; i < V; i++) {
            let t = t0 + li + WG * i;
            if (t < k4) {
                let v = vec4<f32>(x[t]);
                if (NORM) {
                    part[i] += dot(v, v);
                }
                if (NORM) {
                    xs[(t >> 3u) * XB + (t & 7u)] = v * vec4<f32>(g[t]);
                } else {
                    xs[(t >> 3u) * XB + (t & 7u)] = v;
                }
            }
        }
    }
    if (NORM) {
        for (var s = V / 2u; s > 0u; s >>= 1u) {
            for (var i = 0u; i < s; i++) {
                part[i] += part[i + s];
            }
        }
        red[li] = part[0];
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (li < s) {
                red[li] += red[li + s];
            }
            workgroupBarrier();
        }
        if (li == 0u) {
            inv_rms = inverseSqrt(red[0] / f32(p.k) + p.eps);
        }
    }
    workgroupBarrier();
    // Component c of acc0 (gate / plain row) and acc1 (up row): quant_matvec's lane 4 j + c.
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    if (live) {
        for (var b0 = j; b0 < p.blocks; b0 += U * TPB) {
            let nxt = load_step(h0, h1, b0 + U * TPB);
{{COMPUTE}}
            cur = nxt;
        }
    }
    // xs is free again: the per-thread partial sums, then the tree across threads.
    workgroupBarrier();
    xs[li] = acc0;
    if (GLU) {
        xs[WG + li] = acc1;
    }
    workgroupBarrier();
    for (var s = TPB / 2u; s > 0u; s >>= 1u) {
        if (j < s) {
            xs[li] += xs[li + s];
            if (GLU) {
                xs[WG + li] += xs[WG + li + s];
            }
        }
        workgroupBarrier();
    }
    if (ROPE) {
        // The even slot's thread 0 finishes the pair: its row's sum and the odd slot's.
        if (j == 0u && (li / TPB) % 2u == 0u && live) {
            let a = xs[li];
            let b = xs[li + TPB];
            var y0 = (a.x + a.z) + (a.y + a.w);
            var y1 = (b.x + b.z) + (b.y + b.w);
            if (NORM) {
                y0 *= inv_rms;
                y1 *= inv_rms;
            }
            rope_store(n, 0u, y0, y1);
        }
        return;
    }
    if (j == 0u && live) {
        let a = xs[li];
        var y = (a.x + a.z) + (a.y + a.w);
        if (NORM) {
            y *= inv_rms;
        }
        if (GLU) {
            let b = xs[WG + li];
            var u = (b.x + b.z) + (b.y + b.w);
            if (NORM) {
                u *= inv_rms;
            }
            y = silu(y) * u;
        }
        if (RES) {
            out[n] = {{T}}(y) + r[n];
        } else {
            out[n] = {{T}}(y);
        }
    }
}

{{ROPE_PART}}

// y[m, n] = sum_k x[m, k] * W[n, k] for few rows of x (decode), W in a K format (Q4_K, Q5_K,
// Q6_K: 256-value super-blocks): the K formats' counterpart of quant_matvec_wide.wgsl
// (core/src/ops/quant_matvec_k.rs picks it).
//
// Layout of the work, after llama.cpp's Vulkan mul_mat_vec_q4_k / q6_k:
//  - 8 lanes share a super-block: lane l takes values 4l .. 4l + 3 of each of its 8 groups of
//    32, so a K format's quant words are read as whole words, 8 neighbouring lanes on 8
//    neighbouring words (one 32-byte sector); the scale words are the same for the 8 lanes (one
//    broadcast load) and each group's scale is decoded once per lane (once per 4 values, not
//    per value);
//  - a slot of TPS = 8 G lanes owns NR = 2 W rows (two outputs, or under GLU the gate and up
//    rows of one): its G lane groups take super-blocks g, g + G, ... of both rows, so every x
//    value read from workgroup memory serves 2 W rows, each x row staged once per workgroup
//    (times the norm weight under NORM), MT rows of x at a time;
//  - the next super-block's words are loaded before the current one's math (loads in flight
//    while the ALUs work); nibbles become f32 through the exponent trick (2^23 + v), exactly.
// Each value is ggml's dequantized weight (d * sc first, then * q, minus dmin * m: the same f32
// values as dequantize), times x, summed in f32 per lane, then across the slot's lanes by a
// fixed tree in workgroup memory (deterministic). The result is within (K + 2) 2^-24 sum |x w|
// of the exact one, as the other matvec kernels'.
struct Params {
    m: u32,       // rows of x
    n: u32,       // outputs per x row (rows of W, half of them under GLU)
    k: u32,       // values per row
    nsb: u32,     // k / 256
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
// Lane groups per slot, lanes per slot, slots per workgroup.
const G: u32 = {{G}}u;
const TPS: u32 = 8u * G;
const SLOTS: u32 = WG / TPS;
// Rows of x per workgroup.
const MT: u32 = {{MT}}u;
// Words one lane loads per super-block of one W row.
const NW: u32 = {{NW}}u;
const NORM: bool = {{NORM}};
const GLU: bool = {{GLU}};
const RES: bool = {{RES}};
// W is (part of) a decoder layer's stacked Q, K and V rows and the epilogue RoPEs and writes the
// KV caches (quant_matvec_rope.wgsl): slot j takes pair j's two rows (i and i + half of a head).
const ROPE: bool = {{ROPE}};
// W rows a workgroup (quant_matvec_rope.wgsl's rope_row, which this kernel does not call).
const RPW: u32 = 2u * SLOTS;

// Staged x rows (vec4s of row q at q * k / 4).
var<workgroup> xs: array<vec4<f32>, {{SH}}>;
// Per-lane sums [2 rows][MT][WG]; first NORM's sums of squares [MT][WG].
var<workgroup> red: array<f32, {{RED}}>;
var<workgroup> inv_rms: array<f32, MT>;

fn silu(v: f32) -> f32 {
    // exp(-v) overflows below -88: the limit, -0 (and v / inf would be NaN at v = -inf).
    return select(v / (1.0 + exp(-v)), -0.0, v < -88.0);
}

// Bits s .. of each byte of q, masked.
fn b4(q: u32, s: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(q) >> vec4<u32>(s, s + 8u, s + 16u, s + 24u)) & vec4<u32>(mask);
}

// Small integers (< 2^23) to f32 minus `off`, exactly: 2^23 + v - (2^23 + off).
fn cvt4(v: vec4<u32>, off: f32) -> vec4<f32> {
    return bitcast<vec4<f32>>(v | vec4<u32>(0x4B000000u)) - vec4<f32>(8388608.0 + off);
}

// The 32 bits at halfword 2i + 1 (odd) or 2i (even) from the words i and i + 1.
fn al(lo: u32, hi: u32, odd: bool) -> u32 {
    return select(lo, (lo >> 16u) | (hi << 16u), odd);
}

// Lane l's words of super-block sb of the W row at halfword hrow (zeros past the row's end).
fn load_sb(hrow: u32, sb: u32, l: u32) -> array<u32, NW> {
    var v: array<u32, NW>;
    if (sb < p.nsb) {
        let hb = hrow + sb * BLOCK_H;
{{LOAD}}
    }
    return v;
}

@compute @workgroup_size({{WG}})
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let j = li % TPS;
    let grp = j / 8u;
    let l = j % 8u;
    let slot = (wg.x + wg.y * nwg.x) * SLOTS + li / TPS;
    // The slot's W rows: outputs 2 slot and 2 slot + 1, or slot's gate and up rows, or under
    // ROPE pair slot's rows of its head.
    var r0 = select(2u * slot, slot, GLU);
    var r1 = select(2u * slot + 1u, slot + p.n, GLU);
{{ROPE_ROWS}}
    let live0 = r0 < p.n;
    let live1 = select(r1 < p.n, live0, GLU || ROPE);
    // A row past N reads row r0's words (computed, never stored).
    let h0 = select(0u, r0 * p.row_h, live0);
    let h1 = select(h0, r1 * p.row_h, live1);
    let m0 = wg.z * MT;
    let k4 = p.k / 4u;
    var cur0: array<u32, NW>;
    var cur1: array<u32, NW>;
    if (live0) {
        cur0 = load_sb(h0, grp, l);
        cur1 = load_sb(h1, grp, l);
    }
    // Stage MT rows of x (zeros past M), times g under NORM, summing squares as we go.
    var part: array<f32, MT>;
    for (var q = 0u; q < MT; q++) {
        let live_x = m0 + q < p.m;
        for (var t = li; t < k4; t += WG) {
            var v = vec4<f32>(0.0);
            if (live_x) {
                v = vec4<f32>(x[(m0 + q) * k4 + t]);
            }
            if (NORM) {
                part[q] += dot(v, v);
                v *= vec4<f32>(g[t]);
            }
            xs[q * k4 + t] = v;
        }
    }
    if (NORM) {
        for (var q = 0u; q < MT; q++) {
            red[q * WG + li] = part[q];
        }
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (li < s) {
                for (var q = 0u; q < MT; q++) {
                    red[q * WG + li] += red[q * WG + li + s];
                }
            }
            workgroupBarrier();
        }
        if (li < MT) {
            inv_rms[li] = inverseSqrt(red[li * WG] / f32(p.k) + p.eps);
        }
    }
    workgroupBarrier();
{{ACC_DECL}}
    if (live0) {
        for (var sb = grp; sb < p.nsb; sb += G) {
            let nxt0 = load_sb(h0, sb + G, l);
            let nxt1 = load_sb(h1, sb + G, l);
            let xb = sb * 64u + l;
{{COMPUTE}}
            cur0 = nxt0;
            cur1 = nxt1;
        }
    }
    // The per-lane sums, then the tree across the slot's lanes.
    workgroupBarrier();
{{RED_STORE}}
    workgroupBarrier();
    for (var s = TPS / 2u; s > 0u; s >>= 1u) {
        if (j < s) {
            for (var e = 0u; e < 2u * MT; e++) {
                red[e * WG + li] += red[e * WG + li + s];
            }
        }
        workgroupBarrier();
    }
    if (j != 0u || !live0) {
        return;
    }
    for (var q = 0u; q < MT; q++) {
        if (m0 + q >= p.m) {
            break;
        }
        var y0 = red[q * WG + li];
        var y1 = red[(MT + q) * WG + li];
        if (NORM) {
            y0 *= inv_rms[q];
            y1 *= inv_rms[q];
        }
        if (ROPE) {
            rope_store(r0, m0 + q, y0, y1);
        } else if (GLU) {
            let o = (m0 + q) * p.n + slot;
            let y = silu(y0) * y1;
            if (RES) {
                out[o] = {{T}}(y) + r[o];
            } else {
                out[o] = {{T}}(y);
            }
        } else {
            let o = (m0 + q) * p.n + r0;
            if (RES) {
                out[o] = {{T}}(y0) + r[o];
            } else {
                out[o] = {{T}}(y0);
            }
            if (live1) {
                if (RES) {
                    out[o + 1u] = {{T}}(y1) + r[o + 1u];
                } else {
                    out[o + 1u] = {{T}}(y1);
                }
            }
        }
    }
}

{{ROPE_PART}}

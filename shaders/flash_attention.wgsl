// Flash attention (ops/attention.rs): a workgroup takes BR query rows of one batch entry, one row
// per thread, and walks the keys BC at a time. Each K and V tile is loaded once into workgroup
// memory and read by all BR rows (every thread reads the same element at the same time: a
// broadcast, no bank conflicts). Scores exist only 16 at a time in registers: the online softmax
// keeps a running maximum m and sum l per row, rescaling the output accumulators when m grows,
// so the Lq x Lk score matrix is never written.
// Scores are kept in base 2 (q is pre-scaled by scale * log2(e), exp2 in place of exp).
// Causal (top-left aligned: key j > query i masked): the workgroup stops after the last key its
// last row sees, so fully masked tiles are never loaded. The optional additive mask
// (HAS_MASK) is read at [batch, i, j] through its broadcast strides. A row whose every key is
// masked (no keys, or all -inf) gives zeros, as a row with Lk = 0 always did.
// D and Dv are padded to vec4s (DP, DVP of them) with zeros; floats in f32 (f16 widened on load).
{{ENABLE}}
struct Params {
    lq: u32,
    lk: u32,
    d: u32,
    dv: u32,
    nqb: u32,      // query blocks per batch entry
    blocks: u32,   // batch * nqb
    causal: u32,
    scale2: f32,   // scale * log2(e)
    msq: u32,      // mask stride over queries (0 when broadcast)
    msk: u32,      // mask stride over keys
    brank: u32,
    pad0: u32,
    bshape: array<vec4<u32>, 2>,
    qstride: array<vec4<u32>, 2>,
    kstride: array<vec4<u32>, 2>,
    vstride: array<vec4<u32>, 2>,
    mstride: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<storage, read> q: array<{{T}}>;
@group(0) @binding(1) var<storage, read> k: array<{{T}}>;
@group(0) @binding(2) var<storage, read> v: array<{{T}}>;
@group(0) @binding(3) var<storage, read> mask: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(5) var<uniform> p: Params;

const BR = {{BR}}u;
const BC = {{BC}}u;
const DP = {{DP}}u;
const DVP = {{DVP}}u;
const HAS_MASK = {{HAS_MASK}};
const SUB = 16u;
const LOWEST = -3.40282347e38f;
const LOG2E = 1.44269504f;

var<workgroup> kt: array<vec4<f32>, BC * DP>;
var<workgroup> vt: array<vec4<f32>, BC * DVP>;

// Element c*4..c*4+3 of a row of `n` values at `base`, zero past n.
fn load4k(base: u32, c: u32, n: u32) -> vec4<f32> {
    var r = vec4<f32>(0.0);
    for (var x = 0u; x < 4u; x++) {
        if (c * 4u + x < n) {
            r[x] = f32(k[base + c * 4u + x]);
        }
    }
    return r;
}

fn load4v(base: u32, c: u32, n: u32) -> vec4<f32> {
    var r = vec4<f32>(0.0);
    for (var x = 0u; x < 4u; x++) {
        if (c * 4u + x < n) {
            r[x] = f32(v[base + c * 4u + x]);
        }
    }
    return r;
}

@compute @workgroup_size({{BR}})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    if (block >= p.blocks) {
        return;
    }
    // The last (for causal, the longest) query blocks first, so the short ones fill the tail.
    let qb = p.nqb - 1u - block % p.nqb;
    let bi = block / p.nqb;
    var qoff = 0u;
    var koff = 0u;
    var voff = 0u;
    var moff = 0u;
    var r = bi;
    for (var t = 0u; t < p.brank; t++) {
        let dd = p.brank - 1u - t;
        let a = dd / 4u;
        let s = dd % 4u;
        let ci = r % p.bshape[a][s];
        r = r / p.bshape[a][s];
        qoff += ci * p.qstride[a][s];
        koff += ci * p.kstride[a][s];
        voff += ci * p.vstride[a][s];
        moff += ci * p.mstride[a][s];
    }
    let i = qb * BR + lid;
    let row_ok = i < p.lq;
    // Keys this row sees, and keys any row of the block sees.
    var nk = p.lk;
    var nk_block = p.lk;
    if (p.causal != 0u) {
        nk = min(p.lk, i + 1u);
        nk_block = min(p.lk, min(p.lq, qb * BR + BR));
    }
    if (!row_ok) {
        nk = 0u;
    }
    var qr: array<vec4<f32>, DP>;
    if (row_ok) {
        let base = qoff + i * p.d;
        for (var c = 0u; c < DP; c++) {
            var x4 = vec4<f32>(0.0);
            for (var x = 0u; x < 4u; x++) {
                if (c * 4u + x < p.d) {
                    x4[x] = f32(q[base + c * 4u + x]);
                }
            }
            qr[c] = x4 * p.scale2;
        }
    }
    var acc: array<vec4<f32>, DVP>;
    var m = LOWEST;
    var l = 0.0;
    for (var j0 = 0u; j0 < nk_block; j0 += BC) {
        workgroupBarrier();
        for (var e = lid; e < BC * DP; e += BR) {
            let j = e / DP;
            var x4 = vec4<f32>(0.0);
            if (j0 + j < p.lk) {
                x4 = load4k(koff + (j0 + j) * p.d, e % DP, p.d);
            }
            kt[e] = x4;
        }
        for (var e = lid; e < BC * DVP; e += BR) {
            let j = e / DVP;
            var x4 = vec4<f32>(0.0);
            if (j0 + j < p.lk) {
                x4 = load4v(voff + (j0 + j) * p.dv, e % DVP, p.dv);
            }
            vt[e] = x4;
        }
        workgroupBarrier();
        // Keys of this tile the row sees: [0, nvalid).
        let nvalid = min(BC, max(nk, j0) - j0);
        for (var s0 = 0u; s0 < nvalid; s0 += SUB) {
            var sc: array<f32, SUB>;
            var mnew = m;
            for (var jj = 0u; jj < SUB; jj++) {
                let j = s0 + jj;
                var s = 0.0;
                for (var c = 0u; c < DP; c++) {
                    s += dot(qr[c], kt[j * DP + c]);
                }
                if (HAS_MASK) {
                    if (j < nvalid) {
                        s += f32(mask[moff + i * p.msq + (j0 + j) * p.msk]) * LOG2E;
                    }
                }
                // A key past the row's end leaves the maximum alone (and is skipped below).
                if (j >= nvalid) {
                    s = LOWEST;
                }
                sc[jj] = s;
                mnew = max(mnew, s);
            }
            let alpha = exp2(m - mnew);
            m = mnew;
            l *= alpha;
            for (var c = 0u; c < DVP; c++) {
                acc[c] *= alpha;
            }
            for (var jj = 0u; jj < SUB; jj++) {
                let j = s0 + jj;
                // Skipped, not weighted by 0, so a NaN or inf in a masked-out value stays out.
                if (j < nvalid) {
                    let pj = exp2(sc[jj] - m);
                    l += pj;
                    for (var c = 0u; c < DVP; c++) {
                        acc[c] = fma(vec4<f32>(pj), vt[j * DVP + c], acc[c]);
                    }
                }
            }
        }
    }
    if (row_ok) {
        let inv = select(0.0, 1.0 / l, l > 0.0);
        let base = (bi * p.lq + i) * p.dv;
        for (var c = 0u; c < DVP; c++) {
            let o = acc[c] * inv;
            for (var x = 0u; x < 4u; x++) {
                if (c * 4u + x < p.dv) {
                    out[base + c * 4u + x] = {{T}}(o[x]);
                }
            }
        }
    }
}

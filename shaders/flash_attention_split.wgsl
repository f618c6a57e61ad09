// Split-KV attention for few queries against many keys (decode; ops/attention/): workgroup
// (row, split) takes keys [split * CHUNK, split * CHUNK + CHUNK) of one query row and writes its
// partial result (running max m, sum l, unnormalised output) for flash_attention_combine.wgsl.
// One workgroup per row would leave most of the GPU idle when rows are few.
// Keys go KC at a time: the KC x D block of K is one contiguous range, copied coalesced into
// workgroup memory with rows padded to D + 1 floats (thread t then reads key t's row without
// bank conflicts); thread t < KC scores key t; the workgroup reduces the block's max and sum (a
// fixed tree: deterministic); each thread owns output dims lid, lid + WG, ... (DVT) and reads V
// coalesced. Causal (top-left aligned) and the additive mask as in flash_attention.wgsl; a
// split past the row's last key writes an empty partial (m lowest, l 0).
{{ENABLE}}
struct Params {
    lq: u32,
    lk: u32,
    d: u32,
    dv: u32,
    rows: u32,     // batch * lq
    nsplit: u32,
    chunk: u32,    // keys per split, a multiple of KC
    causal: u32,
    scale: f32,
    msq: u32,
    msk: u32,
    brank: u32,
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
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;
{{ATTENTION_COMMON}}

const WG = 64u;
const KC = {{KC}}u;
const DS = {{DS}}u; // D + 1
const D = DS - 1u;
const DVT = {{DVT}}u;
const HAS_MASK = {{HAS_MASK}};
const LOWEST = -3.4028234e38f;

var<workgroup> ks: array<f32, KC * DS>;
var<workgroup> qs: array<f32, DS>;
var<workgroup> red: array<f32, WG>;
var<workgroup> probs: array<f32, KC>;

fn reduce(lid: u32, x: f32, take_max: bool) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h = h / 2u) {
        if (lid < h) {
            if (take_max) {
                red[lid] = max(red[lid], red[lid + h]);
            } else {
                red[lid] = red[lid] + red[lid + h];
            }
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    if (g >= p.rows * p.nsplit) {
        return;
    }
    let row = g / p.nsplit;
    let split = g % p.nsplit;
    let i = row % p.lq;
    let bi = row / p.lq;
    let offs = batch_offsets(bi);
    let qoff = offs.x;
    let koff = offs.y;
    let voff = offs.z;
    let moff = offs.w;
    var nk = p.lk;
    if (p.causal != 0u) {
        nk = min(p.lk, i + 1u);
    }
    var jbeg = split * p.chunk;
    let jend = min(nk, jbeg + p.chunk);
{{WINDOW}}    for (var t = lid; t < p.d; t += WG) {
        qs[t] = f32(q[qoff + i * p.d + t]) * p.scale;
    }
    var m = LOWEST;
    var l = 0.0;
    var acc: array<f32, DVT>;
    for (var j0 = jbeg; j0 < jend; j0 += KC) {
        let n = min(KC, jend - j0);
        workgroupBarrier();
        let base = koff + j0 * p.d;
        // Four loads in flight per thread before the first store waits on one.
        let ne = n * p.d;
        for (var e = lid; e < ne; e += 4u * WG) {
            let e1 = e + WG;
            let e2 = e + 2u * WG;
            let e3 = e + 3u * WG;
            let x0 = f32(k[base + e]);
            let x1 = f32(k[base + min(e1, ne - 1u)]);
            let x2 = f32(k[base + min(e2, ne - 1u)]);
            let x3 = f32(k[base + min(e3, ne - 1u)]);
            ks[(e / D) * DS + e % D] = x0;
            if (e1 < ne) {
                ks[(e1 / D) * DS + e1 % D] = x1;
            }
            if (e2 < ne) {
                ks[(e2 / D) * DS + e2 % D] = x2;
            }
            if (e3 < ne) {
                ks[(e3 / D) * DS + e3 % D] = x3;
            }
        }
        workgroupBarrier();
        var s = LOWEST;
        let valid = lid < n;
        if (valid) {
            var dot = 0.0;
            for (var t = 0u; t < D; t++) {
                dot = fma(qs[t], ks[lid * DS + t], dot);
            }
            s = dot;
{{SOFTCAP}}            if (HAS_MASK) {
                s += f32(mask[moff + i * p.msq + (j0 + lid) * p.msk]);
            }
        }
        let m_new = max(m, reduce(lid, s, true));
        let alpha = k_exp(m - m_new);
        let e = select(0.0, k_exp(s - m_new), valid);
        if (lid < KC) {
            probs[lid] = e;
        }
        l = l * alpha + reduce(lid, e, false);
        m = m_new;
        for (var t = 0u; t < DVT; t++) {
            let dd = lid + t * WG;
            if (dd < p.dv) {
                // Four independent sums: four loads of V in flight.
                var s0 = 0.0;
                var s1 = 0.0;
                var s2 = 0.0;
                var s3 = 0.0;
                let vb = voff + j0 * p.dv + dd;
                var jj = 0u;
                for (; jj + 4u <= n; jj += 4u) {
                    s0 = fma(probs[jj], f32(v[vb + jj * p.dv]), s0);
                    s1 = fma(probs[jj + 1u], f32(v[vb + (jj + 1u) * p.dv]), s1);
                    s2 = fma(probs[jj + 2u], f32(v[vb + (jj + 2u) * p.dv]), s2);
                    s3 = fma(probs[jj + 3u], f32(v[vb + (jj + 3u) * p.dv]), s3);
                }
                for (; jj < n; jj++) {
                    s0 = fma(probs[jj], f32(v[vb + jj * p.dv]), s0);
                }
                acc[t] = acc[t] * alpha + ((s0 + s1) + (s2 + s3));
            }
        }
    }
    let w = p.dv + 2u;
    let o = g * w;
    if (lid == 0u) {
        part[o] = m;
        part[o + 1u] = l;
    }
    for (var t = 0u; t < DVT; t++) {
        let dd = lid + t * WG;
        if (dd < p.dv) {
            part[o + 2u + dd] = acc[t];
        }
    }
}

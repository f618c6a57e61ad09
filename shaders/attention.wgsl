// Fused scaled dot-product attention, one workgroup per query row (batch b, query i):
//   out[b, i, :] = sum_j softmax_j(q[b, i] . k[b, j] * scale) v[b, j, :]
// Keys are taken WG at a time: each thread scores one key, the workgroup reduces the chunk's max
// and sum (a fixed tree, so results are deterministic), and an online softmax rescales the
// running sum and the output accumulators (each thread owns output dims lid, lid + WG, ...,
// DVT of them). Causal rows stop at key i (top-left aligned). A row without keys gives zeros.
// Floats are computed in f32 (f16 data widened on load).
{{ENABLE}}
struct Params {
    lq: u32,
    lk: u32,
    d: u32,
    dv: u32,
    rows: u32,    // batch * lq
    causal: u32,
    scale: f32,
    brank: u32,
    bshape: array<vec4<u32>, 2>,
    qstride: array<vec4<u32>, 2>,
    kstride: array<vec4<u32>, 2>,
    vstride: array<vec4<u32>, 2>,
    mstride: array<vec4<u32>, 2>, // no mask here: zeros (the shared batch_offsets reads it)
}

@group(0) @binding(0) var<storage, read> q: array<{{T}}>;
@group(0) @binding(1) var<storage, read> k: array<{{T}}>;
@group(0) @binding(2) var<storage, read> v: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(4) var<uniform> p: Params;
{{ATTENTION_COMMON}}

const WG = 64u;
const DVT = {{DVT}}u;
const LOWEST = -3.4028234e38f;

var<workgroup> red: array<f32, WG>;
var<workgroup> probs: array<f32, WG>;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let i = row % p.lq;
    let bi = row / p.lq;
    let offs = batch_offsets(bi);
    let qoff = offs.x;
    let koff = offs.y;
    let voff = offs.z;
    let qrow = qoff + i * p.d;
    var nk = p.lk;
    if (p.causal != 0u) {
        nk = min(p.lk, i + 1u);
    }
    var m = LOWEST;
    var l = 0.0;
    var acc: array<f32, DVT>;
    for (var j0 = 0u; j0 < nk; j0 += WG) {
        let j = j0 + lid;
        let valid = j < nk;
        var s = LOWEST;
        if (valid) {
            var dot = 0.0;
            let krow = koff + j * p.d;
            for (var t = 0u; t < p.d; t++) {
                dot = fma(f32(q[qrow + t]), f32(k[krow + t]), dot);
            }
            s = dot * p.scale;
        }
        red[lid] = s;
        workgroupBarrier();
        for (var h = WG / 2u; h > 0u; h = h / 2u) {
            if (lid < h) {
                red[lid] = max(red[lid], red[lid + h]);
            }
            workgroupBarrier();
        }
        let m_new = max(m, red[0]);
        workgroupBarrier();
        let alpha = k_exp(m - m_new);
        let e = select(0.0, k_exp(s - m_new), valid);
        probs[lid] = e;
        red[lid] = e;
        workgroupBarrier();
        for (var h = WG / 2u; h > 0u; h = h / 2u) {
            if (lid < h) {
                red[lid] = red[lid] + red[lid + h];
            }
            workgroupBarrier();
        }
        l = l * alpha + red[0];
        m = m_new;
        let nchunk = min(WG, nk - j0);
        for (var t = 0u; t < DVT; t++) {
            let dd = lid + t * WG;
            if (dd < p.dv) {
                var sum = 0.0;
                for (var jj = 0u; jj < nchunk; jj++) {
                    sum = fma(probs[jj], f32(v[voff + (j0 + jj) * p.dv + dd]), sum);
                }
                acc[t] = acc[t] * alpha + sum;
            }
        }
        workgroupBarrier();
    }
    let inv = select(0.0, k_div(1.0, l), l > 0.0);
    for (var t = 0u; t < DVT; t++) {
        let dd = lid + t * WG;
        if (dd < p.dv) {
            out[row * p.dv + dd] = {{T}}(acc[t] * inv);
        }
    }
}

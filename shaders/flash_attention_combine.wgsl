// Second pass of split-KV attention (flash_attention_split.wgsl, flash_attention_decode.wgsl):
// one workgroup per query row merges its splits' partials (m_s, l_s, acc_s) into
//   out = sum_s acc_s w_s / sum_s l_s w_s,  w_s = exp(m_s - M),  M = max_s m_s.
// The splits' weights are computed once each, thread t taking splits t, t + WG, ..., into
// workgroup memory (the serial merge had every thread walk all splits' m_s twice, one load
// round trip after another); then each thread owns output dims lid, lid + WG, ... and sums its
// splits in order. Every sum runs in a fixed order given the shape: results do not depend on
// the device. A row with no weight (no keys, or all masked) gives zeros.
{{ENABLE}}
struct Params {
    rows: u32,
    nsplit: u32,   // at most MAXS
    dv: u32,
    pad0: u32,
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

const WG = 64u;
const MAXS = {{MAXS}}u;

var<workgroup> red: array<f32, WG>;
var<workgroup> wts: array<f32, MAXS>;

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
    let w = p.dv + 2u;
    let base = row * p.nsplit * w;
    var mx = -3.4028234e38f;
    for (var s = lid; s < p.nsplit; s += WG) {
        mx = max(mx, part[base + s * w]);
    }
    // Only the first min(nsplit, WG) threads hold a split: the others' entries are the
    // identity (lowest float, 0), so leaving them out changes no bit.
    let nt = min(p.nsplit, WG);
    red[lid] = mx;
    workgroupBarrier();
    for (var t = 0u; t < nt; t++) {
        mx = max(mx, red[t]);
    }
    workgroupBarrier();
    var l = 0.0;
    for (var s = lid; s < p.nsplit; s += WG) {
        let e = k_exp(part[base + s * w] - mx);
        wts[s] = e;
        l += part[base + s * w + 1u] * e;
    }
    red[lid] = l;
    workgroupBarrier();
    l = 0.0;
    for (var t = 0u; t < nt; t++) {
        l += red[t];
    }
    let inv = select(0.0, k_div(1.0, l), l > 0.0);
    for (var dd = lid; dd < p.dv; dd += WG) {
        // Four splits' loads issued together, then summed in split order as one at a time.
        var o = 0.0;
        var s = 0u;
        for (; s + 4u <= p.nsplit; s += 4u) {
            let a = base + s * w + 2u + dd;
            let x0 = part[a];
            let x1 = part[a + w];
            let x2 = part[a + 2u * w];
            let x3 = part[a + 3u * w];
            o = fma(x0, wts[s], o);
            o = fma(x1, wts[s + 1u], o);
            o = fma(x2, wts[s + 2u], o);
            o = fma(x3, wts[s + 3u], o);
        }
        for (; s < p.nsplit; s++) {
            o = fma(part[base + s * w + 2u + dd], wts[s], o);
        }
        out[row * p.dv + dd] = {{T}}(o * inv);
    }
}

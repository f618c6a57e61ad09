// Split-KV combine for few splits (below SERIAL_COMBINE_BELOW, ops/attention/): every thread walks
// the splits itself, which costs less setup than flash_attention_combine.wgsl's parallel merge.
// Second pass of split-KV attention (flash_attention_split.wgsl): one workgroup per query row
// merges its splits' partials (m_s, l_s, acc_s) into softmax-weighted output:
//   out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M),  M = max_s m_s,
// each thread owning output dims lid, lid + WG, ... Splits are merged in order (deterministic).
// A row with no weight (no keys, or all masked) gives zeros.
{{ENABLE}}
struct Params {
    rows: u32,
    nsplit: u32,
    dv: u32,
    pad0: u32,
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

const WG = 64u;

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
    for (var s = 0u; s < p.nsplit; s++) {
        mx = max(mx, part[base + s * w]);
    }
    var l = 0.0;
    for (var s = 0u; s < p.nsplit; s++) {
        l += part[base + s * w + 1u] * k_exp(part[base + s * w] - mx);
    }
    let inv = select(0.0, k_div(1.0, l), l > 0.0);
    for (var dd = lid; dd < p.dv; dd += WG) {
        var o = 0.0;
        for (var s = 0u; s < p.nsplit; s++) {
            o = fma(part[base + s * w + 2u + dd], k_exp(part[base + s * w] - mx), o);
        }
        out[row * p.dv + dd] = {{T}}(o * inv);
    }
}

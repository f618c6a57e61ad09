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
    merge_row(row, lid);
}

fn take(i: u32) -> f32 {
    return part[i];
}

// The softmax step of attention computed through matmuls (ops/attention/): each row of the
// f32 score matrix s = q kᵀ, shape [rows = batch * Lq, Lk], becomes softmax(s * scale) with the
// causal mask applied (key j > query i gets probability 0, top-left aligned). One 256-thread
// workgroup per row (workgroups spread over x and y); fixed fold and tree orders, so repeated runs
// give identical bytes. Causal rows read only their unmasked prefix.
struct Params {
    rows: u32,
    lq: u32,
    lk: u32,
    causal: u32,
    scale: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> s: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> sh: array<f32, 256>;

// The workgroup's fold of each thread's `v`: the maximum, or the sum.
fn tree(lid: u32, v: f32, take_max: bool) -> f32 {
    sh[lid] = v;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w = w >> 1u) {
        if (lid < w) {
            if (take_max) {
                sh[lid] = max(sh[lid], sh[lid + w]);
            } else {
                sh[lid] = sh[lid] + sh[lid + w];
            }
        }
        workgroupBarrier();
    }
    let total = sh[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let i = row % p.lq;
    var n = p.lk;
    if (p.causal != 0u) {
        n = min(p.lk, i + 1u);
    }
    let base = row * p.lk;
    // The scale may be negative: take the maximum of the scaled scores, not of the scores.
    var m = -3.402823e38;
    for (var j = lid; j < n; j += 256u) {
        m = max(m, s[base + j] * p.scale);
    }
    let mx = tree(lid, m, true);
    var acc = 0.0;
    for (var j = lid; j < n; j += 256u) {
        acc += k_exp(s[base + j] * p.scale - mx);
    }
    let total = tree(lid, acc, false);
    for (var j = lid; j < p.lk; j += 256u) {
        var v = 0.0;
        if (j < n) {
            v = k_div(k_exp(s[base + j] * p.scale - mx), total);
        }
        out[base + j] = v;
    }
}

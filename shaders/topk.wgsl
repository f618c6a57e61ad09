// topk: the first k pairs of each sorted row of P (key, index) pairs (sort.rs's network, keys
// complemented for the largest): the values gathered from x (rows x n; their bits kept, NaN
// payloads and the signs of zeros included) and the i32 indices, both rows x k.
{{ENABLE}}
struct Params {
    total: u32, // rows * k
    k: u32,
    n: u32,
    p2: u32,    // P
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read> pairs: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> values: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> indices: array<i32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.total) {
        return;
    }
    let row = t / p.k;
    let c = t - row * p.k;
    let i = pairs[row * p.p2 + c].y;
    values[t] = x[row * p.n + i];
    indices[t] = i32(i);
}

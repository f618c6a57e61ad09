// Sort, step 3: the first n indices of each sorted row of P pairs, as i32 (rows x n).
struct Params {
    total: u32, // rows * n
    n: u32,
    p2: u32,
    pad0: u32,
}

@group(0) @binding(0) var<storage, read> pairs: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.total) {
        return;
    }
    let row = t / p.n;
    let c = t - row * p.n;
    out[t] = i32(pairs[row * p.p2 + c].y);
}

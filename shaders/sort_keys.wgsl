// Sort, step 1: each row of x (rows x n) becomes a row of P (key, index) pairs, P the power of
// two at or above n. The key is an unsigned integer whose order is the sort's total order
// (numpy's: -inf < ... < -0 == +0 < ... < inf < NaN, every NaN alike); descending sorts use its
// complement. The index breaks ties, so no two pairs are equal and any sorting network gives
// the one stable result. Padding pairs (key and index all ones) sort after every real pair.
{{ENABLE}}
struct Params {
    total: u32, // rows * P
    n: u32,
    p2: u32,    // P
    desc: u32,  // all ones for descending, else 0
    pad0: u32,
    pad1: u32,
    pad2: u32,
    pad3: u32,
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> pairs: array<vec2<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

// float_key: sort_key_common.wgsl.
fn key(v: {{T}}) -> u32 {
    {{KEY}}
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.total) {
        return;
    }
    let row = i / p.p2;
    let c = i - row * p.p2;
    if (c < p.n) {
        pairs[i] = vec2<u32>(key(x[row * p.n + c]) ^ p.desc, c);
    } else {
        pairs[i] = vec2<u32>(0xffffffffu, 0xffffffffu);
    }
}

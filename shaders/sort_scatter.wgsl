// The inverse of a permutation: out[perm[i]] = i. perm holds each of 0..n-1 once (an argsort's
// result), so every output element is written exactly once and the result is deterministic.
struct Params {
    n: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> perm: array<i32>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.n) {
        return;
    }
    let j = u32(perm[i]);
    if (j < p.n) {
        out[j] = i32(i);
    }
}

// searchsorted: for each v of x2, the insertion point in the sorted 1-D x1 (m long) by binary
// search in the sort's key order (numpy's: -0 == +0, NaN above +inf, every NaN alike), so NaNs
// at the end of x1 are found as numpy finds them. side left: the first i with !(x1[i] < v);
// right: the first i with v < x1[i].
{{ENABLE}}
struct Params {
    count: u32, // elements of x2
    m: u32,
    right: u32,
    pad0: u32,
}

@group(0) @binding(0) var<storage, read> x1: array<{{T}}>;
@group(0) @binding(1) var<storage, read> x2: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> out: array<i32>;
@group(0) @binding(3) var<uniform> p: Params;

// float_key: sort_key_common.wgsl.
fn key(v: {{T}}) -> u32 {
    {{KEY}}
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.count) {
        return;
    }
    let kv = key(x2[t]);
    var lo = 0u;
    var hi = p.m;
    // At most 32 halvings; the bound keeps the loop finite whatever the data.
    for (var s = 0u; s < 33u && lo < hi; s += 1u) {
        let mid = lo + (hi - lo) / 2u;
        let km = key(x1[mid]);
        var go_right = km < kv;
        if (p.right != 0u) {
            go_right = km <= kv;
        }
        if (go_right) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    out[t] = i32(lo);
}

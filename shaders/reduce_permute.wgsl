// Private gather used by the reductions: out = x permuted so that the reduced axes come last.
// out[i] = x[sum_d c_d * s_d] where c is i's coordinate in the output shape and s the input
// strides taken in output order.
{{ENABLE}}
struct Params {
    n: u32,
    rank: u32,
    shape: array<vec4<u32>, 2>,
    strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.n) {
        return;
    }
    var rem = i;
    var src = 0u;
    for (var k = 0u; k < p.rank; k++) {
        let d = p.rank - 1u - k;
        let n = p.shape[d / 4u][d % 4u];
        src += (rem % n) * p.strides[d / 4u][d % 4u];
        rem = rem / n;
    }
    out[i] = x[src];
}

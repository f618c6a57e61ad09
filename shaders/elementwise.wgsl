// Every elementwise op (unary, binary, comparisons, where, cast, fill, arange) is this one
// kernel: out[i] = EXPR(x0, x1, x2), where xk is input k read at its numpy-broadcast offset.
// Float inputs are read as f32, so f16 data is computed in f32 and rounded once on store.
// SPECIAL is shaders/elementwise_special.wgsl (the k_ functions) where EXPR calls one, else empty.
{{ENABLE}}
struct Params {
    n: u32,
    rank: u32,
    bits: u32,   // scalar operand as the raw bits of its dtype (fill value, arange start)
    bits2: u32,  // second scalar operand (arange step)
    shape: array<vec4<u32>, 2>,
    s0: array<vec4<u32>, 2>,
    s1: array<vec4<u32>, 2>,
    s2: array<vec4<u32>, 2>,
}

{{BINDINGS}}
@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

// Element offsets of output element i in each input (stride 0 on broadcast dimensions).
fn offsets(i: u32) -> vec3<u32> {
    var rem = i;
    var o = vec3<u32>(0u);
    for (var k = 0u; k < p.rank; k++) {
        let d = p.rank - 1u - k;
        let q = d / 4u;
        let r = d % 4u;
        let c = rem % p.shape[q][r];
        rem = rem / p.shape[q][r];
        o += c * vec3<u32>(p.s0[q][r], p.s1[q][r], p.s2[q][r]);
    }
    return o;
}

{{SPECIAL}}
// BODY is one of two forms, rendered by ops/elementwise/kernel.rs:
// - scalar: i = linear thread index; o = offsets(i) (or i when nothing broadcasts); loads; store.
// - vec4 (every operand has the output's shape and n % 4 == 0): thread q moves elements
//   4q..4q+3 with one 16-byte load per input and one store, computing each lane as above.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
{{BODY}}
}

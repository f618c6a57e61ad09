// The composed quant_matmul_fused's SwiGLU (prefill: many rows of x): y [rows, 2n] holds each
// row's gate values then its up values; out [rows, n] = silu(gate) * up, with the same special
// functions as ops::silu and ops::mul (so the same bits as the slice, slice, silu, mul it
// replaces), one dispatch instead of four. f32 only.
struct Params {
    total: u32, // rows * n
    n: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> y: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.total) {
        return;
    }
    let r = i / p.n;
    let j = i - r * p.n;
    let g = y[r * 2u * p.n + j];
    let u = y[r * 2u * p.n + p.n + j];
    out[i] = k_mul(k_silu(g), u);
}

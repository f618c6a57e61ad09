// Inference batch norm: x is [N, C, spatial...] flattened; channel c = (i / spatial) % C.
// out = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c], computed in f32.
{{ENABLE}}
struct Params {
    n: u32,
    c: u32,
    spatial: u32,
    eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read> mu: array<{{T}}>;
@group(0) @binding(2) var<storage, read> va: array<{{T}}>;
{{BINDINGS}}

fn wt(c: u32) -> f32 {
    {{WT}}
}

fn bs(c: u32) -> f32 {
    {{BS}}
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.n) {
        return;
    }
    let c = (i / p.spatial) % p.c;
    let y = k_div(f32(x[i]) - f32(mu[c]), k_sqrt(f32(va[c]) + p.eps)) * wt(c) + bs(c);
    out[i] = {{O}}(y);
}

// The cooperative quantized product's split-K sum (ops/quant_coop.rs): y[i] = the f32 partial
// sums of the SPLITS slices of `part` ([SPLITS, M, N]) added in slice order, plus the residual
// where the product folds one (y + r, r of y's dtype, as quant_coop.wgsl's store), rounded to y's
// dtype once.
struct Params {
    total: u32,   // M N
    splits: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
{{RES_AND_PARAMS}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.total) {
        return;
    }
    var y = part[i];
    for (var s = 1u; s < p.splits; s++) {
        y += part[s * p.total + i];
    }
{{STORE}}
}

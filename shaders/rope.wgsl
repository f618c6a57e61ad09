// Rotary position embedding, rotate-half convention. x is [rows, D] with rows = (...) * L and
// position l = row % L. For i < D/2 the pair (x[i], x[i + D/2]) is rotated by the angle
// (pos_offset + l) * base^(-2i/D):
//   out[i]       = x[i] * cos - x[i + D/2] * sin
//   out[i + D/2] = x[i + D/2] * cos + x[i] * sin
// One thread per pair; f16 data is computed in f32. The angle: rope_common.wgsl.
{{ENABLE}}
struct Params {
    pairs: u32,       // rows * half
    half: u32,        // D / 2
    len: u32,         // L
    pos_offset: u32,
    log2_base: f32,   // log2(base)
    inv_half: f32,    // 1 / half  (so the exponent is -(i / half))
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.pairs) {
        return;
    }
    let row = t / p.half;
    let i = t % p.half;
    let cs = rope_cos_sin(f32(p.pos_offset + row % p.len), i, p.inv_half, p.log2_base);
    let c = cs.x;
    let s = cs.y;
    let j0 = row * 2u * p.half + i;
    let j1 = j0 + p.half;
    let x0 = f32(x[j0]);
    let x1 = f32(x[j1]);
    out[j0] = {{T}}(x0 * c - x1 * s);
    out[j1] = {{T}}(x1 * c + x0 * s);
}

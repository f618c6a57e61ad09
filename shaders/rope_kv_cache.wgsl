// A decoder layer's fused QKV projection [L, (NH + 2 NKV) * D] split into heads, RoPE applied to
// the query and key heads (rotate-half, exactly as rope.wgsl computes it), the queries written
// head-major [NH, L, D] and the keys and values written into the KV caches [NKV, CAP, D] at rows
// pos_offset .. pos_offset + L (in place: the caches keep every earlier row).
// One thread per pair (i, i + D/2) of one head of one position.
{{ENABLE}}
struct Params {
    pairs: u32,       // L * (NH + 2 NKV) * half
    half: u32,        // D / 2
    len: u32,         // L
    pos_offset: u32,
    log2_base: f32,
    inv_half: f32,
    nh: u32,
    nkv: u32,
    cap: u32,         // rows of each cache
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> q: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> kc: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> vc: array<{{T}}>;
{{FREQ_FACTORS}}@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.pairs) {
        return;
    }
    let heads = p.nh + 2u * p.nkv;
    let l = t / (heads * p.half);
    let head = (t / p.half) % heads;
    let i = t % p.half;
    let d = 2u * p.half;
    let s0 = (l * heads + head) * d + i;
    var x0 = f32(qkv[s0]);
    var x1 = f32(qkv[s0 + p.half]);
    if (head < p.nh + p.nkv) {
        let cs = rope_pair(f32(p.pos_offset + l), i);
        let y0 = x0 * cs.x - x1 * cs.y;
        let y1 = x1 * cs.x + x0 * cs.y;
        x0 = y0;
        x1 = y1;
    }
    if (head < p.nh) {
        let o = (head * p.len + l) * d + i;
        q[o] = {{T}}(x0);
        q[o + p.half] = {{T}}(x1);
    } else if (head < p.nh + p.nkv) {
        let o = ((head - p.nh) * p.cap + p.pos_offset + l) * d + i;
        kc[o] = {{T}}(x0);
        kc[o + p.half] = {{T}}(x1);
    } else {
        let o = ((head - p.nh - p.nkv) * p.cap + p.pos_offset + l) * d + i;
        vc[o] = {{T}}(x0);
        vc[o + p.half] = {{T}}(x1);
    }
}

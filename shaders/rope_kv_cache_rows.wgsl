// Batched decode's rope_kv_cache.wgsl: row b of the QKV projection [B, (NH + 2 NKV) * D] is one
// token of sequence b at its own position pos[b]; the query heads are RoPE'd into q [B, NH, D],
// the key heads RoPE'd and the value heads copied into sequence b's caches, k_cache[b] and
// v_cache[b] of [B, NKV, CAP, D], at row pos[b] (in place). The rotation is rope_kv_cache.wgsl's
// for that position (rope_cos_sin of rope_common.wgsl, appended), so a row gets the bits a
// single-sequence pass gets. One thread per pair (i, i + D/2) of one head of one row.
{{ENABLE}}
struct Params {
    pairs: u32,       // B * (NH + 2 NKV) * half
    half: u32,        // D / 2
    log2_base: f32,
    inv_half: f32,
    nh: u32,
    nkv: u32,
    cap: u32,         // rows of each sequence's cache
    pad0: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<{{T}}>;
@group(0) @binding(1) var<storage, read> pos: array<u32>;
@group(0) @binding(2) var<storage, read_write> q: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> kc: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> vc: array<{{T}}>;
{{FREQ_FACTORS}}@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.pairs) {
        return;
    }
    let heads = p.nh + 2u * p.nkv;
    let b = t / (heads * p.half);
    let head = (t / p.half) % heads;
    let i = t % p.half;
    let d = 2u * p.half;
    let at = pos[b];
    // The host checks every position against the caches; a bad one stores nothing.
    if (at >= p.cap) {
        return;
    }
    let s0 = (b * heads + head) * d + i;
    var x0 = f32(qkv[s0]);
    var x1 = f32(qkv[s0 + p.half]);
    if (head < p.nh + p.nkv) {
        let cs = rope_pair(f32(at), i);
        let y0 = x0 * cs.x - x1 * cs.y;
        let y1 = x1 * cs.x + x0 * cs.y;
        x0 = y0;
        x1 = y1;
    }
    if (head < p.nh) {
        let o = (b * p.nh + head) * d + i;
        q[o] = {{T}}(x0);
        q[o + p.half] = {{T}}(x1);
    } else if (head < p.nh + p.nkv) {
        let o = ((b * p.nkv + head - p.nh) * p.cap + at) * d + i;
        kc[o] = {{T}}(x0);
        kc[o + p.half] = {{T}}(x1);
    } else {
        let o = ((b * p.nkv + head - p.nh - p.nkv) * p.cap + at) * d + i;
        vc[o] = {{T}}(x0);
        vc[o + p.half] = {{T}}(x1);
    }
}

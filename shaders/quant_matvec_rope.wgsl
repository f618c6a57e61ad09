// The decode matrix-vector kernels' ROPE part (quant_matvec.wgsl and quant_matvec_wide.wgsl,
// ops/quant.rs and ops/quant_matvec_wide.rs): the KV caches [NKV, CAP, D], the row order and the
// store; `rope_cos_sin` (rope_common.wgsl) follows. Without ROPE a kernel gets empty
// `rope_row` and `rope_store` and none of this. Each kernel includes it after its own `p`
// (with the ROPE fields), `out` and `RPW` (W rows a workgroup).
@group(0) @binding(5) var<storage, read_write> kc: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> vc: array<{{T}}>;
// `rope_pair(pos, i)`: rope_kv_cache.wgsl's, with Llama 3.1+'s frequency factors `ff` (binding 7)
// where the model has them: the same angles, so the same bits as that kernel.
{{ROPE_PAIR}}

// The W row of `slot` in workgroup `wgi`: pair j of the layer's (NH + 2 NKV) D / 2 is head
// j / half's rows i and i + half (i = j % half), taken by slots 2j and 2j + 1.
fn rope_row(wgi: u32, slot: u32) -> u32 {
    let j = wgi * (RPW / 2u) + slot / 2u;
    return (j / p.half) * 2u * p.half + j % p.half + (slot % 2u) * p.half;
}

// The pair of rows (w_row, w_row + half) of x row l finished: their sums x0, x1 (already times
// the norm's inverse RMS) rounded to T as the separate kernels' stored QKV is, the queries RoPE'd
// into out [NH, M, D], the keys RoPE'd and the values copied into the caches at row pos + l.
// W's rows are the stack's from p.row0 on (a stack of parts in several formats: one dispatch each).
fn rope_store(w_row: u32, l: u32, s0: f32, s1: f32) {
    let n = w_row + p.row0;
    let d = 2u * p.half;
    let head = n / d;
    let i = n % d;
    var x0 = f32({{T}}(s0));
    var x1 = f32({{T}}(s1));
    if (head < p.nh + p.nkv) {
        let cs = rope_pair(f32(p.pos + l), i);
        let y0 = x0 * cs.x - x1 * cs.y;
        let y1 = x1 * cs.x + x0 * cs.y;
        x0 = y0;
        x1 = y1;
    }
    if (head < p.nh) {
        let o = (head * p.m + l) * d + i;
        out[o] = {{T}}(x0);
        out[o + p.half] = {{T}}(x1);
    } else if (head < p.nh + p.nkv) {
        let o = ((head - p.nh) * p.cap + p.pos + l) * d + i;
        kc[o] = {{T}}(x0);
        kc[o + p.half] = {{T}}(x1);
    } else {
        let o = ((head - p.nh - p.nkv) * p.cap + p.pos + l) * d + i;
        vc[o] = {{T}}(x0);
        vc[o + p.half] = {{T}}(x1);
    }
}

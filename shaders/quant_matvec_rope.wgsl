// quant_matvec.wgsl's ROPE part (ops/quant.rs): the KV caches [NKV, CAP, D] and the epilogue;
// `rope_cos_sin` (rope_common.wgsl) follows. Without ROPE the kernel gets an empty
// `rope_row` and `rope_epilogue` and none of this.
@group(0) @binding(5) var<storage, read_write> kc: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> vc: array<{{T}}>;

// The W row of `slot` in workgroup `wgi`: pair j of the layer's (NH + 2 NKV) D / 2 is head
// j / half's rows i and i + half (i = j % half), taken by slots 2j and 2j + 1.
fn rope_row(wgi: u32, slot: u32) -> u32 {
    let j = wgi * (RPW / 2u) + slot / 2u;
    return (j / p.half) * 2u * p.half + j % p.half + (slot % 2u) * p.half;
}

// ROPE's epilogue for the pair of rows (n, n + half) of x rows m0 .. m0 + MT: their sums are at
// red[q * 256 + li] and red[q * 256 + li + TPR] (the odd slot's lane 0).
fn rope_epilogue(n: u32, m0: u32, li: u32) {
    let d = 2u * p.half;
    let head = n / d;
    let i = n % d;
    for (var q = 0u; q < MT; q++) {
        let l = m0 + q;
        if (l < p.m) {
            var x0 = red[q * 256u + li];
            var x1 = red[q * 256u + li + TPR];
            if (NORM) {
                x0 *= inv_rms[q];
                x1 *= inv_rms[q];
            }
            x0 = f32({{T}}(x0));
            x1 = f32({{T}}(x1));
            if (head < p.nh + p.nkv) {
                let cs = rope_cos_sin(f32(p.pos + l), i, p.inv_half, p.log2_base);
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
    }
}

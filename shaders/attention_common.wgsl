// Shared by the attention kernels (rendered into each as ATTENTION_COMMON, after its Params,
// which end with `brank` batch dimensions' shape and the Q, K, V and mask element strides per
// dimension, 0 where an operand is broadcast): where batch entry `bi`'s Q, K, V and mask start
// (x, y, z, w), the last batch dimension varying fastest.
fn batch_offsets(bi: u32) -> vec4<u32> {
    var o = vec4<u32>(0u);
    var r = bi;
    for (var t = 0u; t < p.brank; t++) {
        let dd = p.brank - 1u - t;
        let a = dd / 4u;
        let s = dd % 4u;
        let ci = r % p.bshape[a][s];
        r = r / p.bshape[a][s];
        o += ci * vec4<u32>(p.qstride[a][s], p.kstride[a][s], p.vstride[a][s], p.mstride[a][s]);
    }
    return o;
}

// The merge of one query row's split-KV partials (m_s, l_s, acc_s), shared by the combine pass
// (flash_attention_combine.wgsl) and the one-pass decode ending
// (flash_attention_decode_merge.wgsl), so both give the same bits: each kernel defines
// `take(i)` (a plain or an atomic load of the partials) and declares `p` (dv, nsplit), `out`,
// `red` [WG] and `wts` [MAXS]. Thread t takes splits t, t + WG, ... for the max and the
// weights; then each thread owns output dims lid, lid + WG, ... and sums its splits in order.
// A row with no weight (no keys, or all masked) gives zeros.
fn merge_row(row: u32, lid: u32) {
    let w = p.dv + 2u;
    let base = row * p.nsplit * w;
    var mx = -3.4028234e38f;
    for (var s = lid; s < p.nsplit; s += WG) {
        mx = max(mx, take(base + s * w));
    }
    // Only the first min(nsplit, WG) threads hold a split: the others' entries are the
    // identity (lowest float, 0), so leaving them out changes no bit.
    let nt = min(p.nsplit, WG);
    red[lid] = mx;
    workgroupBarrier();
    for (var t = 0u; t < nt; t++) {
        mx = max(mx, red[t]);
    }
    workgroupBarrier();
    var l = 0.0;
    for (var s = lid; s < p.nsplit; s += WG) {
        let e = k_exp(take(base + s * w) - mx);
        wts[s] = e;
        l += take(base + s * w + 1u) * e;
    }
    red[lid] = l;
    workgroupBarrier();
    l = 0.0;
    for (var t = 0u; t < nt; t++) {
        l += red[t];
    }
    let inv = select(0.0, k_div(1.0, l), l > 0.0);
    for (var dd = lid; dd < p.dv; dd += WG) {
        // Four splits' loads issued together, then summed in split order as one at a time.
        var o = 0.0;
        var s = 0u;
        for (; s + 4u <= p.nsplit; s += 4u) {
            let a = base + s * w + 2u + dd;
            let x0 = take(a);
            let x1 = take(a + w);
            let x2 = take(a + 2u * w);
            let x3 = take(a + 3u * w);
            o = fma(x0, wts[s], o);
            o = fma(x1, wts[s + 1u], o);
            o = fma(x2, wts[s + 2u], o);
            o = fma(x3, wts[s + 3u], o);
        }
        for (; s < p.nsplit; s++) {
            o = fma(take(base + s * w + 2u + dd), wts[s], o);
        }
        out[row * p.dv + dd] = {{T}}(o * inv);
    }
}

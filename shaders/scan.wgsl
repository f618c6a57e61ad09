// Inclusive scans (cumulative sum and product) along rows of x viewed as [rows, r].
// Each workgroup owns one block of 1024 elements of one row: every thread folds its 4
// consecutive elements in order, the 256 thread totals are scanned in workgroup memory
// (Hillis-Steele, a fixed tree), then each element gets (block prefix + thread prefix) + own
// running value. Rendered in two modes:
//  - TOTALS: each block writes its total to out[g] (one entry per block, [rows, nblocks]);
//  - OUTPUT: each block writes its scanned elements, prefixed by the exclusive scan of the
//    block totals (`prefix`, [rows, nblocks + 1], scanned by the same kernel one level up).
// The association order depends only on the shape (no atomics, no subgroups, no look-back), so
// the same input gives the same bytes every run and on every adapter. Floats accumulate in f32
// (f16 included); integers in their own type, wrapping.
{{ENABLE}}
struct Params {
    groups: u32,   // rows * nblocks
    r: u32,        // run length
    nblocks: u32,  // blocks per run
    out_len: u32,  // r + 1 with the initial value, else r
    init: u32,     // 1: out[row, 0] is the identity and element j goes to j + 1
    neg_zero: u32, // 0x80000000: -0's bits, from the host (see identity())
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{O}}>;
{{PREFIX_DECL}}
@group(0) @binding({{PBIND}}) var<uniform> p: Params;

// The identity every padded element and every first prefix starts from. The sum's float
// identity is -0 so that a run of -0 keeps its sign (-0 + -0 = -0, -0 + x = x). Its bits come
// through the parameters: SwiftShader's compiler merges the constants -0 and +0 of one shader
// (the initial value is +0), so in Chromium a literal -0 turned the leading 0 into -0.
fn identity() -> {{A}} {
    {{IDENTITY}}
}

fn combine(a: {{A}}, b: {{A}}) -> {{A}} {
    return a {{OP}} b;
}

var<workgroup> sh: array<{{A}}, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= p.groups) {
        return;
    }
    let row = g / p.nblocks;
    let blk = g % p.nblocks;
    let j0 = blk * 1024u + lid * 4u;
    let base = row * p.r;
    var v0 = identity();
    var v1 = identity();
    var v2 = identity();
    var v3 = identity();
    if (j0 < p.r) { v0 = {{A}}(x[base + j0]); }
    if (j0 + 1u < p.r) { v1 = {{A}}(x[base + j0 + 1u]); }
    if (j0 + 2u < p.r) { v2 = {{A}}(x[base + j0 + 2u]); }
    if (j0 + 3u < p.r) { v3 = {{A}}(x[base + j0 + 3u]); }
    v1 = combine(v0, v1);
    v2 = combine(v1, v2);
    v3 = combine(v2, v3);

    var t = v3;
    sh[lid] = t;
    workgroupBarrier();
    for (var off = 1u; off < 256u; off = off << 1u) {
        var o = identity();
        if (lid >= off) {
            o = sh[lid - off];
        }
        workgroupBarrier();
        t = combine(o, t);
        sh[lid] = t;
        workgroupBarrier();
    }
{{FINISH}}
}

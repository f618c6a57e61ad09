// Flash attention with register blocking (ops/attention/, f32 path for D, Dv <= 64): a
// workgroup of 8 x 16 threads takes BR = 64 query rows of one batch entry and walks the keys
// BC = 32 at a time, as two small matmuls per tile (the way the matmul kernel tiles):
//  - S = Q K^T: thread (tx, ty) owns rows 4 ty .. 4 ty + 3 and keys tx, tx + 8, tx + 16, tx + 24
//    (one vec4 of scores per row); Q (pre-scaled by scale * log2 e) sits transposed in workgroup
//    memory for the whole kernel, the K tile transposed with its keys in that order, so each
//    vec4 read from workgroup memory feeds 16 FMAs (the one-row-per-thread kernel: 4).
//  - online softmax: the row maxima are folded over the 8 threads of a row through `red`; each
//    thread keeps its own partial row sums (folded once at the end) and its P block goes to
//    workgroup memory transposed;
//  - O += P V: the same thread owns rows 4 ty .. 4 ty + 3 and vec4 columns tx, tx + 8 of O.
// Causal (top-left aligned: key j > query i masked): the workgroup stops after the last key its
// last row sees; in p v each thread stops at its own last row's key and guards the keys only
// some of its rows see, so values a row never sees (NaN, inf) never reach it. The optional
// additive mask is read at [batch, i, j] through its broadcast strides. A row whose every key
// is masked gives zeros. Scores in base 2 (flash_exp2.wgsl's exp2 in place of exp). D and Dv padded
// to vec4s.
{{ENABLE}}
{{FLASH_PARAMS}}

@group(0) @binding(0) var<storage, read> q: array<{{LT}}>;
@group(0) @binding(1) var<storage, read> k: array<{{LT}}>;
@group(0) @binding(2) var<storage, read> v: array<{{LT}}>;
{{MASK_BINDING}}
@group(0) @binding({{OUT_SLOT}}) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding({{P_SLOT}}) var<uniform> p: Params;
{{ATTENTION_COMMON}}

const BR = 64u;
const BC = 32u;
const DP = {{DP}}u;
const DVP = {{DVP}}u;
const PS = 17u; // P's row of 16 row-quads, padded: the 8 threads of a store hit 8 banks
const LOWEST = -3.4028234e38f;
const LOG2E = 1.44269504f;

var<workgroup> qt: array<vec4<f32>, DP * 4u * 16u>; // [d][row quad]
var<workgroup> kt: array<vec4<f32>, DP * 4u * 8u>;  // [d][key slot s: keys s, s + 8, s + 16, s + 24]
var<workgroup> vt: array<vec4<f32>, BC * DVP>;      // [key][dv quad]
var<workgroup> pt: array<vec4<f32>, BC * PS>;       // [key][row quad]
var<workgroup> red: array<vec4<f32>, BR * 2u>;      // [row][the 8 threads' partials]

{{LOADERS}}
{{FLASH_EXP2}}

fn max4(a: vec4<f32>) -> f32 {
    return max(max(a.x, a.y), max(a.z, a.w));
}

fn sum4(a: vec4<f32>) -> f32 {
    return (a.x + a.y) + (a.z + a.w);
}

@compute @workgroup_size(8, 16, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid3: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    if (block >= p.blocks) {
        return;
    }
    // The last (for causal, the longest) query blocks first, so the short ones fill the tail.
    let qb = p.nqb - 1u - block % p.nqb;
    let bi = block / p.nqb;
    let offs = batch_offsets(bi);
    let qoff = offs.x;
    let koff = offs.y;
    let voff = offs.z;
    let moff = offs.w;
    let tx = lid3.x;
    let ty = lid3.y;
    let r0 = qb * BR + ty * 4u;
    var nk_block = p.lk;
    if (p.causal != 0u) {
        nk_block = min(p.lk, min(p.lq, qb * BR + BR));
    }
    // Keys each of the thread's rows sees.
    var lim = vec4<u32>(p.lk);
    if (p.causal != 0u) {
        lim = min(vec4<u32>(p.lk), vec4<u32>(r0 + 1u) + vec4<u32>(0u, 1u, 2u, 3u));
    }
    // Q transposed: task l takes rows 4 (l % 16) .. + 3 at dims 4 (l / 16) .. + 3.
    for (var l = lid; l < 16u * DP; l += 128u) {
        let rq = l % 16u;
        let dq = l / 16u;
        var x0 = vec4<f32>(0.0);
        var x1 = vec4<f32>(0.0);
        var x2 = vec4<f32>(0.0);
        var x3 = vec4<f32>(0.0);
        let i = qb * BR + rq * 4u;
        if (i < p.lq) { x0 = ldq(qoff + i * p.d, dq); }
        if (i + 1u < p.lq) { x1 = ldq(qoff + (i + 1u) * p.d, dq); }
        if (i + 2u < p.lq) { x2 = ldq(qoff + (i + 2u) * p.d, dq); }
        if (i + 3u < p.lq) { x3 = ldq(qoff + (i + 3u) * p.d, dq); }
        let base = dq * 4u * 16u + rq;
        qt[base] = vec4<f32>(x0.x, x1.x, x2.x, x3.x) * p.scale2;
        qt[base + 16u] = vec4<f32>(x0.y, x1.y, x2.y, x3.y) * p.scale2;
        qt[base + 32u] = vec4<f32>(x0.z, x1.z, x2.z, x3.z) * p.scale2;
        qt[base + 48u] = vec4<f32>(x0.w, x1.w, x2.w, x3.w) * p.scale2;
    }
{{DECLARE}}
    var m = vec4<f32>(LOWEST);
    var lsum = vec4<f32>(0.0);
    let slots = vec4<u32>(0u, 8u, 16u, 24u);
{{TILE_REGS}}
{{FETCH_FIRST}}
    for (var j0 = 0u; j0 < nk_block; j0 += BC) {
        workgroupBarrier();
{{LOAD_TILES}}
        workgroupBarrier();
{{FETCH_NEXT}}
        var s0 = vec4<f32>(0.0);
        var s1 = vec4<f32>(0.0);
        var s2 = vec4<f32>(0.0);
        var s3 = vec4<f32>(0.0);
        for (var d = 0u; d < DP * 4u; d += 4u) {
{{S_STEPS}}
        }
        let jv = vec4<u32>(j0 + tx) + slots;
{{MASK_ADD}}
        s0 = select(vec4<f32>(-k_inf()), s0, jv < vec4<u32>(lim.x));
        s1 = select(vec4<f32>(-k_inf()), s1, jv < vec4<u32>(lim.y));
        s2 = select(vec4<f32>(-k_inf()), s2, jv < vec4<u32>(lim.z));
        s3 = select(vec4<f32>(-k_inf()), s3, jv < vec4<u32>(lim.w));
        let rr = ty * 8u;
        let lane = tx % 4u;
        let half = tx / 4u;
        red[rr + half][lane] = max4(s0);
        red[rr + 2u + half][lane] = max4(s1);
        red[rr + 4u + half][lane] = max4(s2);
        red[rr + 6u + half][lane] = max4(s3);
        workgroupBarrier();
        let mn = max(m, vec4<f32>(
            max(max4(red[rr]), max4(red[rr + 1u])),
            max(max4(red[rr + 2u]), max4(red[rr + 3u])),
            max(max4(red[rr + 4u]), max4(red[rr + 5u])),
            max(max4(red[rr + 6u]), max4(red[rr + 7u]))));
{{RESCALE}}
        m = mn;
        let p0 = flash_exp2_4(s0 - vec4<f32>(m.x));
        let p1 = flash_exp2_4(s1 - vec4<f32>(m.y));
        let p2 = flash_exp2_4(s2 - vec4<f32>(m.z));
        let p3 = flash_exp2_4(s3 - vec4<f32>(m.w));
        lsum = lsum * alpha + vec4<f32>(sum4(p0), sum4(p1), sum4(p2), sum4(p3));
        pt[tx * PS + ty] = vec4<f32>(p0.x, p1.x, p2.x, p3.x);
        pt[(tx + 8u) * PS + ty] = vec4<f32>(p0.y, p1.y, p2.y, p3.y);
        pt[(tx + 16u) * PS + ty] = vec4<f32>(p0.z, p1.z, p2.z, p3.z);
        pt[(tx + 24u) * PS + ty] = vec4<f32>(p0.w, p1.w, p2.w, p3.w);
        workgroupBarrier();
        // Keys every row of the thread sees: [0, jfull); some of them: [jfull, jmax).
        var jfull = BC;
        var jmax = BC;
        if (p.causal != 0u) {
            jfull = u32(clamp(i32(r0 + 1u) - i32(j0), 0, i32(BC)));
            jmax = u32(clamp(i32(r0 + 4u) - i32(j0), 0, i32(BC)));
        }
        for (var j = 0u; j < jfull; j++) {
            let a = pt[j * PS + ty];
{{PV_STEP}}
        }
        for (var j = jfull; j < jmax; j++) {
            let a = pt[j * PS + ty];
            let vis = vec4<u32>(j0 + j) <= vec4<u32>(r0) + vec4<u32>(0u, 1u, 2u, 3u);
{{PV_GUARDED}}
        }
    }
    // The row sums: the 8 threads' partials, in a fixed order.
    workgroupBarrier();
    let rr = ty * 8u;
    red[rr + tx / 4u][tx % 4u] = lsum.x;
    red[rr + 2u + tx / 4u][tx % 4u] = lsum.y;
    red[rr + 4u + tx / 4u][tx % 4u] = lsum.z;
    red[rr + 6u + tx / 4u][tx % 4u] = lsum.w;
    workgroupBarrier();
    let lt = vec4<f32>(
        sum4(red[rr]) + sum4(red[rr + 1u]),
        sum4(red[rr + 2u]) + sum4(red[rr + 3u]),
        sum4(red[rr + 4u]) + sum4(red[rr + 5u]),
        sum4(red[rr + 6u]) + sum4(red[rr + 7u]));
    let inv = vec4<f32>(
        select(0.0, k_div(1.0, lt.x), lt.x > 0.0),
        select(0.0, k_div(1.0, lt.y), lt.y > 0.0),
        select(0.0, k_div(1.0, lt.z), lt.z > 0.0),
        select(0.0, k_div(1.0, lt.w), lt.w > 0.0));
{{STORE}}
}

// Split-KV attention with vec4 loads (ops/attention/, `decode_source`), for D and Dv multiples
// of 4: workgroup (row, split) as in flash_attention_split.wgsl, and the same partials for
// flash_attention_combine.wgsl, but with every global load of a step in flight at once. The
// scalar kernel waited on 32 load round trips per 64 keys (a 64 x D block copied four loads at
// a time, then V four loads at a time) and ran at the same speed in f16 as in f32: bound by
// latency, not bandwidth. Here thread t scores key t reading its K row straight from global
// memory as DP vec4s (unrolled: q and the loads are plain variables), and for p v thread t
// owns dims vec4 c = t % DVP of keys g, g + G, ... (g = t / DVP, G = WG / DVP groups), again
// all unrolled; the G groups' accumulators are summed once, at the end.
// Scores, in f32 where DP divides WG (`decode_source`'s `coalesced`): thread t reading key t's
// row alone makes every load instruction of a subgroup touch 32 cache lines (the rows are D
// apart). Instead the subgroup reads the step's 64 rows as one contiguous block (load r of
// thread t is vec4 t + r * WG: key (t + r * WG) / DP, dims vec4 t % DP, so a thread needs one
// vec4 of q), writes each vec4's dot product to `sc` and, after a barrier, thread t sums
// its key's DP products in dims order, the same order as the row-per-thread kernel.
// One pass (the default): the last workgroup of a row merges the row's splits in this dispatch
// (flash_attention_decode_merge.wgsl) instead of a second dispatch.
{{ENABLE}}
struct Params {
    lq: u32,
    lk: u32,
    d: u32,
    dv: u32,
    rows: u32,     // batch * lq
    nsplit: u32,
    chunk: u32,    // keys per split, a multiple of WG
    causal: u32,
    scale: f32,
    msq: u32,
    msk: u32,
    brank: u32,
    bshape: array<vec4<u32>, 2>,
    qstride: array<vec4<u32>, 2>,
    kstride: array<vec4<u32>, 2>,
    vstride: array<vec4<u32>, 2>,
    mstride: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<storage, read> q: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read> k: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<{{T}}>>;
{{MASK_BINDING}}
@group(0) @binding({{PART_SLOT}}) var<storage, read_write> part: array<{{PART_ELEM}}>;
@group(0) @binding({{P_SLOT}}) var<uniform> p: Params;
{{ATTENTION_COMMON}}
// `put(i, x)` stores partial i, `finish(row, lid)` ends the workgroup: plain stores and nothing
// for the two-pass path (flash_attention_combine.wgsl merges), the one-pass merge of
// flash_attention_decode_merge.wgsl otherwise.
{{ENDING}}

const WG = 64u;
const DP = {{DP}}u;
const DVP = {{DVP}}u;
const G = WG / DVP;
const LOWEST = -3.4028234e38f;

var<workgroup> red: array<f32, WG>;
var<workgroup> probs: array<f32, WG>;
var<workgroup> accs: array<vec4<f32>, WG>;
{{SCORE_SCRATCH}}

fn reduce(lid: u32, x: f32, take_max: bool) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h = h / 2u) {
        if (lid < h) {
            if (take_max) {
                red[lid] = max(red[lid], red[lid + h]);
            } else {
                red[lid] = red[lid] + red[lid + h];
            }
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let gi = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    if (gi >= p.rows * p.nsplit) {
        return;
    }
    let row = gi / p.nsplit;
    let split = gi % p.nsplit;
    let i = row % p.lq;
    let bi = row / p.lq;
    let offs = batch_offsets(bi);
    let qoff = offs.x;
    let koff = offs.y;
    let voff = offs.z;
    let moff = offs.w;
    var nk = p.lk;
    if (p.causal != 0u) {
        nk = min(p.lk, i + 1u);
    }
    var jbeg = split * p.chunk;
    let jend = min(nk, jbeg + p.chunk);
{{WINDOW}}    let qb = (qoff + i * p.d) / 4u;
{{LOAD_Q}}
    // This thread's share of p v: dims vec4 c of keys g, g + G, ...
    let c = lid % DVP;
    let g = lid / DVP;
    var acc = vec4<f32>(0.0);
    var m = LOWEST;
    var l = 0.0;
    for (var j0 = jbeg; j0 < jend; j0 += WG) {
        let n = min(WG, jend - j0);
        var s = LOWEST;
        let valid = lid < n;
{{SCORE_PRE}}
        if (valid) {
{{SCORE}}
        }
        let m_new = max(m, reduce(lid, s, true));
        let alpha = k_exp(m - m_new);
        let e = select(0.0, k_exp(s - m_new), valid);
        probs[lid] = e;
        l = l * alpha + reduce(lid, e, false);
        m = m_new;
        acc *= alpha;
        if (g < G) {
{{PV}}
        }
    }
    accs[lid] = acc;
    workgroupBarrier();
    let w = p.dv + 2u;
    let o = gi * w;
    if (lid == 0u) {
        put(o, m);
        put(o + 1u, l);
    }
    if (lid < DVP) {
        var sum = accs[lid];
        for (var h = 1u; h < G; h++) {
            sum += accs[lid + h * DVP];
        }
        for (var x = 0u; x < 4u; x++) {
            put(o + 2u + lid * 4u + x, sum[x]);
        }
    }
    finish(row, lid);
}

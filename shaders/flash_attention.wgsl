// Flash attention (ops/attention/), one query row per thread: the flash path's kernel where D or
// Dv is over 64 (up to 256) or the register-blocked one (flash_attention_blocked.wgsl) does not
// fit the workgroup memory. A workgroup takes BR query rows of one batch entry, one row per
// thread, and walks the keys BC at a time. Each K and V tile is loaded once into workgroup
// memory and read by all BR rows (every thread reads the same element at the same time: a
// broadcast, no bank conflicts). The online softmax goes key by key with a running maximum m
// and sum l per row; the output accumulators are rescaled only when m grows (rare after the
// first keys), so the Lq x Lk score matrix never exists and most keys cost one exp2.
// Scores are kept in base 2 (q is pre-scaled by scale * log2(e), flash_exp2.wgsl's exp2 in place
// of exp).
// Causal (top-left aligned: key j > query i masked): the workgroup stops after the last key its
// last row sees, so fully masked tiles are never loaded; each row stops at its own last key, so
// values it never sees (NaN, inf) never reach it. The optional additive mask (MASK_BINDING) is
// read at [batch, i, j] through its broadcast strides. A row whose every key is masked (no keys,
// or all -inf) gives zeros, as a row with Lk = 0 always did.
// D and Dv are padded to vec4s (DP, DVP of them) with zeros; floats in f32 (f16 widened on load).
// The blocks marked {{...}} are generated unrolled over D and Dv (`flash_source`): q and the
// accumulators are then plain variables, never an array in local memory (a 4x difference
// measured), and each thread's tile loads are all in flight before the first store waits on
// one. Where D and Dv are multiples of 4, q, k and v are read as vec4s (LOADERS), else element
// by element.
{{ENABLE}}
{{FLASH_PARAMS}}

@group(0) @binding(0) var<storage, read> q: array<{{LT}}>;
@group(0) @binding(1) var<storage, read> k: array<{{LT}}>;
@group(0) @binding(2) var<storage, read> v: array<{{LT}}>;
// Bindings 3.. : the mask where there is one (MASK_BINDING), then out and the parameters.
{{MASK_BINDING}}
@group(0) @binding({{OUT_SLOT}}) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding({{P_SLOT}}) var<uniform> p: Params;
{{ATTENTION_COMMON}}

const BR = {{BR}}u;
const BC = {{BC}}u;
const DP = {{DP}}u;
const DVP = {{DVP}}u;
const LOWEST = -3.4028234e38f;
const LOG2E = 1.44269504f;

var<workgroup> kt: array<vec4<f32>, BC * DP>;
var<workgroup> vt: array<vec4<f32>, BC * DVP>;

{{LOADERS}}
{{FLASH_EXP2}}

// Element e of the K (V) tile starting at key j0: key e / DP, dims (e % DP) * 4.., zero past Lk
// and past the tile.
fn tile_k(koff: u32, j0: u32, e: u32) -> vec4<f32> {
    let j = j0 + e / DP;
    if (e >= BC * DP || j >= p.lk) {
        return vec4<f32>(0.0);
    }
    return ldk(koff + j * p.d, e % DP);
}

fn tile_v(voff: u32, j0: u32, e: u32) -> vec4<f32> {
    let j = j0 + e / DVP;
    if (e >= BC * DVP || j >= p.lk) {
        return vec4<f32>(0.0);
    }
    return ldv(voff + j * p.dv, e % DVP);
}

@compute @workgroup_size({{BR}})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
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
    let i = qb * BR + lid;
    let row_ok = i < p.lq;
    // Keys this row sees, and keys any row of the block sees.
    var nk = p.lk;
    var nk_block = p.lk;
    if (p.causal != 0u) {
        nk = min(p.lk, i + 1u);
        nk_block = min(p.lk, min(p.lq, qb * BR + BR));
    }
    if (!row_ok) {
        nk = 0u;
    }
{{DECLARE}}
    if (row_ok) {
        let qbase = qoff + i * p.d;
{{LOAD_Q}}
    }
    var m = LOWEST;
    var l = 0.0;
    for (var j0 = 0u; j0 < nk_block; j0 += BC) {
        workgroupBarrier();
{{LOAD_TILES}}
        workgroupBarrier();
        // Keys of this tile the row sees: [0, nvalid).
        let nvalid = min(BC, max(nk, j0) - j0);
        for (var j = 0u; j < nvalid; j++) {
{{PER_KEY}}        }
    }
    if (row_ok) {
        let inv = select(0.0, k_div(1.0, l), l > 0.0);
        let obase = (bi * p.lq + i) * p.dv;
{{STORE}}
    }
}

// f16 flash attention on cooperative matrices (tensor cores), ops/attention/coop.rs: the score
// products Q·Kᵀ and P·V run as 16x16x16 f16 products with f32 accumulators; only the softmax
// between them runs on the invocations.
//
// A workgroup takes BR = NSG * 16 query rows of one batch entry: each of its NSG subgroups owns
// 16 rows, holds their Q as D/16 matrices and their output as DV/16 f32 accumulators for the
// whole walk over the keys, BC keys at a time. Per tile: all invocations store K and V (zeros
// past Lk; fetched into registers while the previous tile computed) into workgroup memory; each subgroup computes its 16 x BC scores S = Q·Kᵀ, stores them to
// its own scratch, and its invocations (LPR per query row) apply scale, mask and causality and
// turn them into P = exp2(S - m) as f16, which the subgroup multiplies into V.
// The running maximum m of a row moves only when a tile's maximum exceeds it by more than
// THRESH (in log2 units): P is then at most 2^THRESH (f16 holds it, the f32 sums do too), and
// the accumulators — which the invocations cannot address element by element — are rescaled
// through the scratch only in a tile where some row's maximum grew that much (after a row's
// first tile, rarely); the whole workgroup then rescales, as cooperative operations need
// uniform control flow. Sums l are kept per row by the invocations over the same f16-rounded P
// that the products use.
// Causal (top-left aligned): the workgroup stops after the last key its last row sees. Keys a
// row must not see get P = 0; a non-finite value in such a key's V row still reaches the
// product as 0 · NaN (as on the matmul path): the per-row kernel skips it instead.
// Scratch traffic between a subgroup's invocations is ordered by workgroupBarrier: naga's
// subgroupBarrier orders only subgroup memory (SPIR-V SubgroupMemory semantics), and on the H100
// the scores read after it were stale (every output 0).
{{ENABLE}}
{{FLASH_PARAMS}}

@group(0) @binding(0) var<storage, read> q: array<f16>;
@group(0) @binding(1) var<storage, read> k: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<f16>>;
{{MASK_BINDING}}
@group(0) @binding({{OUT_SLOT}}) var<storage, read_write> out: array<f16>;
@group(0) @binding({{P_SLOT}}) var<uniform> p: Params;
{{ATTENTION_COMMON}}

const SG = {{SG}}u;
const NSG = {{NSG}}u;
const NT = SG * NSG;
const BR = NSG * 16u;
const BC = {{BC}}u;
const D = {{D}}u;
const DV = {{DV}}u;
const SK = D + 8u;  // row strides in workgroup memory, padded by 16 bytes
const SV = DV + 8u;
const SS = {{SS}}u;
const SP = BC + 8u;
// The same strides in vec4 units, where the tiles are arrays of vec4 (VEC layout: one 8- or
// 16-byte access instead of four scalar ones; cooperative loads and stores take vec4 pointers
// with strides in vec4 units).
const SK4 = SK / 4u;
const SV4 = SV / 4u;
const SS4 = SS / 4u;
const SP4 = SP / 4u;
const LPR = SG / 16u; // invocations per query row
const THRESH = 8.0;
const LOWEST = -3.4028234e38f;
const LOG2E = 1.44269504f;

{{SMEM}}
// Whether some row's maximum grew past THRESH in this tile ([0]; four words so that every
// workgroup variable is a multiple of 16 bytes: with a lone u32 the H100's driver placed the
// arrays off the 16-byte alignment cooperative loads need, and they read zeros).
var<workgroup> grew: array<u32, 4>;

@compute @workgroup_size({{NT}}, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let block = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    // Uniform over the workgroup: every invocation leaves or none does.
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
    let row0 = qb * BR + sg * 16u; // this subgroup's first query row
    let rr = lane / LPR;           // this invocation's row in the subgroup's 16
    let part = lane % LPR;         // ... and its share of the row's columns
    let i = row0 + rr;
    let ssb = sg * 16u * SS;
    let psb = sg * 16u * SP;
    let ssb4 = ssb / 4u;
    let psb4 = psb / 4u;
    // Keys this row sees, and keys any row of the workgroup sees.
    var nk = p.lk;
    var nk_block = p.lk;
    if (p.causal != 0u) {
        nk = min(p.lk, i + 1u);
        nk_block = min(p.lk, min(p.lq, qb * BR + BR));
    }
    if (i >= p.lq) {
        nk = 0u;
    }

    // Q, 16 columns at a time through this subgroup's P scratch.
{{LOAD_Q}}
{{ACC_DECL}}
    // This invocation's share of the first K and V tiles, in registers.
    var j0 = 0u;
{{FETCH_DECL}}
    var m = LOWEST;
    var l = 0.0;
    for (; j0 < nk_block; j0 += BC) {
        workgroupBarrier();
        if (lid == 0u) {
            grew[0] = 0u;
        }
{{STORE_KV}}
        workgroupBarrier();
        // The next tiles' loads are in flight while this one's products and softmax run.
        if (j0 + BC < nk_block) {
            let j0 = j0 + BC;
{{FETCH}}
        }
{{SCORES}}
        workgroupBarrier();
{{AFTER_SCORES}}        // This invocation's scores of the tile (SCORES_READ: scaled, masked, read once into
        // registers), their maximum over the keys this row sees, then P.
        let nv = select(0u, nk - j0, nk > j0); // keys of this tile the row sees
        var mx = LOWEST;
{{SOFTMAX_MAX}}
{{REDUCE_MAX}}
        var alpha = 1.0;
        let grow = mx > m + THRESH;
        if (grow) {
            alpha = exp2(m - mx);
            m = mx;
        }
        var sum = 0.0;
{{SOFTMAX_P}}
{{REDUCE_SUM}}
        if (grow && l > 0.0) {
            grew[0] = 1u;
        }
        l = l * alpha + sum;
        // Cooperative operations need uniform control flow: the decision is the workgroup's.
        if (workgroupUniformLoad(&grew)[0] != 0u) {
{{RESCALE}}
        }
{{PV}}
    }

    let inv = select(0.0, 1.0 / l, l > 0.0);
    let obase = (bi * p.lq + i) * p.dv;
{{STORE}}
}

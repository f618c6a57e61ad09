// f16 conv2d as an implicit GEMM on cooperative matrices (tensor cores), through wgpu's
// experimental `wgpu_cooperative_matrix` extension, where the device has it (ops/conv/coop.rs).
// See conv_gemm_common.wgsl for the GEMM it computes.
//
// Each workgroup computes one BM x BN tile of one group's output with WARPS_M x WARPS_N
// subgroups of SG invocations, each owning TM x TN 16x16 accumulators ({{ACC}}), walking K in
// steps of BK: the weight tile [BM][BK] and the patch tile [BK][BN] (gathered from x, one
// column per invocation, as in conv_gemm.wgsl) go to workgroup memory as f16, rows padded by 8
// halves (the 16-byte alignment cooperative loads need; spreads rows over banks), zeros
// outside M, N, K and in the padding. Each accumulator is written out through a per-subgroup
// 16x16 scratch, NCHW, with the bias added in f32.
{{ENABLE}}
{{GEMM_COMMON}}

@group(0) @binding(0) var<storage, read> x: array<f16>;
@group(0) @binding(1) var<storage, read> wt: array<f16>;
@group(0) @binding(2) var<storage, read> taps: array<vec4<u32>>;
{{BIAS_DECL}}
@group(0) @binding({{OUT}}) var<storage, read_write> out: array<f16>;
@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

const BM = {{BM}}u;
const BN = {{BN}}u;
const BK = {{BK}}u;
const WARPS_N = {{WARPS_N}}u;
const SG = {{SG}}u;
const NT = {{NT}}u;
const RB = NT / BN; // patch-tile rows gathered per pass (NT is a multiple of BN)
const SA = BK + 8u; // row stride of As, in halves
const SB = BN + 8u; // row stride of Bs

var<workgroup> As: array<f16, {{AS_LEN}}>; // [BM][SA]
var<workgroup> Bs: array<f16, {{BS_LEN}}>; // [BK][SB]
var<workgroup> Cs: array<{{ACC}}, {{CS_LEN}}>; // [subgroups][16][16]

@compute @workgroup_size({{NT}}, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let g = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    // Uniform over the workgroup: every invocation leaves or none does.
    if (g >= p.groups) {
        return;
    }
    let tile = tile_of(g);
    let row0 = tile.mt * BM;
    let col0 = tile.nt * BN;
    // This subgroup's corner in the workgroup tile.
    let wr = (sg / WARPS_N) * {{WTM}}u;
    let wc = (sg % WARPS_N) * {{WTN}}u;
    let bc = lid % BN;
    let br = lid / BN;
    let col = column_of(col0 + bc, tile.grp);
    let wbase = tile.grp * p.m * p.k;

{{ACC_DECL}}{{PREFETCH_DECL}}
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
{{LOAD}}        workgroupBarrier();
{{PREFETCH_NEXT}}        for (var kk = 0u; kk < BK; kk += 16u) {
{{INNER}}
        }
        workgroupBarrier();
    }

{{STORE}}
}

// conv2d as an implicit GEMM, register-tiled (ops/conv/gemm.rs generates the register-block
// code), for float dtypes: f32, and f16 widened to f32 on load where no cooperative matrices
// run it. See conv_gemm_common.wgsl for the GEMM it computes.
//
// Each workgroup computes one BM x BN tile of one group's output with WGX x WGY threads, each
// owning a TM x TN register block (vec4 accumulators), walking K in steps of BK through
// workgroup memory as matmul.wgsl does: the weight tile transposed ([BK][BM], vec4 along m),
// the patch tile [BK][BN]. Each thread gathers one column of the patch tile (consecutive
// threads, consecutive output pixels: coalesced reads along a row of x), so the column's
// window is decoded once per workgroup, not per K step. The result is written NCHW with the
// bias added.
{{ENABLE}}
{{GEMM_COMMON}}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read> wt: array<{{T}}>;
@group(0) @binding(2) var<storage, read> taps: array<vec4<u32>>;
{{BIAS_DECL}}
@group(0) @binding({{OUT}}) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

const BM = {{BM}}u;
const BN = {{BN}}u;
const BK = {{BK}}u;
const WGX = {{WGX}}u; // BN / TN
const WGY = {{WGY}}u; // BM / TM
const NT = WGX * WGY;
const RB = NT / BN; // patch-tile rows gathered per pass (NT is a multiple of BN)

var<workgroup> As: array<vec4<f32>, {{AS_LEN}}>; // [BK][BM / 4]
var<workgroup> Bs: array<vec4<f32>, {{BS_LEN}}>; // [BK][BN / 4]

@compute @workgroup_size({{WGX}}, {{WGY}}, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid3: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    if (g >= p.groups) {
        return;
    }
    let tile = tile_of(g);
    let row0 = tile.mt * BM;
    let col0 = tile.nt * BN;
    let tx = lid3.x;
    let ty = lid3.y;
    let bc = lid % BN;
    let br = lid / BN;
    let col = column_of(col0 + bc, tile.grp);
    let wbase = tile.grp * p.m * p.k;

{{ACC_DECL}}{{PREFETCH_DECL}}
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
{{LOAD}}        workgroupBarrier();
{{PREFETCH_NEXT}}{{K_STEPS}}
        workgroupBarrier();
    }

{{STORE}}
}

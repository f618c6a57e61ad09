// f16 batched matmul C[b] = A[b] @ B[b] on cooperative matrices (tensor cores), through wgpu's
// experimental `wgpu_cooperative_matrix` extension. Used only where the device has the feature
// and a 16x16x16 f16 configuration (see ops/matmul.rs); everywhere else matmul.wgsl runs.
//
// Each workgroup computes one BM x BN tile of C with WARPS_M x WARPS_N subgroups of SG
// invocations; each subgroup owns TM x TN 16x16 accumulators ({{ACC}}). K is walked in steps of
// BK: the A tile [BM][BK] and the B tile [BK][BN] are copied into workgroup memory as f16, with
// zeros where rows, columns or k fall outside M, N, K, so any shape works (K = 0 gives zeros).
// Each invocation holds its share of the next K step's tiles in registers (PREFETCH_DECL /
// PREFETCH_NEXT, generated in ops/matmul.rs): the loop stores them to workgroup
// memory, and after the barrier reads the following step from global memory while the
// cooperative products of this one run.
// The rows of the workgroup tiles are padded by 8 halves (16 bytes: the alignment cooperative
// loads need, and it spreads the rows over the banks). At the end each accumulator goes through
// a per-subgroup 16x16 scratch in workgroup memory, and is written to C as f16 with every row
// and column checked against M and N.
//
// Workgroups are numbered linearly over (n-tile, m-tile, batch) as in matmul.wgsl.
{{ENABLE}}
{{MATMUL_COMMON}}

@group(0) @binding(0) var<storage, read> a: array<{{A_ELEM}}>;
@group(0) @binding(1) var<storage, read> b: array<{{B_ELEM}}>;
@group(0) @binding(2) var<storage, read_write> c: array<f16>;
@group(0) @binding(3) var<uniform> p: Params;

const BM = {{BM}}u;
const BN = {{BN}}u;
const BK = {{BK}}u;
const WARPS_N = {{WARPS_N}}u;
const SG = {{SG}}u;
const NT = {{NT}}u;
const SA = BK + 8u; // row stride of As, in halves
const SB = BN + 8u; // row stride of Bs
// The strides in vec4 units, where a tile is an array of vec4<f16> (its rows read from global
// memory as vec4s and stored as such, one 8-byte store instead of four 2-byte ones; cooperative
// loads take the vec4 pointer with the stride in vec4 units).
const SA4 = SA / 4u;
const SB4 = SB / 4u;

var<workgroup> As: array<{{AS_ELEM}}, {{AS_LEN}}>; // [BM][SA]
var<workgroup> Bs: array<{{BS_ELEM}}, {{BS_LEN}}>; // [BK][SB]
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
    let aoff = tile.aoff;
    let boff = tile.boff;
    let coff = tile.coff;
    let row0 = tile.mt * BM;
    let col0 = tile.nt * BN;
    // This subgroup's corner in the workgroup tile.
    let wr = (sg / WARPS_N) * {{WTM}}u;
    let wc = (sg % WARPS_N) * {{WTN}}u;

{{ACC_DECL}}{{PREFETCH_DECL}}
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
{{LOAD_A}}{{LOAD_B}}        workgroupBarrier();
{{PREFETCH_NEXT}}        for (var kk = 0u; kk < BK; kk += 16u) {
{{INNER}}
        }
        workgroupBarrier();
    }

{{STORE}}
}

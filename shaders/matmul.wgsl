// Batched matmul C[b] = A[b] @ B[b], A [M, K], B [K, N], row-major, batch dims broadcast.
//
// Each workgroup computes one BM x BN tile of C. Its WGX x WGY threads each own a TM x TN
// register block, stored as (TM) x (TN/4) vec4 accumulators. The K dimension is walked in steps
// of BK through workgroup memory: A's tile is stored transposed ([BK][BM], vec4 along m) and
// B's as is ([BK][BN], vec4 along n), so every thread reads whole vec4s and neighbouring
// threads read neighbouring vec4s (thread (tx, ty) owns vec4 columns tx, tx + WGX, ... and vec4
// rows ty, ty + WGY, ...). Out-of-range rows, columns and k are loaded as zeros, so any M, N, K
// works (K = 0 gives zeros). Where K (for A) or N (for B) is a multiple of 4, the operand is
// read as vec4s. Floats accumulate in f32 (f16 data is widened on load), integers in
// their own type with wrapping arithmetic. MAIN_LOOP (core/src/ops/matmul/tiled.rs) copies the
// tiles: A as one vec4 along k per task stored as 4 scalars, or (quad A) 4 rows x 4 k per task
// transposed in registers and stored as 4 whole vec4s; with one copy of the tiles, or two
// (double staging: the next step's loads in flight during this one's arithmetic).
//
// Workgroups are numbered linearly over (n-tile, m-tile, batch), n fastest, and that number is
// spread over x, y and z of the dispatch, so no dimension passes the per-dimension limit.
{{ENABLE}}
{{MATMUL_COMMON}}

@group(0) @binding(0) var<storage, read> a: array<{{A_ELEM}}>;
@group(0) @binding(1) var<storage, read> b: array<{{B_ELEM}}>;
@group(0) @binding(2) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(3) var<uniform> p: Params;

const BM = {{BM}}u;
const BN = {{BN}}u;
const BK = {{BK}}u;
const WGX = {{WGX}}u; // BN / TN
const WGY = {{WGY}}u; // BM / TM
const NT = WGX * WGY;

const AS_LEN = {{AS_LEN}}u; // one copy of A's tile, [BK][BM / 4] vec4s
const BS_LEN = {{BS_LEN}}u; // one copy of B's tile, [BK][BN / 4] vec4s

// COPIES copies of each tile (two with double staging: see MAIN_LOOP).
var<workgroup> As: array<vec4<{{ACC}}>, {{AS_TOTAL}}>;
var<workgroup> Bs: array<vec4<{{ACC}}>, {{BS_TOTAL}}>;

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
    let aoff = tile.aoff;
    let boff = tile.boff;
    let coff = tile.coff;
    let row0 = tile.mt * BM;
    let col0 = tile.nt * BN;
    let tx = lid3.x;
    let ty = lid3.y;

{{ACC_DECL}}
{{MAIN_LOOP}}
{{STORE}}
}

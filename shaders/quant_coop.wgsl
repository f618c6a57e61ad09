// y[m, n] = sum_k x[m, k] * W[n, k] for many rows of x (prefill) on cooperative matrices (tensor
// cores), W quantized [N, K] (any GGUF format Kiln reads). Used only where the device has wgpu's
// cooperative-matrix feature with a 16x16x16 f16 x f16 -> f32 configuration (ops/quant_coop.rs);
// everywhere else quant_tiled.wgsl runs.
//
// A workgroup owns a BM x BN tile of y, with WARPS_M x WARPS_N subgroups of SG invocations, each
// owning TM x TN 16x16 f32 accumulators. K is walked BPS blocks (BK = 32 BPS values) at a time:
// - x's tile [BM][BK] is read as vec4s and stored in workgroup memory as f16 (As, rows padded
//   by 8 halves: the 16-byte alignment cooperative loads need, and fewer bank conflicts);
// - W's tile is BN rows of BPS 32-value groups (a whole block, or an eighth of a K
//   super-block): each invocation fetches the raw words of its units (8 values of one group:
//   quant_common's Unit; a K unit's scale words too, its scale decoded once for its 8 values),
//   decodes them as dequantize does (f32 d * q + m)
//   and stores them as f16 in Ws [BN][BK] (row n, column k), which the products load
//   column-major as the B operand (B[k][n] = Ws[n][k]).
// Each invocation holds the raw words of the next K step in registers (FETCH_NEXT runs after the
// barrier, while this step's products run), as matmul_coop.wgsl does.
// Rows past M, W rows past N and blocks past K stage as zeros (a unit fetched as zero words
// decodes to 0; the formats that decode at the store carry an inside-W flag instead), so any
// M, N and K a whole number of blocks work. Every global index is
// guarded (the kernel runs without naga's bounds checks): x reads by (row < M, column < K), W
// reads by (row < N, block < blocks) and the one word past a unit's data by min(, p.last).
// The result goes through a per-subgroup 16x16 f32 scratch (Cs; two under SwiGLU) to y, every
// element checked against M and N, with the epilogue folded in: SwiGLU (silu(gate) * up, as
// quant_matvec.wgsl) and the residual (y + r, r of y's dtype).
// Split K (few tiles: batched decode's 16 rows by a deep W): workgroup tile g of split s sums
// blocks s KB_PER .. (s + 1) KB_PER only and stores its f32 partial sums at slice s of `out`
// (then f32 [SPLITS, M, N]); quant_coop_split_sum.wgsl adds the slices in order (and the
// residual). Without a split: one slice of all the blocks, y itself.
//
// Numerics: x and the decoded weights are rounded to f16 (relative 2^-11; past 65504 they become
// infinities), their products are exact in f32 and summed in f32 by the tensor cores.
{{ENABLE}}
{{QUANT_COMMON}}

struct Params {
    m: u32,
    n: u32,
    k: u32,
    blocks: u32,
    row_h: u32,
    tiles_m: u32,  // workgroup tiles along m (tiles are numbered m fastest)
    groups: u32,   // workgroup tiles in all
    last: u32,     // the last word of w
    n_out: u32,    // columns of y: n, or n / 2 under SwiGLU
    kb_per: u32,   // blocks of K per split (a multiple of BPS; `blocks` without a split)
    splits: u32,   // splits of K (1: none)
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> out: array<{{OUT_T}}>;
{{RES_AND_PARAMS}}

const BM = {{BM}}u;
const BN = {{BN}}u;
const BPS = {{BPS}}u;
const BK = 32u * BPS;
const WARPS_N = {{WARPS_N}}u;
const SG = {{SG}}u;
const NT = {{NT}}u;
const SA = BK + 8u;   // row stride of As and Ws, in halves
const SA4 = SA / 4u;  // in vec4s

var<workgroup> As: array<vec4<f16>, {{AS_LEN}}>;  // [BM][SA]
var<workgroup> Ws: array<vec4<f16>, {{WS_LEN}}>;  // [BN][SA]
var<workgroup> Cs: array<f32, {{CS_LEN}}>;        // [subgroups][16][16]

// The raw words of unit u of 32-value group gb of the W row at halfword hrow (zeros where `ok`
// is false).
{{FETCH_FN}}

// Unit u of group gb of the row at halfword hrow from its raw words (quant_common's decode,
// from registers).
{{UNPACK_FN}}

// Row r of Ws: the W row it holds and whether that is inside W. Under SwiGLU each 32 rows are
// the gate rows of 16 output columns then their up rows (N / 2 further), so that a subgroup
// holds both accumulators of its outputs.
{{W_ROW_FN}}

fn silu(v: f32) -> f32 {
    // exp(-v) overflows below -88: the limit, -0 (and v / inf would be NaN at v = -inf).
    return select(v / (1.0 + exp(-v)), -0.0, v < -88.0);
}

@compute @workgroup_size({{NT}}, 1, 1)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let gs = wid.x + wid.y * nwg.x;
    // Uniform over the workgroup: every invocation leaves or none does.
    if (gs >= p.groups * p.splits) {
        return;
    }
    // Tile g of K split s: blocks kb0 .. kb1, stored at slice s of out.
    let g = gs % p.groups;
    let s = gs / p.groups;
    let kb0 = s * p.kb_per;
    let kb1 = min(p.blocks, kb0 + p.kb_per);
    let obase = s * p.m * p.n_out;
    let row0 = (g % p.tiles_m) * BM;
    let col0 = (g / p.tiles_m) * {{OUT_BN}}u;  // the tile's first column of y
    let k4 = p.k / 4u;
    // This subgroup's corner in the workgroup tile.
    let wr = (sg / WARPS_N) * {{WTM}}u;
    let wc = (sg % WARPS_N) * {{WTN}}u;
    // Every unit this invocation stages is unit `uu` of its block (NT is a multiple of 4).
    let uu = lid % 4u;

{{ACC_DECL}}{{FETCH_DECL}}
    for (var b0 = kb0; b0 < kb1; b0 += BPS) {
{{STORE_TILES}}        workgroupBarrier();
{{FETCH_NEXT}}        for (var kk = 0u; kk < BK; kk += 16u) {
{{INNER}}
        }
        workgroupBarrier();
    }

{{STORE}}
}
